package injection

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// istioRules are the rules Istio writes on its injection webhooks: pod
// CREATE, core v1.
const istioRules = `[{"operations":["CREATE"],"apiGroups":[""],"apiVersions":["v1"],"resources":["pods"]}]`

// createNotCovered is, for a pod no Istio webhook is called for, an Istio
// webhook whose selectors take the pod while its rules do not cover pod
// CREATE (a hand-written tag or revision webhook, say): it is the one
// meant, never called. The fix gives it Istio's own rules.
func createNotCovered(evals []*webhookEval) (why, fix string, ok bool) {
	for _, e := range evals {
		if e.deactivated || e.rulesMatch || !e.nsMatch || !e.objMatch || e.nsUnknown {
			continue
		}
		of := "revision " + e.revision
		if e.tag != "" {
			of = "tag " + e.tag + " (revision " + e.revision + ")"
		}
		why = fmt.Sprintf("webhook %s, of %s, selects this pod, but its rules do not cover pod CREATE, so the apiserver never calls it when the pod is created", e.fullName(), of)
		fix = fmt.Sprintf(`kubectl patch mutatingwebhookconfiguration %s --type=json -p '[{"op":"replace","path":"/webhooks/%d/rules","value":%s}]'   # the rules Istio writes on its own injection webhooks`,
			e.config, e.index, istioRules)
		return why, fix, true
	}
	return "", "", false
}

// namespaceOnlyRevision is, for a pod labelled istio.io/rev=REV in a
// namespace without an injection label, where REV is served only by
// webhooks that select namespaces (no webhook takes a pod by its own
// label, as the ones Istio writes for each revision and tag do), why it is
// not injected and the fix: the namespace labelled for REV.
func namespaceOnlyRevision(w *Workload, ns string, nsLabels map[string]string, evals []*webhookEval) (why, fix string, ok bool) {
	rev := strings.TrimSpace(w.Labels[istio.LabelRev])
	if rev == "" || nsLabels[istio.LabelRev] != "" || nsLabels[istio.LabelInjection] != "" || !revisionActive(evals, rev) {
		return "", "", false
	}
	var configs []string
	for _, e := range evals {
		if !e.deactivated && e.rulesMatch && strings.Contains(e.nsSelector, "istio.io/rev in ("+rev+")") && !slices.Contains(configs, e.config) {
			configs = append(configs, e.config)
		}
	}
	why = fmt.Sprintf("the pod's label istio.io/rev=%q selects no webhook: %s serves %q only for namespaces labelled istio.io/rev=%s, and has no webhook that takes a pod by its own label (as the webhooks Istio writes for each revision and tag do)",
		rev, "mutatingwebhookconfiguration "+strings.Join(configs, ", "), rev, rev)
	fix = fmt.Sprintf("kubectl label namespace %s istio.io/rev=%s   # a choice: the namespace's other pods move to %s too, at their restart; or give that configuration the pod-label webhook (istioctl tag set writes both)", ns, rev, rev)
	return why, fix, true
}
