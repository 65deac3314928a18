package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

var t0 = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

func at(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }

// pod is an injected pod: istio-init done, the proxy and the app running
// and ready; change alters it.
func pod(change func(p *corev1.Pod)) *corev1.Pod {
	yes := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", CreationTimestamp: at(0)},
		Spec: corev1.PodSpec{NodeName: "node-1", InitContainers: []corev1.Container{{Name: "istio-init"}},
			Containers: []corev1.Container{{Name: "istio-proxy"}, {Name: "app"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "istio-init", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: at(1), FinishedAt: at(2)}}}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "istio-proxy", Ready: true, Started: &yes, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(3)}}},
				{Name: "app", Ready: true, Started: &yes, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(3)}}},
			}},
	}
	p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"pilot-agent", "wait"}}}}
	if change != nil {
		change(p)
	}
	return p
}

// ambientPod is pod without Istio's containers (ambient mode); change alters it.
func ambientPod(change func(p *corev1.Pod)) *corev1.Pod {
	return pod(func(p *corev1.Pod) {
		p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
		p.Spec.Containers, p.Status.ContainerStatuses = p.Spec.Containers[1:], p.Status.ContainerStatuses[1:]
		if change != nil {
			change(p)
		}
	})
}

func injected(change func(r *injection.InjectionReport)) *injection.InjectionReport {
	yes, no := true, false
	r := &injection.InjectionReport{Namespace: "shop", Name: "web-1", Kind: "Pod", Injected: &yes, Expected: &yes, Mismatch: &no,
		Verdict: "Injected by revision default; re-created now, it would be injected the same way."}
	if change != nil {
		change(r)
	}
	return r
}

