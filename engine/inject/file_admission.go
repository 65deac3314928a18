package inject

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// fileAdmission adds to the facts the ValidatingAdmissionPolicies and
// their bindings a manifest declares that the cluster does not have yet
// (fileOf names the file of each object): its pods will meet them once the
// file is applied, and a dry run before that cannot evaluate them.
func fileAdmission(facts *injection.ClusterFacts, objs []map[string]any, fileOf []string) {
	have := map[string]bool{}
	for _, b := range facts.PolicyBindings {
		have["ValidatingAdmissionPolicyBinding/"+b.Name] = true
	}
	for _, p := range facts.ValidatingPolicies {
		have["ValidatingAdmissionPolicy/"+p.Name] = true
	}
	for i, obj := range objs {
		u := unstructured.Unstructured{Object: obj}
		if u.GroupVersionKind().Group != admissionregistrationv1.GroupName {
			continue
		}
		key := u.GetKind() + "/" + u.GetName()
		if have[key] {
			continue
		}
		switch u.GetKind() {
		case "ValidatingAdmissionPolicyBinding":
			var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
			if runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &b) != nil {
				continue
			}
			facts.PolicyBindings = append(facts.PolicyBindings, b)
		case "ValidatingAdmissionPolicy":
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			if runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &p) != nil {
				continue
			}
			facts.ValidatingPolicies = append(facts.ValidatingPolicies, p)
		default:
			continue
		}
		if facts.FileAdmission == nil {
			facts.FileAdmission = map[string]string{}
		}
		facts.FileAdmission[key] = fileOf[i]
	}
}
