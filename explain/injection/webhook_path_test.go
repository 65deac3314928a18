package injection

import (
	"strings"
	"testing"
)

// A tag webhook written by hand with a path istiod does not serve (red team
// round 27's 07): the 404 is a wrong path, and the fix points every webhook
// of its configuration that posts there at the path the revision's own
// webhooks use; another error, or no webhook of the revision to copy, gives
// none.
func TestWrongPathFix(t *testing.T) {
	checks := 0
	bad := &webhookEval{config: "tag-blue", name: "rev.namespace.sidecar-injector.istio.io", revision: "canary", url: "https://127.0.0.1:15117/sidecar-inject", index: 0}
	badObj := &webhookEval{config: "tag-blue", name: "rev.object.sidecar-injector.istio.io", revision: "canary", url: "https://127.0.0.1:15117/sidecar-inject", index: 1}
	own := &webhookEval{config: "istio-sidecar-injector-canary", name: "rev.namespace.sidecar-injector.istio.io", revision: "canary", url: "https://127.0.0.1:15117/inject"}
	other := &webhookEval{config: "istio-sidecar-injector", name: "namespace.sidecar-injector.istio.io", revision: "default", url: "https://127.0.0.1:15017/inject/x"}
	msg := `Error creating: Internal error occurred: failed calling webhook "rev.namespace.sidecar-injector.istio.io": failed to call webhook: the server could not find the requested resource`
	for _, tc := range []struct {
		name  string
		msg   string
		evals []*webhookEval
		want  string
	}{
		{"404, the revision's own webhook", msg, []*webhookEval{bad, badObj, own, other},
			`kubectl patch mutatingwebhookconfiguration tag-blue --type=json -p '[{"op":"replace","path":"/webhooks/0/clientConfig/url","value":"https://127.0.0.1:15117/inject"},{"op":"replace","path":"/webhooks/1/clientConfig/url","value":"https://127.0.0.1:15117/inject"}]'`},
		{"connection refused", strings.Replace(msg, "the server could not find the requested resource", "connection refused", 1), []*webhookEval{bad, own}, ""},
		{"only another revision's", msg, []*webhookEval{bad, other}, ""},
	} {
		got := wrongPathFix(tc.msg, tc.evals, bad)
		checks++
		if tc.want == "" && got != "" || tc.want != "" && !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q", tc.name, got)
		}
	}
	t.Logf("%d checks", checks)
}
