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

// healthyWarnings are the codes that may warn on a healthy pod, each a
// hazard the pod has whatever its state now:
//   - KM-START-001: a classic sidecar without holdApplicationUntilProxyStarts
//     lets the app start before the proxy is ready; it did, or may on its
//     next start, even though it serves now;
//   - KM-INIT-007: a user init container runs after istio-init's capture,
//     before any proxy: its outbound connections go nowhere, whether or not
//     this run got by without them.
//
// No other code may warn, and none may fail.
var healthyWarnings = map[string]bool{CodeAppBeforeProxy: true, CodeInitCaptured: true}

// The healthy states genHealthy draws from.
const (
	healthyRestarted = "running and ready after restarts"
	healthyJob       = "a completed Job's pod"
	healthyOptedOut  = "opted out of injection"
	healthyNoPods    = "a workload wanting no pods"
	healthyAmbient   = "ambient, set up"
)

var healthyKinds = []string{healthyRestarted, healthyJob, healthyOptedOut, healthyNoPods, healthyAmbient}

// genReady is container name running and ready now, since a time in
// [from, now); with restarts (restarts > 0) its last run failed (any exit
// but 0) before that. A crash loop caught ready between two crashes is not
// healthy (startup's classify): a restarted container's run has outlived
// startup.SettleRun and its last failed run.
func genReady(r *rand.Rand, name string, from, now time.Time, restarts int32) corev1.ContainerStatus {
	yes := true
	st := corev1.ContainerStatus{Name: name, Ready: true, Started: &yes, RestartCount: restarts}
	start := from.Add(time.Duration(r.Int64N(int64(now.Sub(from)))))
	if r.IntN(2) == 0 && now.Sub(from) > startup.BackOffReset {
		// Within the kubelet's back-off reset: where ready and failing
		// were confused (issue #41).
		start = now.Add(-time.Duration(r.Int64N(int64(startup.BackOffReset))))
	}
	lastRun := time.Duration(r.IntN(300)) * time.Second
	settle := min(max(startup.SettleRun, lastRun), startup.BackOffReset)
	if now.Sub(from) < lastRun+settle {
		restarts, st.RestartCount = 0, 0 // too young a pod to have settled after a restart
	}
	if restarts > 0 {
		if now.Sub(start) < settle {
			start = now.Add(-settle - time.Duration(r.Int64N(int64(now.Sub(from)-settle-lastRun)+1)))
		}
		if start.Before(from.Add(lastRun)) {
			lastRun = start.Sub(from)
		}
		code := []int32{1, 2, 137, 143, 255}[r.IntN(5)]
		reason := map[bool]string{true: "OOMKilled", false: "Error"}[code == 137]
		msg := []string{"", "database not reachable yet", "panic: dial tcp 10.96.0.12:5432: connect: connection refused\ngoroutine 1 [running]:"}[r.IntN(3)]
		lastStart := start.Add(-lastRun - time.Duration(r.IntN(40))*time.Second)
		if lastStart.Before(from) {
			lastStart = from
		}
		st.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg,
			StartedAt: metav1.NewTime(lastStart), FinishedAt: metav1.NewTime(lastStart.Add(lastRun))}
	}
	st.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(start)}
	return st
}

// genRestarts is a restart count: none in half the containers, else up to
// 9.
func genRestarts(r *rand.Rand) int32 {
	if r.IntN(2) == 0 {
		return 0
	}
	return 1 + int32(r.IntN(9))
}

// completed is an init container's status: completed, at its first try or
// after a failed one.
func completed(r *rand.Rand, name string, at time.Time) corev1.ContainerStatus {
	st := corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed",
		StartedAt: metav1.NewTime(at), FinishedAt: metav1.NewTime(at.Add(time.Second))}}}
	if r.IntN(3) == 0 {
		st.RestartCount = 1
		st.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: []int32{1, 2, 137}[r.IntN(3)], Reason: "Error",
			StartedAt: metav1.NewTime(at.Add(-3 * time.Second)), FinishedAt: metav1.NewTime(at.Add(-2 * time.Second))}
	}
	return st
}

// readyConditions are a Running pod's conditions once it is Ready.
func readyConditions(at time.Time) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		out = append(out, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)})
	}
	return out
}

