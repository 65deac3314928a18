package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// drainPast: a StatefulSet's pod told to drain 60s with 5s to stop (red
// team round 20's 04).
func drainPast(p *corev1.Pod) {
	yes := true
	five := int64(5)
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "payments-gw", Controller: &yes}}
	p.Spec.TerminationGracePeriodSeconds = &five
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PROXY_CONFIG", Value: `{"terminationDrainDuration":"60s"}`}}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeDrainOutlastsGrace, pod: drainPast, status: Warning,
		evidence: `istio-proxy is told to drain for 1m0s on SIGTERM (PROXY_CONFIG terminationDrainDuration), but the pod's terminationGracePeriodSeconds is 5`,
		fix:      `kubectl patch statefulset/payments-gw -n shop --type=strategic -p '{"spec":{"template":{"spec":{"terminationGracePeriodSeconds":70}}}}'   # a choice: a grace period of 70s`})
}

// The drain against the grace period: longer or equal warns, shorter, the
// default drain, or no sidecar pass.
func TestDrainOutlastsGrace(t *testing.T) {
	grace := func(s int64) func(p *corev1.Pod) {
		return func(p *corev1.Pod) { drainPast(p); p.Spec.TerminationGracePeriodSeconds = &s }
	}
	checks := 0
	for _, tc := range []struct {
		name   string
		pod    func(p *corev1.Pod)
		status string
	}{
		{"60s drain, 5s grace", drainPast, Warning},
		{"60s drain, 60s grace", grace(60), Warning},
		{"60s drain, 90s grace", grace(90), ""},
		{"60s drain, the default grace (30s)", func(p *corev1.Pod) { drainPast(p); p.Spec.TerminationGracePeriodSeconds = nil }, Warning},
		{"the default drain, 1s grace", func(p *corev1.Pod) {
			drainPast(p)
			p.Spec.Containers[0].Env = nil
			one := int64(1)
			p.Spec.TerminationGracePeriodSeconds = &one
		}, ""},
		{"no sidecar", func(p *corev1.Pod) { drainPast(p); notInjected(p) }, ""},
	} {
		d := Diagnose(checkCase{pod: tc.pod}.facts())
		got := ""
		for _, f := range d.Findings {
			if f.Code == CodeDrainOutlastsGrace {
				got = f.Status
				checks++
				if !strings.Contains(f.Fix, "terminationGracePeriodSeconds") {
					t.Errorf("%s: fix %q", tc.name, f.Fix)
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
