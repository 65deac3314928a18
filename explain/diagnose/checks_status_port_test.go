package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// statusOn15006: a DaemonSet's injected pod whose status port is the
// inbound listener's, not ready since second 3.
func statusOn15006(p *corev1.Pod) {
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "node-cache", Controller: &yes}}
	p.Annotations = map[string]string{annotationStatusPort: "15006"}
	p.Status.ContainerStatuses[1].Ready = false
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: at(3)}}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeStatusOnProxyPort, pod: statusOn15006, status: Fail,
		evidence: `status.sidecar.istio.io/port="15006" puts the agent's status server on 15006, a port the proxy itself listens on (Envoy inbound)`,
		fix:      `kubectl patch daemonset/node-cache -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/status.sidecar.istio.io~1port"}]'`})
}

// The proxy's own ports clash; 15020 (the default), a free port, a pod
// without a sidecar are left alone; a ready pod is a warning.
func TestStatusOnProxyPort(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		name   string
		pod    func(p *corev1.Pod)
		status string
	}{
		{"15006, not ready", statusOn15006, Fail},
		{"15021, ready", func(p *corev1.Pod) { p.Annotations = map[string]string{annotationStatusPort: "15021"} }, Warning},
		{"15020, the default", func(p *corev1.Pod) { p.Annotations = map[string]string{annotationStatusPort: "15020"} }, ""},
		{"a free port", func(p *corev1.Pod) { statusOn15006(p); p.Annotations[annotationStatusPort] = "16020" }, ""},
		{"no sidecar", func(p *corev1.Pod) { notInjected(p); p.Annotations = map[string]string{annotationStatusPort: "15006"} }, ""},
	} {
		d := Diagnose(checkCase{pod: tc.pod}.facts())
		got := ""
		for _, f := range d.Findings {
			if f.Code == CodeStatusOnProxyPort {
				got = f.Status
				checks++
				if !strings.Contains(f.Fix, "status.sidecar.istio.io~1port") && !strings.HasPrefix(f.Fix, "remove the annotation status.sidecar.istio.io/port") {
					t.Errorf("%s: fix %q does not remove the annotation", tc.name, f.Fix)
				}
			}
		}
		checks++
		if got != tc.status {
			t.Errorf("%s: status %q, want %q", tc.name, got, tc.status)
		}
	}
	t.Logf("%d checks", checks)
}