// genHealthy is a random healthy state and its facts: a pod Running and
// Ready now whatever its past restarts (a classic sidecar, held or not, a
// native one; istio-init and a user init container completed, maybe after
// a retry), a completed Job's pod (its native sidecar ended by the
// kubelet), a pod opted out of injection, a workload that wants no pods,
// an ambient pod that istio-cni and ztunnel set up.
func genHealthy(r *rand.Rand) (kind string, f Facts, now time.Time) {
	kind = healthyKinds[r.IntN(len(healthyKinds))]
	age := time.Minute + time.Duration(r.Int64N(int64(72*time.Hour)))
	if r.IntN(2) == 0 {
		age = time.Minute + time.Duration(r.Int64N(int64(15*time.Minute)))
	}
	now = t0.Add(age)
	yes, no := true, false
	always := corev1.ContainerRestartPolicyAlways
	p := pod(nil)
	p.Status.Conditions = nil
	// When the pod's own containers may start: after its init containers.
	from := t0.Add(10 * time.Second)
	switch kind {
	case healthyNoPods:
		w := &WorkloadState{Kind: []string{"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"}[r.IntN(4)], Namespace: "shop", Name: "web", Since: t0, Now: now}
		inj := injected(func(rep *injection.InjectionReport) { rep.Kind, rep.Name = w.Kind, w.Name })
		return kind, Facts{Injection: inj, Workload: w, NoPod: "it has no pods: none was created"}, now
	case healthyOptedOut, healthyAmbient:
		p = ambientPod(nil)
		inj := injected(func(rep *injection.InjectionReport) {
			rep.Injected, rep.Expected, rep.Mismatch = &no, &no, &no
			rep.Verdict = "Not injected: the pod opts out (sidecar.istio.io/inject=false)"
		})
		p.Annotations = map[string]string{"sidecar.istio.io/inject": "false"}
		if kind == healthyAmbient {
			p.Labels = map[string]string{"istio.io/dataplane-mode": "ambient"}
			p.Annotations = map[string]string{"ambient.istio.io/redirection": "enabled"}
			inj = injected(func(rep *injection.InjectionReport) {
				rep.Injected, rep.Expected, rep.Mismatch, rep.Ambient, rep.AmbientCapture = &no, &no, &no, true, injection.AmbientCaptured
				rep.Verdict = "Not injected: the pod is in ambient mode, captured by istio-cni for ztunnel"
			})
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{genReady(r, "app", t0.Add(2*time.Second), now, genRestarts(r))}
		p.Status.Conditions = readyConditions(now)
		return kind, Facts{Injection: inj, Pod: p}, now
	}
	// istio-init, maybe a user init container, then the proxy (classic,
	// held or not, or native) and the app.
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{completed(r, "istio-init", t0.Add(2*time.Second))}
	if r.IntN(3) == 0 {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "migrate"})
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, completed(r, "migrate", t0.Add(6*time.Second)))
	}
	native := kind == healthyJob || r.IntN(3) == 0
	if native {
		proxy := p.Spec.Containers[0]
		proxy.RestartPolicy, proxy.Lifecycle = &always, nil
		p.Spec.InitContainers = append(p.Spec.InitContainers, proxy)
		p.Spec.Containers = p.Spec.Containers[1:]
		p.Status.ContainerStatuses = p.Status.ContainerStatuses[1:]
	} else if r.IntN(2) == 0 {
		p.Spec.Containers[0].Lifecycle = nil // no hold: KM-START-001 may warn
	}
	if kind == healthyJob {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "nightly", Controller: &yes}}
		p.Labels = map[string]string{"job-name": "nightly", "batch.kubernetes.io/job-name": "nightly"}
		p.Spec.RestartPolicy = []corev1.RestartPolicy{corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure}[r.IntN(2)]
		done := t0.Add(age / 2)
		// The kubelet ends the native sidecar once the job's container has:
		// its exit code (SIGTERM, SIGKILL, or 0) means nothing.
		code := []int32{0, 143, 137}[r.IntN(3)]
		reason := map[bool]string{true: "Completed", false: "Error"}[code == 0]
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: "istio-proxy", Started: &no,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: at(8), FinishedAt: metav1.NewTime(done.Add(time.Second))}}})
		app := corev1.ContainerStatus{Name: "app", Started: &no, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed",
			StartedAt: at(10), FinishedAt: metav1.NewTime(done)}}}
		if p.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && r.IntN(2) == 0 {
			// It failed once, and its retry completed.
			app.RestartCount = 1
			app.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "database not reachable yet", StartedAt: at(9), FinishedAt: at(9)}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{app}
		p.Status.Phase = corev1.PodSucceeded
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at(9)},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: metav1.NewTime(done.Add(time.Second))},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, Reason: "PodCompleted", LastTransitionTime: metav1.NewTime(done.Add(time.Second))}}
		if r.IntN(3) == 0 {
			// Just done: the kubelet is stopping its native sidecar, and
			// the pod is Running, not Ready, a moment longer.
			p.Status.Phase = corev1.PodRunning
			just := metav1.NewTime(now.Add(-time.Duration(1+r.IntN(50)) * time.Second))
			p.Status.ContainerStatuses[0].State.Terminated.FinishedAt = just
			for i := 1; i < 3; i++ {
				p.Status.Conditions[i].LastTransitionTime = just
			}
			if r.IntN(2) == 0 {
				p.Status.InitContainerStatuses[len(p.Status.InitContainerStatuses)-1] = genReady(r, "istio-proxy", from, now, 0)
			}
			if r.IntN(2) == 0 {
				p.Status.Conditions[1].Reason, p.Status.Conditions[2].Reason = "ContainersNotReady", "ContainersNotReady"
			}
		}
		return kind, Facts{Injection: injected(nil), Pod: p}, now
	}
	if native {
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, genReady(r, "istio-proxy", from, now, genRestarts(r)))
	} else {
		p.Status.ContainerStatuses[0] = genReady(r, "istio-proxy", from, now, genRestarts(r))
	}
	p.Status.ContainerStatuses[len(p.Status.ContainerStatuses)-1] = genReady(r, "app", from, now, genRestarts(r))
	p.Status.Conditions = readyConditions(now)
	return kind, Facts{Injection: injected(nil), Pod: p}, now
}

