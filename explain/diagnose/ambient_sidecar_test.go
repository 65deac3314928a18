package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// A pod with a sidecar that ambient mode also selects is answered where
// the ambient label is: the pod's own taken off its template (never the
// namespace's injection label, red team round 31's 06), its namespace's
// left alone; the other way, the sidecar opted out.
func TestAmbientSidecarFix(t *testing.T) {
	checks := 0
	yes := true
	for _, tc := range []struct {
		name   string
		labels map[string]string
		first  string
	}{
		{"pod label", map[string]string{"istio.io/dataplane-mode": "ambient", "pod-template-hash": "h"},
			`kubectl patch deployment/web -n shop --type=merge -p '{"spec":{"template":{"metadata":{"labels":{"istio.io/dataplane-mode":null}}}}}'   # a choice`},
		{"namespace's", map[string]string{"pod-template-hash": "h"}, "# nothing to change if the sidecar is meant"},
	} {
		p := pod(func(p *corev1.Pod) {
			p.Labels = tc.labels
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-h", Controller: &yes}}
		})
		r := injected(func(r *injection.InjectionReport) {
			r.Warn(injection.WarnAmbientAndSidecar, "the pod is also selected for ambient mode; a pod with a sidecar is not captured by ztunnel")
		})
		d := Diagnose(Facts{Injection: r, Pod: p})
		checks++
		var f *Finding
		for i := range d.Findings {
			if d.Findings[i].Code == CodeConflictingLabels {
				f = &d.Findings[i]
			}
		}
		switch {
		case f == nil:
			t.Errorf("%s: no %s in %+v", tc.name, CodeConflictingLabels, d.Findings)
		case !strings.HasPrefix(f.Fix, tc.first) || strings.Contains(f.Fix, "kubectl label namespace") ||
			!strings.Contains(f.Fix, `"sidecar.istio.io/inject":"false"`):
			t.Errorf("%s: fix %q, want it to start %q and offer the opt-out", tc.name, f.Fix, tc.first)
		}
	}
	t.Logf("%d checks", checks)
}
