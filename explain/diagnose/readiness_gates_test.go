package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A bare ReplicaSet's pod whose containers are ready and whose readiness
// gate no controller sets (red team round 20's 06): KM-START-014 names the
// gate, no mesh hint, and the fix takes the gates out of the template and
// replaces the pod; a gate whose condition is True, or a container not
// ready, is not put down to the gate.
func TestReadinessGateHolds(t *testing.T) {
	yes := true
	gated := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "storefront", Controller: &yes}}
		p.Name = "storefront-b5bdv"
		p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "target-health.elbv2.k8s.aws/k8s-storefront-tg"}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ReadinessGatesNotReady", LastTransitionTime: at(3)}}
	}
	checks := 0
	for _, tc := range []struct {
		name  string
		pod   func(p *corev1.Pod)
		named bool
	}{
		{"a gate nothing sets", gated, true},
		{"a gate set False", func(p *corev1.Pod) {
			gated(p)
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: "target-health.elbv2.k8s.aws/k8s-storefront-tg", Status: corev1.ConditionFalse})
		}, true},
		{"the app not ready", func(p *corev1.Pod) { gated(p); p.Status.ContainerStatuses[1].Ready = false }, false},
	} {
		d := Diagnose(checkCase{pod: tc.pod, now: 5 * time.Minute}.facts())
		named := false
		for _, f := range d.Findings {
			if f.Code != CodePodNotReady {
				continue
			}
			named = strings.Contains(f.Evidence, `waits on its readiness gates: target-health.elbv2.k8s.aws/k8s-storefront-tg`)
			if named {
				checks += 2
				want := `kubectl patch replicaset/storefront -n shop --type=strategic -p '{"spec":{"template":{"spec":{"readinessGates":null}}}}'   # a choice`
				if lines := strings.Split(f.Fix, "\n"); !strings.HasPrefix(lines[0], want) || len(lines) != 2 || !strings.HasPrefix(lines[1], "kubectl delete pod storefront-b5bdv -n shop") {
					t.Errorf("%s: fix %q", tc.name, f.Fix)
				}
				if strings.Contains(f.Evidence, "127.0.0.6") {
					t.Errorf("%s: a mesh hint on a gate's cause: %s", tc.name, f.Evidence)
				}
			}
		}
		checks++
		if named != tc.named {
			t.Errorf("%s: named %v, want %v: %+v", tc.name, named, tc.named, d.Findings)
		}
	}
	t.Logf("%d checks", checks)
}
