package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A template patch of a ReplicaSet with no Deployment is followed by the
// pod's delete (the ReplicaSet never replaces it); a Deployment's rolls
// by itself.
func TestReplacePodAfterTemplatePatch(t *testing.T) {
	yes := true
	pod := func(rs string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rs + "-abcde", Namespace: "ns", Labels: labels,
			Annotations:     map[string]string{"sidecar.istio.io/interceptionMode": "NONE"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: rs, Controller: &yes}}}}
	}
	checks := 0
	bare := pod("tokens", nil)
	for _, fix := range []string{
		annotationPatch(bare, "sidecar.istio.io/interceptionMode", ""),
		specFixAnnotation(bare, "sidecar.istio.io/interceptionMode", "REDIRECT"),
		specFixLabel(bare, templateOwner(bare), "sidecar.istio.io/inject", "true"),
		specPatch(bare, `{"hostNetwork":false}`, "unset hostNetwork"),
	} {
		checks++
		lines := strings.Split(fix, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "kubectl patch replicaset/tokens -n ns") || !strings.HasPrefix(lines[1], "kubectl delete pod tokens-abcde -n ns   # ") {
			t.Errorf("a bare ReplicaSet's fix does not delete its pod after the patch:\n%s", fix)
		}
	}
	deployed := pod("web-7d9f8", map[string]string{"pod-template-hash": "7d9f8"})
	checks++
	if fix := annotationPatch(deployed, "sidecar.istio.io/interceptionMode", ""); strings.Contains(fix, "\n") || !strings.HasPrefix(fix, "kubectl patch deployment/web -n ns") {
		t.Errorf("a Deployment's pod: one patch of the Deployment, which rolls its pods:\n%s", fix)
	}
	checks++
	if got := firstLineNote("a\nb   # why b", "why a"); got != "a   # why a\nb   # why b" {
		t.Errorf("firstLineNote = %q", got)
	}
	t.Logf("%d checks", checks)
}
