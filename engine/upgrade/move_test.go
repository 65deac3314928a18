package upgrade

import (
	"strings"
	"testing"
)

// A workload whose selector holds the revision label (red team round 21's
// 04): its template cannot be relabelled in place (the apiserver refuses a
// template that leaves its selector); the step makes it again without the
// label in its selector, its pods orphaned and adopted. A selector by the
// app alone gets the template patch.
func TestMoveSelectorByRevision(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		selector, want string
	}{
		{"app=web,istio.io/rev=canary", `kubectl get deployment/web -n shop -o json | kubectl patch --local -f - --type=merge -p '{"spec":{"selector":{"matchLabels":{"istio.io/rev":null}},"template":{"metadata":{"labels":{"istio.io/rev":"default"}}}}}' -o json | kubectl replace --force --cascade=orphan -f -`},
		{"app=web", `kubectl patch deployment/web -n shop --type=merge -p '{"spec":{"template":{"metadata":{"labels":{"istio.io/rev":"default"}}}}}'`},
	} {
		relabels := map[string]string{}
		c := candidate{kind: "Deployment", namespace: "shop", name: "web", selector: tc.selector}
		move(c, "default", map[string]string{}, map[string]string{"app": "web", "istio.io/rev": "canary"}, relabels)
		checks++
		if got := relabels["deployment/shop/web"]; !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.selector, got, tc.want)
		}
	}
	t.Logf("%d checks", checks)
}
