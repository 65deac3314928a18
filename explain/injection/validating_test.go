package injection

import (
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The validating admission a manifest's pods meet: webhooks other than
// Istio's and Deny bindings whose rules, selectors and policy's constraints
// take the pod in; Warn-only bindings, bindings of policies about other
// resources and selectors of other pods do not.
func TestUnverifiedAdmission(t *testing.T) {
	deploymentsOnly := &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{"CREATE"}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}}}}
	pods := &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: podCreate()[0]}}}
	policy := func(name string, m *admissionregistrationv1.MatchResources) admissionregistrationv1.ValidatingAdmissionPolicy {
		return admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{MatchConstraints: m}}
	}
	binding := func(name, pol string, actions ...admissionregistrationv1.ValidationAction) admissionregistrationv1.ValidatingAdmissionPolicyBinding {
		return admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: pol, ValidationActions: actions}}
	}
	kyverno := admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kyverno"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "validate.kyverno.svc", Rules: podCreate()}, {Name: "db.example.com", Rules: podCreate(), ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}
	istiod := admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "istio-validator"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "rev.validation.istio.io", Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"networking.istio.io", "security.istio.io"}, APIVersions: []string{"*"}, Resources: []string{"*"}}}}}}}
	w := &Workload{Kind: "Deployment", Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"}}
	ns := map[string]string{"kubernetes.io/metadata.name": "shop"}
	for _, tc := range []struct {
		name    string
		f       ClusterFacts
		by      []string
		unknown string
	}{
		{name: "nothing"},
		{name: "a webhook for pods, one for other pods, Istio's config validation", f: ClusterFacts{ValidatingWebhooks: []admissionregistrationv1.ValidatingWebhookConfiguration{kyverno, istiod}},
			by: []string{"ValidatingWebhookConfiguration kyverno (webhook validate.kyverno.svc)"}},
		{name: "a Deny binding of a pod policy", f: ClusterFacts{PolicyBindings: []admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("term", "term", admissionregistrationv1.Deny)},
			ValidatingPolicies: []admissionregistrationv1.ValidatingAdmissionPolicy{policy("term", pods)}},
			by: []string{"ValidatingAdmissionPolicyBinding term (policy term)"}},
		{name: "a Warn binding", f: ClusterFacts{PolicyBindings: []admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("term", "term", admissionregistrationv1.Warn)},
			ValidatingPolicies: []admissionregistrationv1.ValidatingAdmissionPolicy{policy("term", pods)}}},
		{name: "a policy about Deployments", f: ClusterFacts{PolicyBindings: []admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("replicas", "replicas")},
			ValidatingPolicies: []admissionregistrationv1.ValidatingAdmissionPolicy{policy("replicas", deploymentsOnly)}}},
		{name: "the policies not read", f: ClusterFacts{PolicyBindings: []admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("term", "term")},
			ValidatingPoliciesUnknown: "forbidden: list validatingadmissionpolicies"},
			by: []string{"ValidatingAdmissionPolicyBinding term (policy term) (the policy's own constraints could not be read)"}, unknown: "forbidden: list validatingadmissionpolicies"},
		{name: "the policies not read, the binding selects other namespaces", f: ClusterFacts{PolicyBindings: []admissionregistrationv1.ValidatingAdmissionPolicyBinding{{ObjectMeta: metav1.ObjectMeta{Name: "other"},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "other", MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "billing"}}}}}},
			ValidatingPoliciesUnknown: "forbidden: list validatingadmissionpolicies"}},
		{name: "validating webhooks not read: the answer stands", f: ClusterFacts{ValidatingWebhooksUnknown: "forbidden: list validatingwebhookconfigurations"}},
		{name: "a binding of no policy", f: ClusterFacts{PolicyBindings: []admissionregistrationv1.ValidatingAdmissionPolicyBinding{binding("gone", "gone")},
			ValidatingPolicies: []admissionregistrationv1.ValidatingAdmissionPolicy{}}},
	} {
		got, unknown := unverifiedAdmission(&tc.f, w, ns)
		var by []string
		for _, m := range got {
			by = append(by, m.By)
			if m.Exempt == "" {
				t.Errorf("%s: %s has no exempting patch", tc.name, m.By)
			}
		}
		if !reflect.DeepEqual(by, tc.by) || unknown != tc.unknown {
			t.Errorf("%s: got %q (%q), want %q (%q)", tc.name, by, unknown, tc.by, tc.unknown)
		}
	}
}
