package diagnose

import "github.com/kubectl-mesh/kubectl-mesh/explain/injection"

func init() {
	checkCases = append(checkCases, checkCase{code: CodePolicyRefused, inj: func(r *injection.InjectionReport) {
		r.CreationBlocked, r.BlockedBy = true, injection.BlockedPolicy
		r.Verdict = "Pods cannot be created: the apiserver rejected pod creation: ValidatingAdmissionPolicy 'no-net-admin' with binding 'no-net-admin' denied request; refused by ValidatingAdmissionPolicy no-net-admin (binding no-net-admin), which rejects the capability NET_ADMIN of istio-init"
		r.Fix = `kubectl patch validatingadmissionpolicybinding no-net-admin --type=json -p '[]'`
	}, status: Fail, evidence: "ValidatingAdmissionPolicy no-net-admin", fix: "validatingadmissionpolicybinding no-net-admin"})
}
