package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A misspelt injection label (sidecar.istio.io/injected) on a pod without
// a sidecar is named, with the patch that sets the label meant; the label
// meant, or an injected pod, is not.
func TestMisspeltInjectLabel(t *testing.T) {
	typo := func(p *corev1.Pod) {
		deploymentPod(p)
		notInjected(p)
		p.Labels["sidecar.istio.io/injected"] = "true"
	}
	fs := unknownInjectLabels(&Input{Facts: Facts{Pod: pod(typo), Injection: injected(notExpected)}, Target: "web-1 -n shop"})
	if len(fs) != 1 || !strings.Contains(fs[0].Evidence, "did you mean sidecar.istio.io/inject?") || !strings.Contains(fs[0].Fix, `"sidecar.istio.io/inject":"true"`) {
		t.Fatalf("%+v", fs)
	}
	right := func(p *corev1.Pod) {
		typo(p)
		p.Labels["sidecar.istio.io/inject"] = "true"
	}
	if fs := unknownInjectLabels(&Input{Facts: Facts{Pod: pod(right), Injection: injected(notExpected)}, Target: "web-1 -n shop"}); len(fs) != 0 {
		t.Errorf("the label meant is there too: %+v", fs)
	}
	t.Log(fs)
}