// Planted faults, each found as the right first failing check with its fix,
// and a healthy pod that fails none; unknown is never a pass.
func TestDiagnoseFirstFailingCheck(t *testing.T) {
	yes, no := true, false
	drift := &capture.CaptureReport{Expected: "container istio-init's arguments", Drift: &capture.Drift{Missing: []string{"-A ISTIO_OUTPUT -d 10.96.0.0/12 -j RETURN"}, Extra: []string{}}}
	clean := &capture.CaptureReport{Expected: "container istio-init's arguments", Drift: &capture.Drift{Missing: []string{}, Extra: []string{}}, ConnectionsSummary: "no live TCP or UDP flows"}
	bypass := &capture.CaptureReport{Expected: "x", Drift: &capture.Drift{Missing: []string{}, Extra: []string{}},
		Connections: []capture.Connection{{Flow: capture.Flow{Proto: "tcp"}, Class: "bypassing the proxy"}}}
	cases := []firstFailingCase{
		{name: "healthy", inj: injected(nil), pod: pod(nil), worst: Pass},
		{name: "healthy, rules and connections read", inj: injected(nil), pod: pod(nil), capture: clean, connections: true, worst: Pass},
		{name: "namespace labelled after the pod was created", inj: injected(func(r *injection.InjectionReport) {
			r.Injected, r.Mismatch, r.Fix = &no, &yes, "kubectl rollout restart deployment/web -n shop"
		}), pod: pod(nil), first: CheckInjection, fix: "rollout restart", worst: Fail},
		{name: "refused at admission", inj: injected(func(r *injection.InjectionReport) {
			r.Injected, r.CreationBlocked, r.Fix = nil, true, "kubectl get endpointslices -n istio-system"
		}), first: CheckInjection, fix: "endpointslices", worst: Fail},
		{name: "istio-init failing", inj: injected(nil), pod: pod(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.InitContainerStatuses[0] = corev1.ContainerStatus{Name: "istio-init", RestartCount: 3,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: at(1), FinishedAt: at(2)}}}
			p.Status.ContainerStatuses = nil
		}), first: CheckInit, fix: "kubectl logs web-1 -n shop -c istio-init", worst: Fail},
		{name: "app before a slow proxy, no hold (a warning)", inj: injected(nil), pod: pod(func(p *corev1.Pod) {
			p.Spec.Containers[0].Lifecycle = nil
			p.Status.ContainerStatuses[0].State.Running.StartedAt = at(9)
		}), first: CheckStart, fix: "holdApplicationUntilProxyStarts", worst: Warning},
		{name: "proxy never ready", inj: injected(nil), pod: pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Ready = false
		}), first: CheckStart, fix: "kubectl logs web-1 -n shop -c istio-proxy", worst: Fail},
		{name: "not scheduled: nothing has run (a warning, not an init failure)", inj: injected(nil), pod: pod(func(p *corev1.Pod) {
			p.Spec.NodeName, p.Status = "", corev1.PodStatus{Phase: corev1.PodPending}
		}), first: CheckStart, fix: "kubectl describe pod web-1 -n shop", worst: Warning},
		{name: "the app crash-looping", inj: injected(nil), pod: pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[1] = corev1.ContainerStatus{Name: "app", RestartCount: 4,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: at(4), FinishedAt: at(5)}}}
		}), first: CheckStart, fix: "kubectl logs web-1 -n shop -c app --previous", worst: Fail},
		{name: "the app's image cannot be pulled", inj: injected(nil), pod: pod(func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses[1] = corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}
		}), first: CheckStart, fix: "kubectl describe pod web-1 -n shop", worst: Fail},
		{name: "the app restarted, running again for longer than the kubelet's back-off reset, the pod not Ready (a warning)", inj: injected(nil), pod: pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[1].RestartCount = 2
			p.Status.ContainerStatuses[1].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", StartedAt: at(1), FinishedAt: at(2)}}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: at(3)}}
		}), now: startup.BackOffReset + time.Minute, first: CheckStart, fix: "kubectl logs web-1 -n shop -c app --previous", worst: Warning},
		{name: "the app restarted, running and ready again in a Ready pod (info: a pass)", inj: injected(nil), pod: pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[1].RestartCount = 2
			p.Status.ContainerStatuses[1].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", StartedAt: at(1), FinishedAt: at(2)}}
		}), now: 2 * time.Minute, worst: Pass},
		{name: "the app restarted once, ready for 5s: maybe a liveness kill loop between two kills (a failure)", inj: injected(nil), pod: pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[1].RestartCount = 1
			p.Status.ContainerStatuses[1].State.Running.StartedAt = at(30)
			p.Status.ContainerStatuses[1].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", StartedAt: at(12), FinishedAt: at(20)}}
		}), now: 35 * time.Second, first: CheckStart, fix: "kubectl logs web-1 -n shop -c app --previous", worst: Fail},
		{name: "the app restarted a minute ago after failing, running its next attempt, not ready (a failure)", inj: injected(nil), pod: pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[1].RestartCount = 2
			p.Status.ContainerStatuses[1].Ready = false
			p.Status.ContainerStatuses[1].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", StartedAt: at(1), FinishedAt: at(2)}}
		}), first: CheckStart, fix: "kubectl logs web-1 -n shop -c app --previous", worst: Fail},
		{name: "a crash loop caught between two crashes: restarted 4 times, ready for 20s (a failure)", inj: injected(nil), pod: pod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[1].RestartCount = 4
			p.Status.ContainerStatuses[1].State.Running.StartedAt = at(100)
			p.Status.ContainerStatuses[1].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: at(50), FinishedAt: at(80)}}
		}), now: 120 * time.Second, first: CheckStart, fix: "kubectl logs web-1 -n shop -c app --previous", worst: Fail},
		{name: "drifted rules", inj: injected(nil), pod: pod(nil), capture: drift, first: CheckCapture, fix: "kubectl delete pod web-1 -n shop", worst: Fail},
		{name: "a connection bypassing the proxy", inj: injected(nil), pod: pod(nil), capture: bypass, connections: true, first: CheckConnections, fix: "exclude", worst: Fail},
		{name: "rules unreadable: unknown, permission named", inj: injected(nil), pod: pod(nil), unreadable: "patch pods/ephemeralcontainers", connections: true, worst: Unknown},
		{name: "a manifest istio-init will fail on: predicted", inj: injected(func(r *injection.InjectionReport) {
			r.Kind, r.Injected, r.Mismatch = "Deployment", nil, nil
			r.InitFailure = `istiod admits traffic.sidecar.istio.io/includeOutboundPorts="abc" (it does not check that annotation), but istio-init will fail on it`
		}), noPod: "a manifest, not created yet", first: CheckInit, fix: "includeOutboundPorts", worst: Fail},
		{name: "refused at admission, no pod to check", inj: injected(func(r *injection.InjectionReport) {
			r.Kind, r.Injected, r.CreationBlocked, r.Fix = "ReplicaSet", nil, true, "kubectl get endpointslices -n istio-system"
		}), noPod: "admission refuses its pods", first: CheckInjection, fix: "endpointslices", worst: Fail},
		{name: "ambient pod no ztunnel took", inj: injected(func(r *injection.InjectionReport) {
			r.Injected, r.Expected, r.Mismatch, r.Ambient, r.AmbientCapture = &no, &no, &yes, true, injection.AmbientPending
			r.Fix = "kubectl get daemonset -A -l app=ztunnel"
		}), pod: ambientPod(func(p *corev1.Pod) {
			p.Annotations = map[string]string{"ambient.istio.io/redirection": "pending"}
		}), first: CheckStart, fix: "-l app=ztunnel", worst: Fail},
		{name: "ambient pod, CNI agent not ready", inj: injected(func(r *injection.InjectionReport) {
			r.Injected, r.Expected, r.Mismatch, r.Ambient, r.AmbientCapture = &no, &no, &yes, true, injection.AmbientNotSetUp
		}), pod: ambientPod(func(p *corev1.Pod) {
			p.Status.ContainerStatuses, p.Status.Phase = nil, corev1.PodPending
		}), events: []corev1.Event{{Reason: "FailedCreatePodSandBox", Count: 3, LastTimestamp: at(5),
			Message: `failed to setup network for sandbox "x": plugin type="istio-cni" failed (add): istio-cni cmdAdd failed to contact node Istio CNI agent: connection refused`}},
			first: CheckInit, fix: "k8s-app=istio-cni-node", worst: Fail},
		{name: "ambient pod istio-cni never set up (silently)", inj: injected(func(r *injection.InjectionReport) {
			r.Injected, r.Expected, r.Mismatch, r.Ambient, r.AmbientCapture = &no, &no, &yes, true, injection.AmbientNotSetUp
			r.Fix = "kubectl rollout restart deployment/web -n shop"
		}), pod: ambientPod(nil), first: CheckCapture, fix: "rollout restart", worst: Fail},
		{name: "prediction unknown, the dry run injects another revision: a mismatch, proven", inj: injected(func(r *injection.InjectionReport) {
			r.Expected, r.Mismatch, r.Needs, r.InjectedRevision = nil, nil, []string{"list mutatingwebhookconfigurations.admissionregistration.k8s.io"}, "default"
			r.Verified = &injection.Verification{Injected: true, Revision: "canary", Sidecar: "native"}
		}), pod: pod(nil), first: CheckInjection, fix: "re-create the pod", worst: Fail},
		{name: "prediction unknown, the dry run gives what the pod has: proven", inj: injected(func(r *injection.InjectionReport) {
			r.Expected, r.Mismatch, r.Needs, r.InjectedRevision = nil, nil, []string{"list mutatingwebhookconfigurations.admissionregistration.k8s.io"}, "default"
			r.Verified = &injection.Verification{Injected: true, Revision: "default", Sidecar: "native"}
		}), pod: pod(nil), worst: Pass},
		{name: "webhooks unreadable: unknown, not pass", inj: injected(func(r *injection.InjectionReport) {
			r.Expected, r.Mismatch, r.Needs = nil, nil, []string{"list mutatingwebhookconfigurations.admissionregistration.k8s.io (cluster-wide)"}
		}), pod: pod(nil), worst: Unknown},
	}
	checked := 0
	for _, tc := range cases {
		if tc.check(t) {
			checked++
		}
	}
	t.Logf("%d planted faults and healthy pods diagnosed", checked)
}

