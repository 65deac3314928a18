package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// A pod on its way out (red team round 23's 02: the old pod of a fixed
// Deployment, still in its grace period) is not the workload's answer: its
// failed rows are not checked and say what they met, nothing counts as a
// failure. One still there after its grace period ended keeps its answer,
// as a pod not being deleted does.
func TestLeavingPodDoesNotFail(t *testing.T) {
	now := time.Now()
	checks := 0
	for _, tc := range []struct {
		name    string
		deleted *time.Time
		want    string
	}{
		{"in its grace period", ptr(now.Add(20 * time.Second)), Pass},
		{"grace period over (stuck)", ptr(now.Add(-time.Minute)), Fail},
		{"not deleted", nil, Fail},
	} {
		p := pod(func(p *corev1.Pod) {
			p.Spec.Containers[1].Ports = []corev1.ContainerPort{{ContainerPort: 15021}}
			if tc.deleted != nil {
				ts := metav1.NewTime(*tc.deleted)
				p.DeletionTimestamp = &ts
			}
		})
		s := startup.AnalyzeStartup(startup.StartupFacts{Pod: p, Now: now})
		d := Diagnose(Facts{Injection: injected(nil), Startup: s, Pod: p})
		checks++
		if d.Status != tc.want {
			t.Errorf("%s: status %s (%s), want %s", tc.name, d.Status, d.Verdict, tc.want)
		}
		if tc.want != Pass {
			continue
		}
		checks += 3
		if !strings.HasPrefix(d.Verdict, "the pod is being deleted (its grace period ends in 20s)") {
			t.Errorf("%s: verdict %q", tc.name, d.Verdict)
		}
		var start Check
		for _, c := range d.Checks {
			if c.Name == CheckStart {
				start = c
			}
		}
		if start.Status != NotChecked || !strings.Contains(start.Evidence, "; it met: ") || start.Fix != "" {
			t.Errorf("%s: start row %s %q fix %q", tc.name, start.Status, start.Evidence, start.Fix)
		}
		for _, f := range d.Findings {
			if f.Status == Fail || f.Status == Warning {
				t.Errorf("%s: finding %s still %s", tc.name, f.Code, f.Status)
			}
		}
	}
	t.Logf("%d checks", checks)
}

func ptr[T any](v T) *T { return &v }
