package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The misspelt key is renamed where it stands, in YAML as in JSON; a
// config with fields only, or with a key near none, has no finding.
func TestProxyConfigKeys(t *testing.T) {
	yes := true
	for cfg, want := range map[string]string{
		"holdApplicationUntilProxyStart: true\nconcurrency: 2":  `holdApplicationUntilProxyStarts: true\nconcurrency: 2`,
		`{"terminationDrainDurations": "30s"}`:                  `{\"terminationDrainDuration\": \"30s\"}`,
		`{"holdApplicationUntilProxyStarts": true}`:             "",
		"hold_application_until_proxy_starts: true":             "",
		`{"aFieldOfALaterRelease": {"x": 1}, "concurrency": 2}`: "",
		"not: [valid": "",
	} {
		p := pod(func(p *corev1.Pod) {
			p.Labels = map[string]string{"pod-template-hash": "5d9f"}
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d9f", Controller: &yes}}
			p.Annotations = map[string]string{"proxy.istio.io/config": cfg}
		})
		fs := proxyConfigKeys(&Input{Facts: Facts{Pod: p}})
		switch {
		case want == "" && len(fs) != 0:
			t.Errorf("%q: %+v, want none", cfg, fs)
		case want != "" && (len(fs) != 1 || !strings.Contains(fs[0].Fix, want)):
			t.Errorf("%q: %+v, want a fix with %s", cfg, fs, want)
		}
	}
}
