package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A StatefulSet's pod that never became ready (red team round 24's 02: its
// proxy image cannot be pulled): the fix that changes the StatefulSet's
// template also deletes the pod, which the StatefulSet would otherwise
// never replace; a ready pod, a pod being deleted, or a Deployment's pod
// keeps the fix as it is. The image type's source is the pod's own
// proxy.istio.io/config when that is where it is set.
func TestStuckStatefulSetPodIsDeleted(t *testing.T) {
	const patch = `kubectl patch statefulset/db -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyImageType":"default"}}}}}'   # the variant`
	checks := 0
	for _, tc := range []struct {
		name   string
		change func(p *corev1.Pod)
		want   bool
	}{
		{"stuck", func(p *corev1.Pod) {}, true},
		{"ready", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}, false},
		{"being deleted", func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }, false},
		{"a Deployment's", func(p *corev1.Pod) { p.OwnerReferences[0].Kind, p.OwnerReferences[0].Name = "ReplicaSet", "db-6d5f" }, false},
	} {
		p := pod(func(p *corev1.Pod) {
			yes := true
			p.Name = "db-0"
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", Controller: &yes}}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			tc.change(p)
		})
		d := &Diagnosis{Findings: []Finding{{Fix: patch}}, Checks: []Check{{Fix: patch}}}
		stuckStatefulSetPod(d, Facts{Pod: p})
		for _, got := range []string{d.Findings[0].Fix, d.Checks[0].Fix} {
			checks++
			if deleted := strings.HasSuffix(got, "\nkubectl delete pod db-0 -n shop   # a StatefulSet does not replace a pod that never became ready; it creates it again from the new template"); deleted != tc.want {
				t.Errorf("%s: fix %q, want the pod deleted: %v", tc.name, got, tc.want)
			}
		}
	}
	for cfg, want := range map[string]string{
		`{"image":{"imageType":"distroless"}}`:     "distroless",
		"image:\n  imageType: debug":               "debug",
		`{"holdApplicationUntilProxyStarts":true}`: "",
		`{not json`: "",
	} {
		checks++
		if got := ownImageType(pod(func(p *corev1.Pod) { p.Annotations = map[string]string{"proxy.istio.io/config": cfg} })); got != want {
			t.Errorf("ownImageType(%q) = %q, want %q", cfg, got, want)
		}
	}
	t.Logf("%d checks", checks)
}
