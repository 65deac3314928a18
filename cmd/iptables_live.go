package cmd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// completeLive dumps the rules of a running pod and takes the pod's own
// context: addresses, container ports, proxy uid, DNS servers, and the
// arguments its rules were written from.
func (o *IptablesOptions) completeLive(ctx context.Context) error {
	if len(o.FromFiles) > 0 {
		return usageErrorf("give either a POD or --from-file, not both")
	}
	if o.Via != nsexec.ViaEphemeral && o.Via != nsexec.ViaNode {
		return usageErrorf("--via %q: ephemeral or node", o.Via)
	}
	if o.Interval < 0 {
		return usageErrorf("--interval must be positive")
	}
	ns, _, ic, err := connect(o.configFlags)
	if err != nil {
		return err
	}
	o.namespace = ns
	client := ic.Kube
	name := strings.TrimPrefix(strings.TrimPrefix(o.Pod, "pod/"), "pods/")
	var pod *corev1.Pod
	if strings.Contains(name, "/") {
		// A workload: one of its pods, picked as kubectl logs picks it.
		pods, _, err := resolvePods(ctx, o.configFlags, ic, o.namespace, []string{name})
		if err != nil {
			return err
		}
		if pod = pickPod(pods); len(pods) > 1 {
			fmt.Fprintf(o.ErrOut, "Found %d pods, using pod/%s (the fleet audit reads them all: kubectl mesh iptables -n %s -l SELECTOR)\n", len(pods), pod.Name, o.namespace)
		}
		name, o.Pod = pod.Name, pod.Name
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
	image := o.Image
	if image == "" {
		image = imageOf(pod, o.Container)
	}
	_, ambient := pod.Annotations[istio.AnnotationRedirection]
	if image == "" && ambient && o.Container == "" {
		// An ambient pod has no proxy container: the istio-cni agent on its
		// node has the tools, and its image is on the node already.
		if image, err = agentImage(ctx, ic, pod.Spec.NodeName); err != nil {
			return usageErrorf("pod %s is in ambient mode and has no istio-proxy container; the istio-cni agent's image on node %s could not be looked up (%v): give an image with iptables with --image", name, pod.Spec.NodeName, explainAPIError(err, "list pods -l "+injection.AmbientCNISelector))
		}
	}
	if image == "" {
		if o.Container != "" {
			return usageErrorf("pod %s has no container %q", name, o.Container)
		}
		return usageErrorf("pod %s has no istio-proxy or istio-init container whose image has iptables: give one with --image", name)
	}
	res, err := (&nsexec.Runner{Client: client}).Dump(ctx, nsexec.Request{Pod: pod, Via: o.Via, Image: image,
		NodeNamespace: o.NodeNS, Interval: o.Interval, Timeout: o.Timeout, AllowNotRunning: o.Force})
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return &InterruptedError{Err: fmt.Errorf("interrupted (a node pod, if one was created, has been deleted)")}
		}
		return err
	}
	o.live = res
	if err := o.useLive(pod, res); err != nil {
		return err
	}
	return o.expectAmbient(ctx, ic, pod)
}

// agentImage is the image of the istio-cni agent on node ("" when none
// runs there): it has the iptables tools, and it is on the node already.
func agentImage(ctx context.Context, ic *inspect.Client, node string) (string, error) {
	agent, err := ic.AmbientAgent(ctx, node)
	if err != nil || agent == nil || len(agent.Spec.Containers) == 0 {
		return "", err
	}
	return agent.Spec.Containers[0].Image, nil
}

// expectAmbient sets what a pod's ambient in-pod rules are compared with:
// istio-cni's ConfigMap and the pod's annotations. Unread, nothing is
// compared, and the note says why.
func (o *IptablesOptions) expectAmbient(ctx context.Context, ic *inspect.Client, pod *corev1.Pod) error {
	ambient := false
	for _, d := range o.input.Dumps {
		ambient = ambient || capture.IsAmbientInPod(d)
	}
	if !ambient || o.input.ExpectArgs != nil {
		return nil
	}
	cm, unread, err := istioCNIConfig(ctx, ic)
	switch {
	case err != nil:
		return err
	case cm == nil:
		o.input.Notes = append(o.input.Notes, unread+": the in-pod rules are not compared")
	default:
		o.input.Ambient = ambientExpectation(cm, pod)
	}
	return nil
}

// istioCNIConfig reads istio-cni's ConfigMap, what ambient pods' in-pod
// rules are compared with; without it, unread says why.
func istioCNIConfig(ctx context.Context, ic *inspect.Client) (cm *corev1.ConfigMap, unread string, err error) {
	cm, err = ic.IstioCNIConfig(ctx)
	switch {
	case apierrors.IsForbidden(err):
		return nil, "istio-cni's ConfigMap could not be read (" + explainAPIError(err, "list configmaps -l istio.io/rev (all namespaces)").Error() + ")", nil
	case err != nil:
		return nil, "", err
	case cm == nil:
		return nil, "no istio-cni ConfigMap (with AMBIENT_ENABLED) was found", nil
	}
	return cm, "", nil
}

