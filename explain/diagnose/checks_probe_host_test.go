package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeHostLocal: a Deployment's sidecar pod whose app's readiness probe
// names host localhost, kept by the injector's rewrite to 15020 (red team
// round 26's 03): never ready.
func probeHostLocal(p *corev1.Pod) {
	yes := true
	p.Name = "catalog-5d447-mqpzb"
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "catalog-5d447", Controller: &yes}}
	p.Labels = map[string]string{"app": "catalog", "pod-template-hash": "5d447"}
	p.Spec.Containers[1].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "localhost", Path: "/app-health/app/readyz", Port: intstr.FromInt32(15020)}}}
	p.Status.ContainerStatuses[1].Ready = false
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeProbeHost, pod: probeHostLocal, status: Fail,
		evidence: "container app's readiness probe asks host localhost (localhost:15020/app-health/app/readyz, the injector's rewrite to its agent)",
		fix:      `kubectl patch deployment/catalog -n shop --type=strategic -p '{"spec":{"template":{"spec":{"containers":[{"name":"app","readinessProbe":{"httpGet":{"host":null}}}]}}}}'   # the probes then ask the pod's IP`})
}

// A loopback host fails while the pod is not ready and warns on a ready one;
// another host, no host, a TCP probe and a pod on the host's network do not
// count; the fix removes the host of every such probe.
func TestProbeHost(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		name string
		pod  func(p *corev1.Pod)
		want string
	}{
		{"localhost, not ready", probeHostLocal, Fail},
		{"127.0.0.1 liveness too, ready", func(p *corev1.Pod) {
			probeHostLocal(p)
			p.Spec.Containers[1].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "127.0.0.1", Path: "/healthz", Port: intstr.FromInt32(8080)}}}
			p.Status.ContainerStatuses[1].Ready = true
			p.Status.Conditions[0].Status = corev1.ConditionTrue
		}, Warning},
		{"the pod's own name as host", func(p *corev1.Pod) {
			probeHostLocal(p)
			p.Spec.Containers[1].ReadinessProbe.HTTPGet.Host = "catalog.shop.svc"
		}, ""},
		{"no host", func(p *corev1.Pod) { probeHostLocal(p); p.Spec.Containers[1].ReadinessProbe.HTTPGet.Host = "" }, ""},
		{"hostNetwork", func(p *corev1.Pod) { probeHostLocal(p); p.Spec.HostNetwork = true }, ""},
		{"TCP", func(p *corev1.Pod) {
			probeHostLocal(p)
			p.Spec.Containers[1].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Host: "localhost", Port: intstr.FromInt32(8080)}}}
		}, ""},
	} {
		got := probeHost(&Input{Facts: Facts{Pod: pod(tc.pod), Injection: injected(nil)}, Target: "x"})
		checks++
		switch {
		case tc.want == "" && len(got) > 0, tc.want != "" && (len(got) != 1 || got[0].Status != tc.want):
			t.Errorf("%s: %+v", tc.name, got)
		}
		if tc.want == Warning && len(got) == 1 {
			checks++
			if want := `[{"livenessProbe":{"httpGet":{"host":null}},"name":"app","readinessProbe":{"httpGet":{"host":null}}}]`; !strings.Contains(got[0].Fix, want) {
				t.Errorf("%s: the fix must remove both hosts: %s", tc.name, got[0].Fix)
			}
		}
	}
	t.Logf("%d checks", checks)
}
