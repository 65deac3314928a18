package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// An app's postStart hook holding a classic istio-proxy: the template's
// fix, then the end of this pod's hook (with the hook's own shell when it
// has one), so that the old pod the patch replaces does not stay
// Terminating; nothing when the proxy started.
func TestPostStartHoldFix(t *testing.T) {
	yes := true
	pod := func(owned bool, hook *corev1.LifecycleHandler, proxyRunning bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker-h-x", Namespace: "jobs", Labels: map[string]string{"pod-template-hash": "h"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "worker", Lifecycle: &corev1.Lifecycle{PostStart: hook}},
				{Name: "istio-proxy"},
			}}}
		if owned {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "worker-h", Controller: &yes}}
		}
		st := corev1.ContainerStatus{Name: "istio-proxy", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}
		if proxyRunning {
			st.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{st}
		return p
	}
	execHook := func(cmd ...string) *corev1.LifecycleHandler {
		return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}
	}
	cases := []struct {
		name  string
		pod   *corev1.Pod
		lines []string // what each line of the fix starts with; nil: no finding
	}{
		{"shell hook", pod(true, execHook("/bin/sh", "-c", "until nc -z 127.0.0.1 15021; do sleep 1; done"), false), []string{
			"kubectl patch deployment/worker -n jobs --type=merge -p '",
			"kubectl exec -n jobs worker-h-x -c worker -- /bin/sh -c 'kill -9 -1'   # ",
		}},
		{"bash by name", pod(true, execHook("bash", "-c", "wait-for-proxy"), false), []string{
			"kubectl patch deployment/worker",
			"kubectl exec -n jobs worker-h-x -c worker -- bash -c 'kill -9 -1'   # ",
		}},
		{"a program", pod(true, execHook("/app/wait-for-proxy"), false), []string{
			"kubectl patch deployment/worker",
			"kubectl exec -n jobs worker-h-x -c worker -- kill -9 -1   # ",
		}},
		{"an HTTP hook", pod(true, &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(15021)}}, false), []string{
			"kubectl patch deployment/worker",
		}},
		{"a bare pod", pod(false, execHook("/bin/sh", "-c", "x"), false), []string{
			"kubectl describe pod ",
		}},
		{"proxy started", pod(true, execHook("/bin/sh", "-c", "x"), true), nil},
	}
	checks := 0
	for _, tc := range cases {
		in := &Input{Facts: Facts{Pod: tc.pod}, Target: "pod/" + tc.pod.Name}
		container, fix := in.postStartHold()
		checks++
		if tc.lines == nil {
			if container != "" || fix != "" {
				t.Errorf("%s: %q, %q; want nothing", tc.name, container, fix)
			}
			continue
		}
		if container != "container worker" {
			t.Errorf("%s: names %q, want container worker", tc.name, container)
		}
		got := strings.Split(fix, "\n")
		if len(got) != len(tc.lines) {
			t.Errorf("%s: %d lines, want %d:\n%s", tc.name, len(got), len(tc.lines), fix)
			continue
		}
		for i, want := range tc.lines {
			checks++
			if !strings.HasPrefix(got[i], want) {
				t.Errorf("%s: line %d is %q, want it to start %q", tc.name, i+1, got[i], want)
			}
		}
	}
	t.Logf("%d checks", checks)
}

// A classic istio-proxy after an app container whose postStart hook holds
// the kubelet: the pod Pending is put down to the order, with a native
// sidecar as the fix; the proxy started, nothing is said of it.
func TestPostStartHold(t *testing.T) {
	yes := true
	held := func(p *corev1.Pod) {
		p.Labels = map[string]string{"pod-template-hash": "5d9f"}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "worker-5d9f", Controller: &yes}}
		// istio-proxy's own startup probe (600 × 1s, as Istio's) does not
		// hold the answer back: it has not started.
		probe := &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 600}
		p.Spec.Containers = []corev1.Container{{Name: "worker", Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "until nc registry 8080; do sleep 1; done"}}}}}, {Name: "istio-proxy", StartupProbe: probe}}
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = []corev1.ContainerStatus{
			{Name: "worker", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}},
			{Name: "istio-proxy", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
	}
	d := Diagnose(checkCase{pod: held, now: 3 * time.Minute}.facts())
	fs := only(d.Findings, CodeNotRunning)
	if len(fs) != 1 || !strings.Contains(fs[0].Evidence, "container worker has a postStart hook and istio-proxy comes after it") ||
		!strings.HasPrefix(fs[0].Fix, `kubectl patch deployment/worker -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/nativeSidecar":"true"}}}}}'`) ||
		strings.Contains(fs[0].Evidence, noMeshCause) || !strings.Contains(fs[0].Fix, " -c worker -- sh -c 'kill -9 -1'   # ") {
		t.Fatalf("%+v", d.Findings)
	}
	started := func(p *corev1.Pod) {
		held(p)
		p.Status.ContainerStatuses[1].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(3)}}
	}
	for _, f := range Diagnose(checkCase{pod: started, now: 5 * time.Minute}.facts()).Findings {
		if strings.Contains(f.Evidence, "postStart hook") {
			t.Errorf("the proxy started, yet: %+v", f)
		}
	}
}
