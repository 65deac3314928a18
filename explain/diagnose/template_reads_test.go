package diagnose

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// An annotation Istio's injection template reads, though its API does not
// declare it, is not called unknown (it has its effect); a misspelt one
// still is.
func TestTemplateReadAnnotationIsKnown(t *testing.T) {
	for k, want := range map[string]int{"sidecar.istio.io/capNetBindService": 0, "sidecar.istio.io/capNetBindServise": 1} {
		p := pod(func(p *corev1.Pod) { p.Annotations = map[string]string{k: "true"} })
		if got := len(unknownAnnotations(&Input{Facts: Facts{Pod: p}})); got != want {
			t.Errorf("%s: %d findings, want %d", k, got, want)
		}
	}
}