// Healthy never fails (issue #41): over generated healthy states, no check
// fails, and only a hazard the pod really has (healthyWarnings) warns.
func TestPropertyHealthyIsNeverFail(t *testing.T) {
	const n = 20000
	r := rand.New(rand.NewPCG(41, 2026))
	byKind := map[string]int{}
	restarted, recent, warned := 0, 0, 0
	for i := 0; i < n; i++ {
		kind, f, now := genHealthy(r)
		byKind[kind]++
		if f.Pod != nil {
			f.Startup = startup.AnalyzeStartup(startup.StartupFacts{Pod: f.Pod, Now: now, OwnerKind: ownerKind(f.Pod)})
			for _, st := range append(append([]corev1.ContainerStatus(nil), f.Pod.Status.InitContainerStatuses...), f.Pod.Status.ContainerStatuses...) {
				if st.RestartCount > 0 && st.State.Running != nil && now.Sub(st.State.Running.StartedAt.Time) < startup.BackOffReset {
					recent++
				}
			}
			for _, st := range append(append([]corev1.ContainerStatus(nil), f.Pod.Status.InitContainerStatuses...), f.Pod.Status.ContainerStatuses...) {
				if st.RestartCount > 0 {
					restarted++
					break
				}
			}
		}
		d := Diagnose(f)
		desc := func() string {
			state := "no pod"
			if f.Pod != nil {
				state = catState(f.Pod)
			}
			return fmt.Sprintf("case %d (%s): %s; now +%s: %s %s: %s; findings %+v", i, kind, state, now.Sub(t0), d.Status, d.First, d.Verdict, d.Findings)
		}
		if d.Status == Fail {
			t.Fatalf("a healthy state fails: %s", desc())
		}
		for _, fd := range d.Findings {
			if fd.Status == Fail || fd.Status == Warning && !healthyWarnings[fd.Code] {
				t.Fatalf("a healthy state has a %s finding %s: %s", fd.Status, fd.Code, desc())
			}
		}
		for _, c := range d.Checks {
			if c.Status == Warning && !healthyWarnings[c.Code] {
				t.Fatalf("a healthy state warns in %s (%s): %s", c.Name, c.Code, desc())
			}
		}
		if f.Startup != nil {
			for _, h := range f.Startup.Hazards {
				if h.ID == "container-failing" {
					t.Fatalf("startup calls a healthy pod's %s failing: %s", h.Container, desc())
				}
			}
		}
		if d.Status == Warning {
			warned++
		}
	}
	t.Logf("%d generated healthy states %v, %d with restarts (%d containers ready again within the back-off reset): none fails, %d warn (only %v)", n, byKind, restarted, recent, warned, healthyWarnings)
	testreport.Count(t, "diagnose invariant: %d generated healthy states (%d with past restarts, %d containers ready again within the back-off reset), none called fail, %d warned of a real hazard", n, restarted, recent, warned)
}

// ownerKind is the kind of the pod's controller, "" for none.
func ownerKind(p *corev1.Pod) string {
	if ref := metav1.GetControllerOf(p); ref != nil {
		return ref.Kind
	}
	return ""
}
