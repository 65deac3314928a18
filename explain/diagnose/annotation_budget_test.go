package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A template whose own annotations are near the apiserver's limit, which
// the injector's take over it (red team round 21's 02): the refusal is put
// down to what the injector adds, and the fix takes out the template's
// largest annotation of its own, a choice; another refusal is left alone.
func TestAnnotationBudget(t *testing.T) {
	refusal := `Error creating: Pod "renderer-87bd988d-pfr7h" is invalid: metadata.annotations: Too long: may not be more than 262144 bytes`
	w := &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "renderer",
		Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
			"render.example.com/template": strings.Repeat("x", 262000),
			"team":                        "render",
			"sidecar.istio.io/proxyCPU":   "10m",
		}}}}
	checks := 3
	ev, mesh, fix, ok := RefusalCause(w, refusal)
	if !ok || !strings.Contains(ev, "the largest of the template's own is render.example.com/template (262027 bytes)") || !strings.Contains(mesh, "sidecar.istio.io/status") {
		t.Errorf("ev %q mesh %q", ev, mesh)
	}
	if want := `kubectl patch deployment/renderer -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"render.example.com/template":null}}}}}'   # a choice`; !strings.HasPrefix(fix, want) {
		t.Errorf("fix %q, want %q", fix, want)
	}
	if ev, _, _, ok := RefusalCause(w, `Pod "x" is invalid: spec.containers[0].image: Required value`); ok && strings.Contains(ev, "limit on a pod's annotations") {
		t.Errorf("another refusal put down to the annotations: %s", ev)
	}
	t.Logf("%d checks", checks)
}