// firstFailingCase is a case of TestDiagnoseFirstFailingCheck.
type firstFailingCase struct {
	name        string
	inj         *injection.InjectionReport
	pod         *corev1.Pod
	events      []corev1.Event
	capture     *capture.CaptureReport
	connections bool
	unreadable  string
	noPod       string
	now         time.Duration // since t0; a minute when not set
	first       string
	fix         string
	worst       string
}

// check diagnoses the case's facts and checks the answer: the first
// failing check, its fix, the worst status, every check said; true when
// all hold.
func (tc firstFailingCase) check(t *testing.T) bool {
	t.Helper()
	var s *startup.StartupReport
	if tc.now == 0 {
		tc.now = time.Minute
	}
	if tc.pod != nil {
		s = startup.AnalyzeStartup(startup.StartupFacts{Pod: tc.pod, Events: tc.events, Now: t0.Add(tc.now)})
	}
	f := Facts{Injection: tc.inj, Startup: s, Capture: tc.capture, Connections: tc.connections, NoPod: tc.noPod}
	if tc.unreadable != "" {
		f.CaptureUnknown, f.CaptureNeeds = "not allowed to read the rules", []string{tc.unreadable}
	}
	d := Diagnose(f)
	if d.First != tc.first || !strings.Contains(d.Fix, tc.fix) || d.Worst() != tc.worst || d.Status != tc.worst {
		var lines []string
		for _, c := range d.Checks {
			lines = append(lines, c.Name+" "+c.Status+": "+c.Evidence)
		}
		t.Errorf("%s: first %q fix %q worst %q; want %q %q %q\n  %s", tc.name, d.First, d.Fix, d.Worst(), tc.first, tc.fix, tc.worst, strings.Join(lines, "\n  "))
		return false
	}
	if len(d.Checks) != 5 || d.Checks[0].Name != CheckInjection || d.Checks[4].Name != CheckConnections {
		t.Errorf("%s: checks %+v", tc.name, d.Checks)
	}
	for _, c := range d.Checks {
		if c.Status == NotChecked && !strings.Contains(c.Evidence, "not") {
			t.Errorf("%s: %s not checked without saying so: %q", tc.name, c.Name, c.Evidence)
		}
		if c.Status == Unknown && c.Name != CheckInit && c.Name != CheckStart && len(c.Needs) == 0 {
			t.Errorf("%s: unknown injection names no permission", tc.name)
		}
	}
	return true
}

