package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The start race's fix holds the app: proxy.istio.io/config gets the hold,
// the rest of the config kept; a choice already made stays advice.
func TestHoldFix(t *testing.T) {
	yes := true
	pod := func(cfg string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-h-x", Namespace: "shop", Labels: map[string]string{"pod-template-hash": "h"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-h", Controller: &yes}}}}
		if cfg != "" {
			p.Annotations = map[string]string{"proxy.istio.io/config": cfg}
		}
		return p
	}
	cases := []struct {
		cfg, want string
	}{
		{"", `"proxy.istio.io/config":"{\"holdApplicationUntilProxyStarts\": true}"`},
		{`{"concurrency": 2}`, `"proxy.istio.io/config":"{\"concurrency\":2,\"holdApplicationUntilProxyStarts\":true}"`},
		{"concurrency: 2", `"proxy.istio.io/config":"concurrency: 2\nholdApplicationUntilProxyStarts: true"`},
		{"holdApplicationUntilProxyStarts: false", "advice"},
		{"{not json", "advice"},
	}
	checks := 0
	for _, tc := range cases {
		in := &Input{Facts: Facts{Pod: pod(tc.cfg)}}
		got := in.holdFix("advice")
		checks++
		if tc.want == "advice" {
			if got != "advice" {
				t.Errorf("%q: %s, want the advice", tc.cfg, got)
			}
			continue
		}
		if !strings.HasPrefix(got, "kubectl patch deployment/web -n shop --type=merge -p '") || !strings.Contains(got, tc.want) {
			t.Errorf("%q: %s\nwant it to set %s", tc.cfg, got, tc.want)
		}
	}
	t.Logf("%d checks", checks)
}
