package injection

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// unverifiedAdmission is the validating admission that acts on a
// manifest's pods and that the model does not evaluate: the validating
// webhooks (not Istio's) and the ValidatingAdmissionPolicy bindings that
// deny, whose rules and selectors match the pod. Only a dry run says
// whether they admit it; unknown names what of them could not be read
// (the policies of bindings that take the pod in).
func unverifiedAdmission(f *ClusterFacts, w *Workload, nsLabels map[string]string) (out []Mutator, unknown string) {
	for _, c := range f.ValidatingWebhooks {
		for i, h := range c.Webhooks {
			if isIstioWebhook(h.Name) || !rulesCoverPodCreate(h.Rules) || !selects(h.NamespaceSelector, nsLabels) || !selects(h.ObjectSelector, w.Labels) {
				continue
			}
			out = append(out, Mutator{
				By:     "ValidatingWebhookConfiguration " + c.Name + " (webhook " + h.Name + ")",
				Exempt: exemptCommand("validatingwebhookconfiguration "+c.Name, fmt.Sprintf("/webhooks/%d", i), false, h.NamespaceSelector, w.Namespace),
			})
		}
	}
	policies := map[string]*admissionregistrationv1.ValidatingAdmissionPolicy{}
	for i := range f.ValidatingPolicies {
		policies[f.ValidatingPolicies[i].Name] = &f.ValidatingPolicies[i]
	}
	for _, b := range f.PolicyBindings {
		if !denies(b.Spec.ValidationActions) {
			continue // Warn and Audit admit the pod
		}
		m := b.Spec.MatchResources
		if !matchesPod(m, nsLabels, w.Labels) {
			continue
		}
		by := "ValidatingAdmissionPolicyBinding " + b.Name + " (policy " + b.Spec.PolicyName + ")"
		if p := policies[b.Spec.PolicyName]; p != nil {
			if !matchesPod(p.Spec.MatchConstraints, nsLabels, w.Labels) {
				continue
			}
		} else if f.ValidatingPoliciesUnknown != "" {
			// Its own selectors take the pod in; whether its policy's do is
			// unknown: said, with what would settle it.
			by += " (the policy's own constraints could not be read)"
			unknown = f.ValidatingPoliciesUnknown
		} else if f.ValidatingPolicies != nil {
			continue // a binding of no policy does nothing
		}
		var nsSel *metav1.LabelSelector
		if m != nil {
			nsSel = m.NamespaceSelector
		}
		if file := f.FileAdmission["ValidatingAdmissionPolicyBinding/"+b.Name]; file != "" {
			by += ", declared in " + file + " and not applied yet"
		}
		out = append(out, Mutator{By: by, Exempt: exemptCommand("validatingadmissionpolicybinding "+b.Name, "/spec/matchResources", m == nil, nsSel, w.Namespace)})
	}
	// Validating webhooks that could not be read leave the answer as it is
	// (as for a live pod, only a refusal is put down to them).
	return out, unknown
}

// denies says a binding's actions include Deny (none given: Deny).
func denies(actions []admissionregistrationv1.ValidationAction) bool {
	if len(actions) == 0 {
		return true
	}
	for _, a := range actions {
		if a == admissionregistrationv1.Deny {
			return true
		}
	}
	return false
}

// matchesPod says a binding's or a policy's match resources (nil: all)
// take in the creation of this pod.
func matchesPod(m *admissionregistrationv1.MatchResources, nsLabels, podLabels map[string]string) bool {
	if m == nil {
		return true
	}
	if len(m.ResourceRules) > 0 && !namedRulesCoverPodCreate(m.ResourceRules) {
		return false
	}
	for _, ex := range m.ExcludeResourceRules {
		if len(ex.ResourceNames) == 0 && rulesCoverPodCreate([]admissionregistrationv1.RuleWithOperations{ex.RuleWithOperations}) {
			return false
		}
	}
	return selects(m.NamespaceSelector, nsLabels) && selects(m.ObjectSelector, podLabels)
}
