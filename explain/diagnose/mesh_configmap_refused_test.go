package diagnose

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A binding leaves the cluster's ConfigMaps out by name, whatever its
// matchResources has: none, no excludeResourceRules yet, some already.
func TestExcludeConfigMaps(t *testing.T) {
	names := []string{"istio-ca-root-cert", "kube-root-ca.crt"}
	rule := `{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE","UPDATE"],"resourceNames":["istio-ca-root-cert","kube-root-ca.crt"],"resources":["configmaps"]}`
	cases := []struct {
		mr   *admissionregistrationv1.MatchResources
		want string
	}{
		{nil, `[{"op":"add","path":"/spec/matchResources","value":{"excludeResourceRules":[` + rule + `]}}]`},
		{&admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{}}, `[{"op":"add","path":"/spec/matchResources/excludeResourceRules","value":[` + rule + `]}]`},
		{&admissionregistrationv1.MatchResources{ExcludeResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{}}}, `[{"op":"add","path":"/spec/matchResources/excludeResourceRules/-","value":` + rule + `}]`},
	}
	for i, tc := range cases {
		b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "owner"}, Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{MatchResources: tc.mr}}
		got := excludeConfigMaps(b, names)
		if want := "kubectl patch validatingadmissionpolicybinding owner --type=json -p '" + tc.want + "'"; got != want {
			t.Errorf("%d: %s\nwant %s", i, got, want)
		}
	}
}

// The refused ConfigMaps are named with the binding, and the fix lets
// their writers in and has them write now; admitted, nothing is said.
func TestRefusedConfigMaps(t *testing.T) {
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}
	in := &Input{Facts: Facts{Pod: pod(nil), ConfigMapAdmissions: []ConfigMapAdmission{
		{Name: "istio-ca-root-cert", Refusal: "configmaps \"istio-ca-root-cert\" is forbidden: ValidatingAdmissionPolicy 'owner' with binding 'owner' denied request: every ConfigMap must carry an owner label", Binding: b},
		{Name: "kube-root-ca.crt", Refusal: "… denied request: every ConfigMap must carry an owner label", Binding: b}}}}
	f := &Finding{}
	if !in.refusedConfigMaps(f) {
		t.Fatal("not named")
	}
	for _, want := range []string{"ConfigMap istio-ca-root-cert (istiod's) and ConfigMap kube-root-ca.crt (kube-controller-manager's)", "owner label"} {
		if !strings.Contains(f.Evidence, want) {
			t.Errorf("evidence %q lacks %q", f.Evidence, want)
		}
	}
	lines := strings.Split(f.Fix, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "kubectl patch validatingadmissionpolicybinding owner") || !strings.HasPrefix(lines[1], "sleep 3; kubectl annotate namespace shop kubectl-mesh/resync=") ||
		!strings.Contains(lines[1], "istiod and kube-controller-manager write them now") {
		t.Errorf("fix %q", f.Fix)
	}
	in.ConfigMapAdmissions = []ConfigMapAdmission{{Name: "istio-ca-root-cert"}}
	if in.refusedConfigMaps(&Finding{}) {
		t.Error("an admitted ConfigMap is named as refused")
	}
}
