package diagnose

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// The waiting reasons the kubelet reports (and one it may report one day):
// the generator draws from them.
var genWaiting = []string{"ContainerCreating", "PodInitializing", "CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull",
	"CreateContainerConfigError", "CreateContainerError", "RunContainerError", "InvalidImageName", "PreStartHookError", "PostStartHookError",
	"ContainerStatusUnknown", "SomeReasonOfAFutureKubelet"}

// genStatus is a random status of container name.
func genStatus(r *rand.Rand, name string, age time.Duration) *corev1.ContainerStatus {
	started := metav1.NewTime(t0.Add(time.Duration(r.Int64N(int64(age) + 1))))
	st := &corev1.ContainerStatus{Name: name, RestartCount: int32(r.IntN(3)) * int32(r.IntN(5))}
	switch r.IntN(4) {
	case 0:
		st.State.Waiting = &corev1.ContainerStateWaiting{Reason: genWaiting[r.IntN(len(genWaiting))], Message: "the kubelet's message"}
	case 1:
		st.State.Running = &corev1.ContainerStateRunning{StartedAt: started}
		st.Ready = r.IntN(3) > 0
		yes := true
		st.Started = &yes
	case 2:
		code := int32(0)
		if r.IntN(2) == 0 {
			code = []int32{1, 2, 126, 127, 137, 143}[r.IntN(6)]
		}
		reason := map[bool]string{true: "Completed", false: []string{"Error", "OOMKilled", "ContainerCannotRun"}[r.IntN(3)]}[code == 0]
		st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: started, FinishedAt: started}
	default:
		return nil // not created yet
	}
	if st.RestartCount > 0 && r.IntN(2) == 0 {
		st.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: int32(r.IntN(3)), Reason: "Error", StartedAt: started, FinishedAt: started}
	}
	return st
}

// genPod is a random pod: injected or not, any phase, containers in any
// state, conditions or none.
func genPod(r *rand.Rand) (*corev1.Pod, time.Duration) {
	age := time.Duration(r.IntN(40*60)) * time.Second
	p := pod(nil)
	if r.IntN(4) == 0 { // a user init container
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "migrate"})
	}
	if r.IntN(5) == 0 { // not injected
		p.Spec.InitContainers = p.Spec.InitContainers[1:]
		p.Spec.Containers = p.Spec.Containers[1:]
	}
	p.Status = corev1.PodStatus{Phase: []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown}[r.IntN(6)]}
	if r.IntN(6) == 0 {
		p.Spec.NodeName = ""
		p.Status.Phase = corev1.PodPending
		if r.IntN(2) == 0 {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient memory."})
		}
	} else {
		for _, c := range p.Spec.InitContainers {
			if st := genStatus(r, c.Name, age); st != nil {
				p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, *st)
			}
		}
		for _, c := range p.Spec.Containers {
			if st := genStatus(r, c.Name, age); st != nil {
				p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, *st)
			}
		}
		if r.IntN(3) > 0 {
			ready := corev1.ConditionFalse
			if r.IntN(2) == 0 {
				ready = corev1.ConditionTrue
			}
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: ready,
				LastTransitionTime: metav1.NewTime(t0.Add(time.Duration(r.Int64N(int64(age) + 1))))})
		}
	}
	if p.Status.Phase == corev1.PodFailed && r.IntN(2) == 0 {
		p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: memory."
	}
	return p, age
}

// broken is the invariant's own reading of a pod, written apart from the
// checks: definitely broken (the platform said no: a failed pod, a
// container that failed or cannot start, an unschedulable pod), or not
// serving past its start.
func broken(p *corev1.Pod, now time.Time) (definitely, notServing bool) {
	if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodUnknown {
		return true, true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == "Unschedulable" {
			return true, true
		}
	}
	for _, st := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if w := st.State.Waiting; w != nil && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
			return true, true
		}
		if t := st.State.Terminated; t != nil && t.ExitCode != 0 {
			return true, true
		}
		if t := st.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 && st.State.Terminated == nil && st.State.Running != nil && isInit(p, st.Name) {
			return true, true // an init container running again after it failed
		}
	}
	if p.Status.Phase == corev1.PodSucceeded {
		return false, false
	}
	ready, since, _ := readiness(p)
	return false, !ready && now.Sub(since) >= grace(p)
}

