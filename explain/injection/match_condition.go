package injection

import (
	"fmt"
	"regexp"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// conditionError is the apiserver's refusal when a webhook's matchCondition
// cannot be evaluated on the pod (failurePolicy Fail): it quotes the
// condition's expression.
var conditionError = regexp.MustCompile(`expression '(.+)' resulted in error: (.+)$`)

// conditionRefusal puts such a refusal down to the webhooks whose
// matchConditions hold the expression quoted and whose rules and
// selectors take the pod: the one that acted. The fix removes that
// condition from it (a choice: the other way, rewritten so that it does not
// fail on this pod), then the workload tries again.
func conditionRefusal(f *ClusterFacts, w *Workload, nsLabels map[string]string, msg string) (policyRefusal, bool) {
	m := conditionError.FindStringSubmatch(msg)
	if m == nil {
		return policyRefusal{}, false
	}
	expr, problem := m[1], strings.TrimSpace(m[2])
	var by, fixes []string
	check := func(kind, config string, i int, name string, rules []admissionregistrationv1.RuleWithOperations, nsSel, objSel *metav1.LabelSelector, conds []admissionregistrationv1.MatchCondition) {
		if !rulesCoverPodCreate(rules) || !selects(nsSel, nsLabels) || !selects(objSel, w.Labels) {
			return
		}
		for j, c := range conds {
			if c.Expression != expr {
				continue
			}
			who := kind + " " + config + " (webhook " + name + ")"
			if isIstioWebhook(name) {
				who += ", Istio's injector"
			}
			by = append(by, who+"'s matchCondition "+c.Name)
			fixes = append(fixes, fmt.Sprintf(`kubectl patch %s %s --type=json -p '[{"op":"remove","path":"/webhooks/%d/matchConditions/%d"}]'   # a choice: its condition %s off, which fails on this pod (%s); or rewrite it so that it does not (a missing key read with has() or an optional ?[…].orValue(…))`,
				strings.ToLower(kind), config, i, j, c.Name, problem))
		}
	}
	for _, c := range f.Webhooks {
		for i, h := range c.Webhooks {
			check("MutatingWebhookConfiguration", c.Name, i, h.Name, h.Rules, h.NamespaceSelector, h.ObjectSelector, h.MatchConditions)
		}
	}
	for _, c := range f.ValidatingWebhooks {
		for i, h := range c.Webhooks {
			check("ValidatingWebhookConfiguration", c.Name, i, h.Name, h.Rules, h.NamespaceSelector, h.ObjectSelector, h.MatchConditions)
		}
	}
	if len(by) == 0 {
		return policyRefusal{}, false
	}
	pr := policyRefusal{by: strings.Join(by, " or "), down: true, condition: true, problem: "its matchCondition cannot be evaluated on the pod: " + problem}
	if len(fixes) == 1 {
		pr.fix = fixes[0]
	}
	return pr, true
}
