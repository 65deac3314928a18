package cmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/engine"
	"github.com/kubectl-mesh/kubectl-mesh/engine/rules"
	"github.com/kubectl-mesh/kubectl-mesh/engine/target"
	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"
)

// readLive dumps the rules of a running pod and takes the pod's own
// context: addresses, container ports, proxy uid, DNS servers, and the
// arguments its rules were written from.
func (o *IptablesOptions) readLive(ctx context.Context) error {
	ic := o.client
	client := ic.Kube
	name := strings.TrimPrefix(strings.TrimPrefix(o.Pod, "pod/"), "pods/")
	var pod *corev1.Pod
	if strings.Contains(name, "/") {
		// A workload: one of its pods, picked as kubectl logs picks it.
		pods, _, err := target.Pods(ctx, o.configFlags, ic, o.namespace, []string{name})
		if err != nil {
			return err
		}
		if pod = target.Pick(pods); len(pods) > 1 {
			fmt.Fprintf(o.ErrOut, "Found %d pods, using pod/%s (the fleet audit reads them all: kubectl mesh iptables audit -n %s -l SELECTOR)\n", len(pods), pod.Name, o.namespace)
		}
		o.Pod = pod.Name
	} else {
		var err error
		pod, err = client.CoreV1().Pods(o.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("pod %q not found in namespace %q", name, o.namespace)
			}
			return err
		}
	}
	req := rules.Request{Pod: pod, Container: o.Container, Image: o.Image, Via: o.Via,
		NodeNamespace: o.NodeNS, Interval: o.Interval, Timeout: o.Timeout, Force: o.Force, Connections: o.Connections, Announce: announcer(o.ErrOut)}
	if o.DryRun == dryRunClient {
		req.Announce, req.DryRun = nil, dryRunPrinter(o.Out)
	}
	read, err := rules.ReadPod(ctx, ic, req)
	var input *engine.InputError
	switch {
	case errors.Is(err, nsexec.ErrDryRun):
		o.dryRan = true
		return nil
	case errors.Is(err, context.Canceled):
		return &InterruptedError{Err: fmt.Errorf("interrupted (a node pod, if one was created, has been deleted)")}
	case errors.As(err, &input):
		return &UsageError{Err: input.Err}
	case err != nil:
		return err
	}
	o.live, o.liveBackend, o.raw = read.Result, read.Backend, append(o.raw, read.Raw...)
	in := read.Input
	o.input.Notes = append(o.input.Notes, in.Notes...)
	o.input.Dumps = append(o.input.Dumps, in.Dumps...)
	o.input.Context, o.input.PodIPs, o.input.Nameservers = in.Context, in.PodIPs, in.Nameservers
	if in.ExpectArgs != nil {
		o.input.ExpectArgs, o.input.ExpectEnv, o.input.ExpectFrom = in.ExpectArgs, in.ExpectEnv, in.ExpectFrom
		o.input.IstioVersion, o.input.IstioVersionFrom = in.IstioVersion, in.IstioVersionFrom
	}
	o.input.Conntrack, o.input.Sockets, o.input.ConntrackRead = in.Conntrack, in.Sockets, in.ConntrackRead
	o.input.Ambient = in.Ambient
	return nil
}

func (o *IptablesOptions) liveInfo() *capture.LiveSource {
	if o.live == nil {
		return nil
	}
	l := &capture.LiveSource{Namespace: o.namespace, Pod: strings.TrimPrefix(o.Pod, "pod/"), Via: o.live.Via, Container: o.live.Container, Backend: o.liveBackend}
	if o.Interval > 0 {
		l.Interval = o.Interval.String()
	}
	return l
}