// ambientExpectation is what istio-cni's ConfigMap cm and the pod's
// annotations call for, saying which ConfigMap.
func ambientExpectation(cm *corev1.ConfigMap, pod *corev1.Pod) *capture.AmbientConfig {
	a := capture.AmbientConfigFor(cm.Data, pod.Annotations)
	a.Source = strings.Replace(a.Source, "istio-cni's ConfigMap", "istio-cni's ConfigMap "+cm.Namespace+"/"+cm.Name, 1)
	return a
}

func imageOf(p *corev1.Pod, container string) string {
	all := append(append([]corev1.Container{}, p.Spec.Containers...), p.Spec.InitContainers...)
	for _, want := range []string{container, istio.ProxyContainer, istio.InitContainer, istio.ValidationContainer} {
		if want == "" {
			continue
		}
		for _, c := range all {
			if c.Name == want {
				return c.Image
			}
		}
		if container != "" {
			return ""
		}
	}
	return ""
}

// useLive fills the explanation's input from a live pod's dump.
func (o *IptablesOptions) useLive(pod *corev1.Pod, res *nsexec.Result) error {
	in, raw, backend, err := liveInput(pod, res)
	if errors.Is(err, errNoRules) {
		// Read, and empty: compared with what the pod calls for, every rule is missing.
		in.Dumps, backend, err = []*capture.Ruleset{{Family: "ipv4"}}, "no rules in any table", nil
	}
	if err != nil {
		return err
	}
	for _, n := range in.Notes {
		if o.Connections || !strings.HasPrefix(n, "the connection tracking table") {
			o.input.Notes = append(o.input.Notes, n)
		}
	}
	o.input.Dumps = append(o.input.Dumps, in.Dumps...)
	o.input.Context, o.input.PodIPs, o.input.Nameservers = in.Context, in.PodIPs, in.Nameservers
	if in.ExpectArgs != nil {
		o.input.ExpectArgs, o.input.ExpectEnv, o.input.ExpectFrom = in.ExpectArgs, in.ExpectEnv, in.ExpectFrom
	}
	o.raw = append(o.raw, raw...)
	o.liveBackend = backend
	if o.Connections {
		o.input.Conntrack, o.input.Sockets, o.input.ConntrackRead = in.Conntrack, in.Sockets, in.ConntrackRead
		if !in.ConntrackRead {
			o.input.Notes = append(o.input.Notes, "--connections: the pod's connection tracking table could not be read")
		}
	}
	return nil
}

