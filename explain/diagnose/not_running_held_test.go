package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// A pod the scheduler does not consider (scheduling gates) and one its
// finalizers keep after its deletion: the start row names the gates and
// where they come from, or the finalizers, with the patch that lifts them
// (the template's when it carries the gates, with the pod's own where its
// controller does not replace it); early on, a warning.
func TestHeldPods(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	yes := true
	gates := []corev1.PodSchedulingGate{{Name: "example.com/capacity"}}
	pod := func(kind, owner string, age time.Duration) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "search-h-x", Namespace: "shop", CreationTimestamp: metav1.NewTime(now.Add(-age)),
			Labels: map[string]string{"pod-template-hash": "h"}},
			Spec:   corev1.PodSpec{SchedulingGates: gates, Containers: []corev1.Container{{Name: "app"}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending}}
		if kind != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: owner, Controller: &yes}}
		}
		return p
	}
	withGates := &WorkloadState{Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulingGates: gates}}}
	without := &WorkloadState{Template: &corev1.PodTemplateSpec{}}
	deleted := pod("StatefulSet", "queue", time.Hour)
	deleted.Name, deleted.Spec.SchedulingGates, deleted.Spec.NodeName = "queue-0", nil, "node-1"
	deleted.Status.Phase = corev1.PodFailed
	deleted.Finalizers = []string{"drain.example.com/protect"}
	gone := metav1.NewTime(now.Add(-5 * time.Minute))
	deleted.DeletionTimestamp = &gone
	soon := deleted.DeepCopy()
	justNow := metav1.NewTime(now.Add(-5 * time.Second))
	soon.DeletionTimestamp = &justNow

	cases := []struct {
		name   string
		pod    *corev1.Pod
		owner  *WorkloadState
		status string
		ev     []string
		fix    []string // each line's start
	}{
		{"deployment's template", pod("ReplicaSet", "search-h", 5*time.Minute), withGates, Fail,
			[]string{"scheduling gates example.com/capacity:", "its pod template (deployment/search) carries them"},
			[]string{`kubectl patch deployment/search -n shop --type=json -p '[{"op":"remove","path":"/spec/template/spec/schedulingGates"}]'`}},
		{"statefulset's template", pod("StatefulSet", "search", 5*time.Minute), withGates, Fail, []string{"carries them"},
			[]string{"kubectl patch statefulset/search -n shop --type=json", `kubectl patch pod search-h-x -n shop --type=json -p '[{"op":"remove","path":"/spec/schedulingGates"}]'`}},
		{"job", pod("Job", "search", 5*time.Minute), withGates, Fail, []string{"carries them"},
			[]string{`kubectl patch pod search-h-x -n shop --type=json -p '[{"op":"remove","path":"/spec/schedulingGates"}]'   # a Job's template`}},
		{"added at admission", pod("ReplicaSet", "search-h", 5*time.Minute), without, Fail, []string{"the template does not carry them"},
			[]string{`kubectl patch pod search-h-x -n shop --type=json -p '[{"op":"remove","path":"/spec/schedulingGates"}]'   # lifts them by hand`}},
		{"just created", pod("ReplicaSet", "search-h", 10*time.Second), withGates, Warning, []string{"scheduling gates"}, []string{"kubectl get pod search-h-x"}},
		{"held by a finalizer", deleted, nil, Fail,
			[]string{"finalizers drain.example.com/protect keep it", "statefulset/queue makes no new queue-0"},
			[]string{`kubectl patch pod queue-0 -n shop --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]'`}},
	}
	checks := 0
	for _, tc := range cases {
		in := &Input{Facts: Facts{Pod: tc.pod, Owner: tc.owner, Startup: &startup.StartupReport{Now: now, Phase: string(tc.pod.Status.Phase)}}, Target: tc.pod.Name + " -n shop"}
		status, ev, fix := in.notRunning()
		checks++
		if status != tc.status {
			t.Errorf("%s: status %s, want %s (%s)", tc.name, status, tc.status, ev)
		}
		for _, w := range tc.ev {
			if !strings.Contains(ev, w) {
				t.Errorf("%s: evidence %q lacks %q", tc.name, ev, w)
			}
		}
		lines := strings.Split(fix, "\n")
		if len(lines) != len(tc.fix) {
			t.Errorf("%s: fix %q, want %d lines", tc.name, fix, len(tc.fix))
			continue
		}
		for i, w := range tc.fix {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("%s: fix line %d %q, want it to start %q", tc.name, i, lines[i], w)
			}
		}
	}
	// Deleted a moment ago: its finalizers may yet be removed.
	in := &Input{Facts: Facts{Pod: soon, Startup: &startup.StartupReport{Now: now, Phase: "Failed"}}, Target: "queue-0 -n shop"}
	if _, ev, _ := in.notRunning(); strings.Contains(ev, "finalizers") {
		t.Errorf("a pod deleted 5s ago is said to be held: %s", ev)
	}
	checks++
	t.Logf("%d held pods", checks)
}
