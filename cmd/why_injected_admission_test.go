package cmd

import (
	"strings"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// why-injected on a workload whose pods an admission mutator kept out of
// the mesh (red team round 23's 06: a MutatingAdmissionPolicy labels them
// sidecar.istio.io/inject=false): the template's verdict says what admission
// does to its pods first, with diagnose's finding and fix; a workload whose
// pods have no such finding keeps its verdict.
func TestWhyInjectedWorkloadChangedByAdmission(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		name    string
		finding *diagnose.Finding
		want    bool
	}{
		{"mutated", &diagnose.Finding{Code: diagnose.CodeInjectLabelChanged, Status: diagnose.Fail, Evidence: "the pod has label sidecar.istio.io/inject=\"false\" …: MutatingAdmissionPolicyBinding b", Fix: "kubectl patch mutatingadmissionpolicybinding b …"}, true},
		{"healthy", nil, false},
		{"another finding", &diagnose.Finding{Code: diagnose.CodeNeverInjected, Status: diagnose.Warning}, false},
	} {
		w := &injection.InjectionReport{Kind: "Deployment", Namespace: "ns", Name: "sync", Verdict: "Pods created from this template will be injected."}
		p := &injection.InjectionReport{Kind: "Pod", Namespace: "ns", Name: "sync-1"}
		pd := &diagnose.Diagnosis{}
		if tc.finding != nil {
			pd.Findings = []diagnose.Finding{*tc.finding}
		}
		changedByAdmission([]*injection.InjectionReport{w, p}, []*diagnose.Diagnosis{{}, pd})
		checks += 2
		said := strings.Contains(w.Verdict, "But admission changes its pods first (KM-INJ-017): ")
		if said != tc.want {
			t.Errorf("%s: verdict %q", tc.name, w.Verdict)
		}
		if tc.want && w.Fix != tc.finding.Fix || !tc.want && w.Fix != "" {
			t.Errorf("%s: fix %q", tc.name, w.Fix)
		}
	}
	t.Logf("%d checks", checks)
}
