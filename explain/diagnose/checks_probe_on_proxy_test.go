package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probesProxy: a Deployment's pod whose app's liveness and readiness probes
// ask /healthz/ready on the proxy's 15021 (red team round 25's 02), as the
// injector keeps them before its rewrite.
func probesProxy(p *corev1.Pod) {
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "catalog-5d8f9", Controller: &yes}}
	p.Labels = map[string]string{"app": "catalog", "pod-template-hash": "5d8f9"}
	p.Spec.Containers[1].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "ISTIO_KUBE_APP_PROBERS", Value: `{"/app-health/app/livez":{"httpGet":{"path":"/healthz/ready","port":15021}},"/app-health/app/readyz":{"httpGet":{"path":"/healthz/ready","port":15021}}}`}}
	agent := func(suffix string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/app-health/app/" + suffix, Port: intstr.FromInt32(15020)}}}
	}
	p.Spec.Containers[1].LivenessProbe, p.Spec.Containers[1].ReadinessProbe = agent("livez"), agent("readyz")
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeProbeOnProxy, pod: probesProxy, status: Warning,
		evidence: "container app's liveness (HTTP on 15021) and container app's readiness (HTTP on 15021): a port of the proxy or its agent",
		fix:      `kubectl patch deployment/catalog -n shop --type=strategic -p '{"spec":{"template":{"spec":{"containers":[{"livenessProbe":{"httpGet":{"path":"/","port":8080}},"name":"app","readinessProbe":{"httpGet":{"path":"/","port":8080}}}]}}}}'`})
}

// The original probes on 15021 warn; probes on the app's port, a probe the
// injector did not rewrite on the app's own port, and a pod without a sidecar
// do not; a TCP probe on 15020 not rewritten warns too.
func TestProbeOnProxy(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		name string
		pod  func(p *corev1.Pod)
		want string
	}{
		{"15021, rewritten", probesProxy, "(HTTP on 15021)"},
		{"the app's port, rewritten", func(p *corev1.Pod) {
			probesProxy(p)
			p.Spec.Containers[0].Env[0].Value = `{"/app-health/app/livez":{"httpGet":{"path":"/","port":8080}}}`
		}, ""},
		{"TCP on 15020, not rewritten", func(p *corev1.Pod) {
			probesProxy(p)
			p.Spec.Containers[0].Env = nil
			p.Spec.Containers[1].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(15020)}}}
			p.Spec.Containers[1].LivenessProbe = nil
		}, "(TCP on 15020)"},
		{"no sidecar", func(p *corev1.Pod) { probesProxy(p); notInjected(p) }, ""},
	} {
		got := probeOnProxy(&Input{Facts: Facts{Pod: pod(tc.pod), Injection: injected(nil)}, Target: "x"})
		checks++
		switch {
		case tc.want == "" && len(got) > 0, tc.want != "" && (len(got) != 1 || !strings.Contains(got[0].Evidence, tc.want)):
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
	t.Logf("%d checks", checks)
}
