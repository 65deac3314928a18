package injection

import (
	"strings"
	"testing"
)

// A tag's webhook that selects the pod but whose rules leave out CREATE is
// named, and given Istio's rules; a pod labelled for a tag whose webhooks
// select namespaces only is told so, and its namespace labelled for it.
func TestWebhookSelectedNotCalled(t *testing.T) {
	update := &webhookEval{config: "tag-blue", name: "rev.namespace.sidecar-injector.istio.io", revision: "canary", tag: "blue", index: 0,
		nsMatch: true, objMatch: true, nsSelector: "istio.io/rev in (blue)"}
	why, fix, ok := createNotCovered([]*webhookEval{update})
	if !ok || !strings.Contains(why, "tag blue (revision canary)") || !strings.Contains(why, "do not cover pod CREATE") ||
		!strings.HasPrefix(fix, `kubectl patch mutatingwebhookconfiguration tag-blue --type=json -p '[{"op":"replace","path":"/webhooks/0/rules","value":[{"operations":["CREATE"]`) {
		t.Errorf("%v %q %q", ok, why, fix)
	}
	covered := *update
	covered.rulesMatch = true
	if _, _, ok := createNotCovered([]*webhookEval{&covered}); ok {
		t.Error("a webhook whose rules cover CREATE is said not to")
	}

	nsOnly := &webhookEval{config: "tag-green", name: "rev.namespace.sidecar-injector.istio.io", revision: "canary", tag: "green", rulesMatch: true,
		nsSelector: "istio.io/rev in (green),istio-injection!=disabled"}
	w := &Workload{Namespace: "shop"}
	w.Labels = map[string]string{"app": "invoices", "istio.io/rev": "green"}
	why, fix, ok = namespaceOnlyRevision(w, "shop", map[string]string{}, []*webhookEval{nsOnly})
	if !ok || !strings.Contains(why, `the pod's label istio.io/rev="green" selects no webhook`) || !strings.Contains(why, "tag-green") ||
		!strings.HasPrefix(fix, "kubectl label namespace shop istio.io/rev=green   # a choice") {
		t.Errorf("%v %q %q", ok, why, fix)
	}
	if _, _, ok := namespaceOnlyRevision(w, "shop", map[string]string{"istio-injection": "enabled"}, []*webhookEval{nsOnly}); ok {
		t.Error("a namespace with its own injection label is said to lack one")
	}
}
