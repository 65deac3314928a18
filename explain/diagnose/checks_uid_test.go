package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// An app that inherits the pod's runAsUser 1337 bypasses capture: it
// fails, and its fix is a patch of the workload's template that gives the
// container a uid of its own.
func TestProxyUIDInheritedIsPatched(t *testing.T) {
	p := pod(func(p *corev1.Pod) {
		deploymentPod(p)
		uid := int64(1337)
		p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid}
		// istio-proxy sets its own uid, as the injector writes it.
		for i := range p.Spec.Containers {
			if p.Spec.Containers[i].Name == "istio-proxy" {
				p.Spec.Containers[i].SecurityContext = &corev1.SecurityContext{RunAsUser: &uid}
			}
		}
	})
	fs := proxyUID(&Input{Facts: Facts{Pod: p, Injection: injected(nil)}, Target: "web-1 -n shop"})
	if len(fs) != 1 || !strings.Contains(fs[0].Evidence, "which it inherits") ||
		!strings.HasPrefix(fs[0].Fix, `kubectl patch deployment/web -n shop -p '{"spec":{"template":{"spec":{"containers":[{"name":"app","securityContext":{"runAsUser":1000}}]}}}}'`) {
		t.Errorf("%+v", fs)
	}
}
