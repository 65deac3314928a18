package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A StatefulSet's pod not ready on an older revision than its template (red
// team round 25's 04: a bad change rolled back, kv-1 left on it): its
// not-ready finding names the two revisions and its fix deletes the pod; a
// pod on the current revision, or a ready one, keeps its answer. The stale
// revision is the cause: no hint of an unexplained one (127.0.0.6) follows.
func TestStaleStatefulSetPodIsDeleted(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		name, rev string
		ready     bool
		want      bool
	}{
		{"old revision, not ready", "kv-7d9", false, true},
		{"current revision, not ready", "kv-5c4", false, false},
		{"old revision, ready", "kv-7d9", true, false},
	} {
		p := pod(func(p *corev1.Pod) {
			yes := true
			p.Name = "kv-1"
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "kv", Controller: &yes}}
			p.Labels = map[string]string{"app": "kv", "controller-revision-hash": tc.rev}
			status := corev1.ConditionFalse
			if tc.ready {
				status = corev1.ConditionTrue
			}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		})
		d := &Diagnosis{Findings: []Finding{{Code: CodePodNotReady, Status: Fail, Evidence: "not ready", Fix: "kubectl get pod kv-1"}},
			Checks: []Check{{Name: CheckStart, Status: Fail, Code: CodePodNotReady, Evidence: "not ready", Fix: "kubectl get pod kv-1"}}}
		stale := d.Findings[0].Fix
		answered := staleStatefulSetPod(d, Facts{Pod: p, Owner: &WorkloadState{Kind: "StatefulSet", Namespace: "shop", Name: "kv", UpdateRevision: "kv-5c4"}})
		checks++
		if answered != tc.want {
			t.Errorf("%s: answered %v (it decides that no unexplained-cause hint is added)", tc.name, answered)
		}
		for _, got := range []struct{ ev, fix string }{{d.Findings[0].Evidence, d.Findings[0].Fix}, {d.Checks[0].Evidence, d.Checks[0].Fix}} {
			checks++
			deleted := strings.HasPrefix(got.fix, "kubectl delete pod kv-1 -n shop   # created again from statefulset/kv's current template (kv-5c4)") &&
				strings.Contains(got.ev, "the pod runs revision kv-7d9 of statefulset/kv, whose template is now kv-5c4")
			if deleted != tc.want || !tc.want && got.fix != stale {
				t.Errorf("%s: evidence %q fix %q", tc.name, got.ev, got.fix)
			}
		}
	}
	t.Logf("%d checks", checks)
}