// liveInput picks, per family, the backend that holds a live pod's rules,
// and builds the explanation's input from the dump and the pod: its
// addresses, ports, proxy uid, DNS servers and the arguments its rules were
// written from. backend says which backends held rules.
func liveInput(pod *corev1.Pod, res *nsexec.Result) (in capture.CaptureInput, raw [][]byte, backend string, err error) {
	last := 1
	for _, s := range res.Sections {
		last = max(last, s.Round)
	}
	section := func(round int, tool string) string {
		for _, s := range res.Sections {
			if s.Round == round && s.Name == tool {
				return s.Text
			}
		}
		return ""
	}
	parse := func(text string) *capture.Ruleset {
		if strings.TrimSpace(text) == "" {
			return nil
		}
		rs, err := capture.ParseSave([]byte(text))
		if err != nil {
			return nil
		}
		return rs
	}
	backends := []string{}
	for _, fam := range []string{"iptables", "ip6tables"} {
		nft, legacy := parse(section(last, fam+"-nft-save")), parse(section(last, fam+"-legacy-save"))
		chosen, backend := nft, "nft"
		switch {
		case nft != nil && nft.RuleCount() > 0 && legacy != nil && legacy.RuleCount() > 0:
			in.Notes = append(in.Notes, fmt.Sprintf("%s: both the nft and the legacy backend hold rules (%d and %d); the nft rules are shown — a mix of backends is a known cause of broken capture", fam, nft.RuleCount(), legacy.RuleCount()))
		case (nft == nil || nft.RuleCount() == 0) && legacy != nil && legacy.RuleCount() > 0:
			chosen, backend = legacy, "legacy"
		}
		if chosen == nil || chosen.RuleCount() == 0 && fam == "ip6tables" {
			continue
		}
		if backend == "nft" && (legacy == nil || legacy.RuleCount() == 0) {
			// The legacy dump was read too and holds no rules: its "legacy
			// tables present" warning says nothing about this pod's capture.
			kept := chosen.Warnings[:0]
			for _, w := range chosen.Warnings {
				if !strings.Contains(w, "iptables-legacy tables present") {
					kept = append(kept, w)
				}
			}
			chosen.Warnings = kept
		}
		if last > 1 {
			if before := parse(section(1, fam+"-"+backend+"-save")); before != nil {
				chosen.SetDeltas(before)
			}
		}
		raw = append(raw, []byte(section(last, fam+"-"+backend+"-save")))
		in.Dumps = append(in.Dumps, chosen)
		backends = append(backends, fam+": "+backend)
	}
	// The arguments the pod's rules were written from: they say whether it uses
	// the native nftables mode, and what its rules are compared with.
	podArgs, podEnv, podSource, podHasArgs := capture.CaptureArgsFromPod(pod)
	native := false
	for _, a := range podArgs {
		native = native || a == "--native-nftables" || a == "--native-nftables=true"
	}
	nftText := section(last, "nft")
	if strings.Contains(nftText, nsexec.NftMissing) && native {
		in.Notes = append(in.Notes, "the pod's rules are written in Istio's native nftables mode, and the image they were read with has no nft: its inet istio-proxy-* tables could not be read (give --image with nft)")
	}
	if v4, v6, ok, err := capture.ParseNftRuleset([]byte(nftText)); err != nil && !strings.Contains(nftText, nsexec.NftMissing) {
		in.Notes = append(in.Notes, "nft list ruleset could not be read: "+err.Error())
	} else if err == nil && ok {
		before4, before6, okBefore, _ := capture.ParseNftRuleset([]byte(section(1, "nft")))
		for i, rs := range []*capture.Ruleset{v4, v6} {
			if rs.RuleCount() == 0 {
				continue
			}
			if last > 1 && okBefore {
				rs.SetDeltas([]*capture.Ruleset{before4, before6}[i])
			}
			in.Dumps = append(in.Dumps, rs)
		}
		raw = append(raw, []byte(section(last, "nft")))
		backends = append(backends, "inet istio-proxy-* tables: native nftables")
	}
	// No table holds a rule: so it is, when the IPv4 rules were read (by
	// either backend's tool: a tool an image lacks prints "not found");
	// otherwise nothing is known of them.
	noRules := false
	if len(in.Dumps) == 0 {
		readable := func(text string) bool {
			if strings.TrimSpace(text) == "" {
				return true
			}
			_, err := capture.ParseSave([]byte(text))
			return err == nil
		}
		if !readable(section(last, "iptables-nft-save")) && !readable(section(last, "iptables-legacy-save")) {
			return in, nil, "", fmt.Errorf("the dump returned no iptables-save output: %q", render.Truncate(section(last, "iptables-nft-save"), 200))
		}
		noRules = true
	}
	backend = strings.Join(backends, ", ")

	ctx := &capture.PodContext{ProxyUID: istio.ProxyUID, Ports: map[int]string{}}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...) {
		for _, port := range c.Ports {
			label := fmt.Sprintf("containerPort of %s", c.Name)
			if port.Name != "" {
				label = fmt.Sprintf("%s on %s", port.Name, c.Name)
			}
			ctx.Ports[int(port.ContainerPort)] = label
		}
		if c.Name == istio.ProxyContainer && c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			ctx.ProxyUID = fmt.Sprint(*c.SecurityContext.RunAsUser)
		}
	}
	in.Context = ctx
	for _, ip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			in.PodIPs = append(in.PodIPs, a)
		}
	}
	for _, line := range strings.Split(section(1, "resolv.conf"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "nameserver" {
			if _, err := netip.ParseAddr(f[1]); err == nil {
				in.Nameservers = append(in.Nameservers, f[1])
			}
		}
	}
	if podHasArgs {
		in.ExpectArgs, in.ExpectEnv, in.ExpectFrom = podArgs, podEnv, podSource
	}
	if ct := section(last, "conntrack"); strings.Contains(ct, nsexec.ConntrackMissing) {
		in.Notes = append(in.Notes, "the connection tracking table could not be read (no /proc/net/nf_conntrack in the pod's network namespace, no conntrack tool in the image)")
	} else {
		in.Conntrack, in.Sockets = ct, section(last, "sockets")
		for _, s := range res.Sections {
			in.ConntrackRead = in.ConntrackRead || s.Round == last && s.Name == "conntrack"
		}
	}
	if noRules {
		return in, raw, "", errNoRules
	}
	return in, raw, backend, nil
}

// errNoRules: the rules were read, and no table holds one.
var errNoRules = errors.New("no table of the pod's network namespace holds a rule (both backends, both families and nft read)")

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