// A crash-looping container gets the same diagnosis in every phase of its
// loop: terminated, waiting in back-off, running its next attempt. The
// finding says how often it was restarted and what its last failure was,
// in the kubelet's own words.
func TestCrashLoopSameAnswerInEveryPhase(t *testing.T) {
	always := corev1.RestartPolicyAlways
	last := &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "iptables-restore: line 12 failed", StartedAt: at(10), FinishedAt: at(11)}
	// phases of one loop: the same failure, seen at three seconds of it.
	phases := []struct {
		name string
		st   corev1.ContainerStatus
	}{
		{"just terminated", corev1.ContainerStatus{RestartCount: 2, State: corev1.ContainerState{Terminated: last},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: at(5), FinishedAt: at(6)}}}},
		{"waiting in back-off", corev1.ContainerStatus{RestartCount: 2, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 20s restarting failed container"}},
			LastTerminationState: corev1.ContainerState{Terminated: last}}},
		{"running its next attempt", corev1.ContainerStatus{RestartCount: 3, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(31)}},
			LastTerminationState: corev1.ContainerState{Terminated: last}}},
	}
	subjects := []struct {
		name      string
		container string
		plant     func(p *corev1.Pod, st corev1.ContainerStatus)
		first     string
		fix       string
	}{
		{"istio-init", "istio-init", func(p *corev1.Pod, st corev1.ContainerStatus) {
			p.Status.Phase, p.Status.ContainerStatuses = corev1.PodPending, nil
			st.Name = "istio-init"
			p.Status.InitContainerStatuses[0] = st
		}, CheckInit, "kubectl logs web-1 -n shop -c istio-init"},
		{"the app", "app", func(p *corev1.Pod, st corev1.ContainerStatus) {
			st.Name = "app"
			p.Status.ContainerStatuses[1] = st
		}, CheckStart, "kubectl logs web-1 -n shop -c app"},
		{"a native sidecar proxy", "istio-proxy", func(p *corev1.Pod, st corev1.ContainerStatus) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "istio-proxy", RestartPolicy: (*corev1.ContainerRestartPolicy)(&always)})
			p.Spec.Containers = p.Spec.Containers[1:]
			st.Name = "istio-proxy"
			p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, st)
			p.Status.ContainerStatuses = p.Status.ContainerStatuses[1:]
			p.Status.Phase = corev1.PodPending
		}, CheckStart, "kubectl logs web-1 -n shop -c istio-proxy"},
	}
	checked := 0
	for _, sub := range subjects {
		var answers []string
		for _, ph := range phases {
			p := pod(func(p *corev1.Pod) { sub.plant(p, ph.st) })
			s := startup.AnalyzeStartup(startup.StartupFacts{Pod: p, Now: t0.Add(time.Minute)})
			d := Diagnose(Facts{Injection: injected(nil), Startup: s})
			where := sub.name + ", " + ph.name
			got := checkOf(d, sub.first)
			if d.Status != Fail || d.First != sub.first || !strings.Contains(d.Fix, sub.fix) {
				t.Errorf("%s: status %q first %q fix %q; want fail, first %s, fix with %q\n%+v", where, d.Status, d.First, d.Fix, sub.first, sub.fix, d.Checks)
				continue
			}
			// The failed run's log: the current container's while it is
			// terminated, else the previous one's.
			if prev := strings.Contains(d.Fix, " --previous"); prev == (ph.name == "just terminated") {
				t.Errorf("%s: fix %q: --previous %v, but the failed run is the %s container", where, d.Fix, prev, map[bool]string{true: "current", false: "previous"}[ph.name == "just terminated"])
			}
			for _, want := range []string{sub.container + " failed", "exit 1 (Error): iptables-restore: line 12 failed", "restarted "} {
				if !strings.Contains(got.Evidence, want) {
					t.Errorf("%s: evidence %q does not say %q", where, got.Evidence, want)
				}
			}
			if strings.Contains(got.Evidence, "1 restarts") || strings.Contains(got.Evidence, "1 times") {
				t.Errorf("%s: evidence %q: a plural for one", where, got.Evidence)
			}
			answers = append(answers, d.Status+" "+d.First)
			checked++
		}
		for _, a := range answers[1:] {
			if a != answers[0] {
				t.Errorf("%s: the answer changes with the phase of the loop: %q", sub.name, answers)
			}
		}
	}
	t.Logf("%d phases of crash loops diagnosed alike", checked)
}

func checkOf(d *Diagnosis, name string) Check {
	for _, c := range d.Checks {
		if c.Name == name {
			return c
		}
	}
	return Check{}
}
