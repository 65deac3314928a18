package inject

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// A manifest's own policy and binding join the facts, named by their file;
// one the cluster has already is not added twice; other kinds are left.
func TestFileAdmission(t *testing.T) {
	facts := &injection.ClusterFacts{PolicyBindings: []admissionregistrationv1.ValidatingAdmissionPolicyBinding{{ObjectMeta: metav1.ObjectMeta{Name: "cluster-one"}}}}
	obj := func(kind, name string) map[string]any {
		return map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": map[string]any{"name": name},
			"spec": map[string]any{"policyName": name}}
	}
	objs := []map[string]any{obj("ValidatingAdmissionPolicy", "no-host-ip"), obj("ValidatingAdmissionPolicyBinding", "no-host-ip"),
		obj("ValidatingAdmissionPolicyBinding", "cluster-one"), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}
	fileAdmission(facts, objs, []string{"a.yaml", "a.yaml", "a.yaml", "a.yaml"})
	if len(facts.PolicyBindings) != 2 || len(facts.ValidatingPolicies) != 1 || facts.PolicyBindings[1].Spec.PolicyName != "no-host-ip" {
		t.Fatalf("bindings %+v, policies %+v", facts.PolicyBindings, facts.ValidatingPolicies)
	}
	if facts.FileAdmission["ValidatingAdmissionPolicyBinding/no-host-ip"] != "a.yaml" || facts.FileAdmission["ValidatingAdmissionPolicyBinding/cluster-one"] != "" {
		t.Errorf("file admission %v", facts.FileAdmission)
	}
}
