package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// dryRun: a Deployment's pod whose proxy.istio.io/config sets DRY_RUN
// (red team round 29's 01).
func dryRun(p *corev1.Pod) {
	yes := true
	p.Labels = map[string]string{"pod-template-hash": "h"}
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "api-h", Controller: &yes}}
	p.Annotations = map[string]string{"proxy.istio.io/config": `{"proxyMetadata":{"DRY_RUN":"true","OTHER":"x"}}`}
	p.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: "DRY_RUN", Value: "true"}, {Name: "OTHER", Value: "x"}}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeInitDryRun, pod: dryRun, status: Fail,
		evidence: `istio-init's environment sets DRY_RUN="true" (from proxyMetadata): istio-iptables runs as with --dry-run`,
		fix:      `kubectl patch deployment/api -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"proxy.istio.io/config":"{\"proxyMetadata\":{\"OTHER\":\"x\"}}"}}}}}'`})
}

// DRY_RUN set to what Go reads as true fails; false, junk or unset
// passes; set by the mesh, not the pod, the fix says where.
func TestInitDryRun(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		value, conf string
		want        string // "" none; else the fix's start
	}{
		{"true", `{"proxyMetadata":{"DRY_RUN":"true"}}`, "kubectl patch deployment/api"},
		{"1", `{"proxyMetadata":{"DRY_RUN":"1"}}`, "kubectl patch deployment/api"},
		{"true", "", "kubectl get configmap istio -n istio-system"},
		{"false", `{"proxyMetadata":{"DRY_RUN":"false"}}`, ""},
		{"yes", `{"proxyMetadata":{"DRY_RUN":"yes"}}`, ""}, // not a Go bool: the flag refuses it
	} {
		p := pod(dryRun)
		p.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: "DRY_RUN", Value: tc.value}}
		p.Annotations = map[string]string{}
		if tc.conf != "" {
			p.Annotations["proxy.istio.io/config"] = tc.conf
		}
		fs := initDryRun(&Input{Facts: Facts{Pod: p}})
		checks++
		switch {
		case tc.want == "" && len(fs) != 0:
			t.Errorf("DRY_RUN=%q: %+v, want nothing", tc.value, fs)
		case tc.want != "" && (len(fs) != 1 || !strings.HasPrefix(fs[0].Fix, tc.want)):
			t.Errorf("DRY_RUN=%q: %+v, want a fix starting %q", tc.value, fs, tc.want)
		}
	}
	t.Logf("%d checks", checks)
}
