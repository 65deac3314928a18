package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod that cannot mount istio-ca-root-cert waits on istiod, never on a
// ConfigMap of its own to create: a full ResourceQuota of its namespace is
// named with the raise that lets istiod write it; with none, istiod is
// named; quotas not readable are unknown, named.
func TestMeshConfigMapAttributed(t *testing.T) {
	msg := `MountVolume.SetUp failed for volume "istiod-ca-cert" : configmap "istio-ca-root-cert" not found`
	full := corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "tenant-objects", Namespace: "shop"},
		Status: corev1.ResourceQuotaStatus{Hard: corev1.ResourceList{"count/configmaps": resource.MustParse("2")}, Used: corev1.ResourceList{"count/configmaps": resource.MustParse("2")}}}
	roomy := *full.DeepCopy()
	roomy.Status.Hard["count/configmaps"] = resource.MustParse("5")
	cases := []struct {
		name     string
		quotas   []corev1.ResourceQuota
		unknown  string
		evidence []string
		fix      string
	}{
		{name: "a full quota", quotas: []corev1.ResourceQuota{roomy, full},
			evidence: []string{"which istiod writes into every namespace it serves", "ResourceQuota tenant-objects allows count/configmaps=2 and 2 are used"},
			fix:      `kubectl patch resourcequota tenant-objects -n shop --type=merge -p '{"spec":{"hard":{"count/configmaps":"3"}}}'`},
		{name: "no full quota", quotas: []corev1.ResourceQuota{roomy}, evidence: []string{"no ResourceQuota of the namespace is full: istiod is not writing it"}, fix: "sleep 3; kubectl annotate namespace shop kubectl-mesh/resync="},
		{name: "quotas unreadable", unknown: "forbidden: list resourcequotas (namespace shop)", evidence: []string{"whether a ResourceQuota stops istiod is unknown: forbidden"}},
	}
	for _, tc := range cases {
		f := checkCase{pod: pendingMount(nil), events: mountFailed(msg), now: 5 * time.Minute}.facts()
		if !NeedsQuotas(&f) {
			t.Fatalf("%s: the facts do not ask for quotas", tc.name)
		}
		f.Quotas, f.QuotasUnknown = tc.quotas, tc.unknown
		fs := only(Diagnose(f).Findings, CodePodSetup)
		if len(fs) != 1 {
			t.Fatalf("%s: %+v", tc.name, fs)
		}
		for _, want := range tc.evidence {
			if !strings.Contains(fs[0].Evidence, want) {
				t.Errorf("%s: evidence lacks %q: %s", tc.name, want, fs[0].Evidence)
			}
		}
		if !strings.Contains(fs[0].Fix, tc.fix) || strings.Contains(fs[0].Fix, "KEY=VALUE") || strings.Contains(fs[0].Evidence, noMeshCause) {
			t.Errorf("%s: fix %q, want %q (never a ConfigMap of the app's, never the platform's reason)", tc.name, fs[0].Fix, tc.fix)
		}
	}
	// A ConfigMap of the app's own does not ask for quotas.
	f := checkCase{pod: pendingMount(nil), events: mountFailed(`MountVolume.SetUp failed for volume "cfg" : configmap "app-config" not found`), now: 5 * time.Minute}.facts()
	if NeedsQuotas(&f) {
		t.Error("an app's own ConfigMap asks for quotas")
	}
}
