package cmd

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

var origin = time.Date(2026, 11, 22, 3, 20, 0, 0, time.UTC)

func mt(s int) metav1.Time { return metav1.NewTime(origin.Add(time.Duration(s) * time.Second)) }

// A classic sidecar whose app starts before the slow proxy is ready, and a
// crash-looping istio-init: the plain renderings of both views.
func TestStartupGolden(t *testing.T) {
	yes, no := true, false
	slow := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-7d4b9-x2x8z", CreationTimestamp: mt(0)},
		Spec: corev1.PodSpec{NodeName: "node-1", InitContainers: []corev1.Container{{Name: "istio-init"}},
			Containers: []corev1.Container{{Name: "app"}, {Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.28.1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "istio-init", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: mt(1), FinishedAt: mt(2)}}}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", Ready: true, Started: &yes, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: mt(3)}}},
				{Name: "istio-proxy", Ready: true, Started: &yes, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: mt(3)}}},
			}},
	}
	events := []corev1.Event{
		{Reason: "Started", LastTimestamp: mt(3), Count: 1, Message: "Started container app", InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{app}"}},
		{Reason: "Unhealthy", LastTimestamp: mt(12), Count: 9, Message: "Startup probe failed: HTTP probe failed with statuscode: 503", InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{istio-proxy}"}},
	}
	r := startup.AnalyzeStartup(startup.StartupFacts{Pod: slow, Events: events, Now: origin.Add(time.Minute)})
	goldenAt(t, "startup-pod", func(p *render.Printer) { render.Startup(p, r) })

	broken := slow.DeepCopy()
	broken.Name = "broken-5c9-abcde"
	broken.Status.Phase = corev1.PodPending
	broken.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "istio-init", RestartCount: 3, Started: &no,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: mt(20), FinishedAt: mt(21)}}}}
	broken.Status.ContainerStatuses = nil
	rb := startup.AnalyzeStartup(startup.StartupFacts{Pod: broken, Now: origin.Add(5 * time.Minute),
		Logs: map[string]startup.LogTail{"istio-init": {Previous: []string{"error: failed parsing CIDR \"10.0.0.0/33\"\tprefix length out of range"}}}})
	goldenAt(t, "startup-broken", func(p *render.Printer) { render.Startup(p, rb) })
	ds := []*diagnose.Diagnosis{startupSlice(r, slow), startupSlice(rb, broken)}
	goldenAt(t, "startup-rows", func(p *render.Printer) { render.StartupRows(p, []*startup.StartupReport{r, rb}, ds) })
	// The slice startup shows is diagnose's: the broken pod's istio-init
	// failure, with diagnose's code and fix.
	if ds[1].Status != diagnose.Fail || ds[1].First != diagnose.CheckInit || ds[1].Code == "" || ds[1].Fix == "" || ds[0].Status == diagnose.Fail {
		t.Errorf("startup's slice: healthy %s, broken %s %s %s fix %q", ds[0].Status, ds[1].Status, ds[1].First, ds[1].Code, ds[1].Fix)
	}
	if out := string(renderAt(80, func(p *render.Printer) { render.Startup(p, rb) })); !strings.Contains(strings.Join(strings.SplitN(out, "\n", 5)[:4], "\n"), "failure istio-init") {
		t.Errorf("the failure is not in the first lines:\n%s", out)
	}
}