func isInit(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// Broken is never "pass": over generated pod states, a pod the platform
// reports as failed is a fail, one not serving past its start is at least a
// warning, "stuck in init" never stands first when an init container has a
// reason, and every finding has a code, evidence and (but for info) a fix.
func TestPropertyBrokenIsNeverPass(t *testing.T) {
	const n = 20000
	r := rand.New(rand.NewPCG(35, 2026))
	var definitelyBroken, notServing, healthy int
	for i := 0; i < n; i++ {
		p, age := genPod(r)
		now := t0.Add(age)
		s := startup.AnalyzeStartup(startup.StartupFacts{Pod: p, Now: now})
		d := Diagnose(Facts{Injection: injected(nil), Pod: p, Startup: s})
		definitely, notServed := broken(p, now)
		desc := func() string {
			return fmt.Sprintf("case %d: %s; age %s; conditions %v: %s %s: %s", i, catState(p), age, p.Status.Conditions, d.Status, d.First, d.Verdict)
		}
		switch {
		case definitely:
			definitelyBroken++
			if d.Status != Fail {
				t.Fatalf("a pod the platform reports as failed is not a fail: %s", desc())
			}
		case notServed:
			notServing++
			if d.Status == Pass {
				t.Fatalf("a pod not serving past its start is a pass: %s", desc())
			}
		default:
			healthy++
		}
		for _, f := range d.Findings {
			if f.Code == "" || f.Evidence == "" || f.Fix == "" && f.Status != Info && f.Status != Unknown {
				t.Fatalf("a finding without code, evidence or fix: %+v in %s", f, desc())
			}
		}
		if d.Code == CodeStuckInInit {
			for _, st := range p.Status.InitContainerStatuses {
				if w := st.State.Waiting; w != nil && !benignWaiting[w.Reason] || st.State.Terminated != nil && st.State.Terminated.ExitCode != 0 {
					t.Fatalf("stuck in init stands first though init container %s has a reason: %s", st.Name, desc())
				}
			}
		}
	}
	t.Logf("%d generated pods: %d failed by the platform's word (all fail), %d not serving past their start (none pass), %d otherwise", n, definitelyBroken, notServing, healthy)
	testreport.Count(t, "diagnose invariant: %d generated pod states (%d failed, %d not serving), none broken called pass", n, definitelyBroken, notServing)
}

// catState is a short account of a pod's containers for a failure message.
func catState(p *corev1.Pod) string {
	var parts []string
	for _, st := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		s := st.Name + "="
		switch {
		case st.State.Waiting != nil:
			s += "waiting:" + st.State.Waiting.Reason
		case st.State.Running != nil:
			s += fmt.Sprintf("running(ready %v)", st.Ready)
		case st.State.Terminated != nil:
			s += fmt.Sprintf("exit %d", st.State.Terminated.ExitCode)
		}
		if lt := st.LastTerminationState.Terminated; lt != nil {
			s += fmt.Sprintf(",last exit %d", lt.ExitCode)
		}
		parts = append(parts, s+fmt.Sprintf(",%d restarts", st.RestartCount))
	}
	return fmt.Sprintf("phase %s node %q [%s]", p.Status.Phase, p.Spec.NodeName, strings.Join(parts, " "))
}

// A workload short of its pods is never a pass, and a fail once its
// controller says why (or its start is past).
func TestPropertyShortWorkloadIsNeverPass(t *testing.T) {
	r := rand.New(rand.NewPCG(36, 2026))
	const n = 5000
	short := 0
	for i := 0; i < n; i++ {
		w := &WorkloadState{Kind: []string{"Deployment", "StatefulSet", "DaemonSet", "Job"}[r.IntN(4)], Namespace: "shop", Name: "web",
			Desired: int32(r.IntN(4)), Since: t0, Now: t0.Add(time.Duration(r.IntN(600)) * time.Second)}
		w.Pods = int32(r.IntN(int(w.Desired) + 2))
		if r.IntN(2) == 0 {
			w.Events = []string{"FailedCreate (3×): Error creating: some admission said no"}
		}
		if w.Kind == "Job" && r.IntN(4) == 0 {
			w.Failed = "Failed (BackoffLimitExceeded): Job has reached the specified backoff limit"
		}
		if r.IntN(8) == 0 {
			w.EventsUnknown = "forbidden"
			w.Events = nil
		}
		inj := injected(func(rep *injection.InjectionReport) { rep.Kind, rep.Name = w.Kind, w.Name })
		d := Diagnose(Facts{Injection: inj, Workload: w, NoPod: "it has no pods"})
		if !w.Short() {
			if len(only(d.Findings, CodeWorkloadShort)) != 0 {
				t.Fatalf("case %d: a workload with its pods has a finding: %+v", i, d.Findings)
			}
			continue
		}
		short++
		want := Fail
		switch {
		case len(w.Events) > 0 || w.Failed != "":
		case w.EventsUnknown != "":
			want = Unknown
		case w.Now.Sub(w.Since) < StartGrace:
			want = Warning
		}
		if d.Status != want {
			t.Fatalf("case %d: %s wants %d, has %d (events %v, failed %q, unknown %q, %s old): %s, want %s: %s", i, w.Kind, w.Desired, w.Pods, w.Events, w.Failed, w.EventsUnknown, w.Now.Sub(w.Since), d.Status, want, d.Verdict)
		}
	}
	t.Logf("%d generated workloads, %d short of their pods: none called pass", n, short)
	testreport.Count(t, "diagnose invariant: %d generated workload states (%d short), none short called pass", n, short)
}
