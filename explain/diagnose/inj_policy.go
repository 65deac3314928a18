package diagnose

import "github.com/kubectl-mesh/kubectl-mesh/explain/injection"

// CodePolicyRefused: another webhook or an admission policy refuses what
// the injector added to the pod.
const CodePolicyRefused = "KM-INJ-014"

func init() {
	register(&Spec{Code: CodePolicyRefused, Title: "a policy refuses what the injector added", Stage: CheckInjection, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactMesh, FactOwner},
		Means:   "An admission step other than the mesh's own — another webhook (validating or mutating) or a ValidatingAdmissionPolicy — refuses the pod because of what the injector added to it (istio-init's NET_ADMIN and NET_RAW, a container istio-proxy or istio-init, the proxy's image): without the injection it would be admitted, so the mesh is the cause; the workload's pods are never created.",
		Detects: "The owner's FailedCreate events: the policy and binding the apiserver names, or the webhook it quotes, put down to the configuration whose rules and selectors match this pod; the message must name what the injector added (a container of its own that asks for the capability is the pod's, not the mesh's).",
		Fixes:   "Exempt the namespace from the policy that acted (a JSON patch adding kubernetes.io/metadata.name NotIn [namespace] to its namespaceSelector, or its binding's), or on the mesh's side, Istio's CNI plugin (no istio-init), or sidecar annotations the policy admits.",
		Source:  "istio/istio#49054 (another admission step changing or refusing what the injector added); Istio docs, application requirements (NET_ADMIN and NET_RAW)",
		Planted: "a ValidatingAdmissionPolicy refusing containers that add NET_ADMIN, bound to an injection-enabled namespace",
		run:     func(in *Input) []Finding { return only(in.injection().findings, CodePolicyRefused) }})
}

func init() { blockedCodes[injection.BlockedPolicy] = CodePolicyRefused }
