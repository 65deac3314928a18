package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// An app on a proxy port: a bind clash for the ports the proxy listens on;
// for the tunnel's port, traffic around the proxy.
func TestReservedPortsSaysWhatHappens(t *testing.T) {
	for port, want := range map[int32]string{15090: "cannot both bind it", 15008: "reach the app without the proxy"} {
		p := pod(func(p *corev1.Pod) {
			deploymentPod(p)
			p.Spec.Containers[1].Ports = []corev1.ContainerPort{{ContainerPort: port}}
		})
		fs := reservedPorts(&Input{Facts: Facts{Pod: p, Injection: injected(nil)}})
		if len(fs) != 1 || !strings.Contains(fs[0].Evidence, want) {
			t.Errorf("port %d: %+v, want %q", port, fs, want)
		}
	}
}
