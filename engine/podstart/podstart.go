// Package podstart is the startup engine: it reads pods' events and the
// logs of their failing containers, and explains each pod's startup with
// explain/startup.
package podstart

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// Engine reads what a pod's startup report needs.
type Engine struct {
	Client *inspect.Client
	Now    func() time.Time
	// sweepLogs counts the pods whose logs a sweep read (Analyze).
	sweepLogs int
	// AllNamespaces: the run covers the cluster (Facts lists its
	// NetworkPolicies at once).
	AllNamespaces bool
	// owners are the workloads Facts read in this run; read the rest.
	owners inspect.WorkloadCache
	read   reads
}

// Events reads the events about pods in ns (one pod's when podName is set);
// events the user may not list make the answer incomplete, not an error.
func (e *Engine) Events(ctx context.Context, ns, podName string) (map[string][]corev1.Event, []string, error) {
	events, err := e.Client.PodEvents(ctx, ns, podName)
	if err == nil {
		return events, nil, nil
	}
	if !apierrors.IsForbidden(err) {
		return nil, nil, err
	}
	scope := "(all namespaces)"
	if ns != "" {
		scope = "in namespace " + ns
	}
	return nil, []string{"events: forbidden: the user may not list events " + scope}, nil
}

// sweepLogPods is how many pods with a failing init container a
// sweep reads the logs of (one request or two each): their causes are
// named, not only "its log says why"; past it, the sweep stays as fast.
const sweepLogPods = 20

// Analyze builds one pod's report; detail reads the logs of its failed
// containers. In a sweep (detail false) the logs of a failing init
// container are read too, for the first sweepLogPods such pods.
func (e *Engine) Analyze(ctx context.Context, p *corev1.Pod, events map[string][]corev1.Event, incomplete []string, detail bool) *startup.StartupReport {
	if !detail && e.sweepLogs < sweepLogPods && initFailing(p) {
		e.sweepLogs++
		detail = true
	}
	facts := startup.StartupFacts{Pod: p, Events: events[string(p.UID)], Now: e.Now()}
	if ref := metav1.GetControllerOf(p); ref != nil {
		facts.OwnerKind = ref.Kind
	}
	if w := inspect.OwnerOf(p); w != nil {
		facts.Workload = strings.ToLower(w.Kind) + "/" + w.Name
	}
	if detail {
		facts.Logs = e.failedLogs(ctx, p)
	}
	r := startup.AnalyzeStartup(facts)
	if p.Spec.NodeName == "" {
		r.Notes = append(r.Notes, "not scheduled yet: no container has been created (see the events for why)")
	}
	r.Incomplete = append(r.Incomplete, incomplete...)
	for _, c := range append(append([]startup.ContainerStartup(nil), r.InitContainers...), r.Containers...) {
		if c.Log != nil && c.Log.Unavailable != "" {
			r.Incomplete = append(r.Incomplete, "log of "+c.Name+": "+c.Log.Unavailable)
		}
	}
	return r
}

// initFailing: a container of the pod (istio-init, istio-validation, the
// app's init containers, the app, the proxy) has failed: its log names the
// cause.
func initFailing(p *corev1.Pod) bool {
	for _, s := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if t := s.State.Terminated; t != nil && t.ExitCode != 0 {
			return true
		}
		if t := s.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 && s.State.Terminated == nil {
			return true
		}
	}
	return false
}

// failedLogs reads the log tails of the init containers that failed and of
// containers that crash-loop, and of an init container that holds the pod
// in init for over a minute: the only logs the report needs.
func (e *Engine) failedLogs(ctx context.Context, p *corev1.Pod) map[string]startup.LogTail {
	logs := map[string]startup.LogTail{}
	check := func(sts []corev1.ContainerStatus, init bool) {
		for _, s := range sts {
			bad := s.State.Terminated != nil && s.State.Terminated.ExitCode != 0 ||
				s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff" ||
				s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.ExitCode != 0
			// An init container running while the pod waits in init for
			// over a minute: its log says what it waits for.
			held := p.Status.Phase == corev1.PodPending && s.State.Running != nil && init && e.Now().Sub(s.State.Running.StartedAt.Time) > time.Minute
			if bad || held {
				logs[s.Name] = e.Client.LogTail(ctx, p, s.Name, s.RestartCount > 0, 20)
			}
		}
	}
	check(p.Status.InitContainerStatuses, true)
	check(p.Status.ContainerStatuses, false)
	return logs
}

// PendingEvents are events being read in the background (EventsAsync).
type PendingEvents struct {
	done       chan struct{}
	cancel     context.CancelFunc
	events     map[string][]corev1.Event
	incomplete []string
	err        error
}

// EventsAsync starts reading the events about the pods in ns (all
// namespaces for ""), for a sweep to use while the pods stream in. Wait
// returns them; Stop ends the read and waits for it.
func (e *Engine) EventsAsync(ctx context.Context, ns string) *PendingEvents {
	ctx, cancel := context.WithCancel(ctx)
	p := &PendingEvents{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(p.done)
		p.events, p.incomplete, p.err = e.Events(ctx, ns, "")
	}()
	return p
}

// Wait waits for the events, as often as asked.
func (p *PendingEvents) Wait() (map[string][]corev1.Event, []string, error) {
	<-p.done
	return p.events, p.incomplete, p.err
}

// Stop cancels the read, if it still runs, and waits for it.
func (p *PendingEvents) Stop() {
	p.cancel()
	<-p.done
}
