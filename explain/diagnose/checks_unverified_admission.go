package diagnose

import (
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// CodeAdmissionUnverified: a manifest's pods meet validating admission
// that the model does not evaluate.
const CodeAdmissionUnverified = "KM-INJ-018"

func init() {
	register(&Spec{Code: CodeAdmissionUnverified, Title: "admission not evaluated: a dry run decides", Stage: CheckInjection, Kind: Static, Status: Unknown,
		Reads: []Fact{FactMesh},
		Means: "A manifest's pods will meet validating admission that kubectl-mesh does not evaluate: a validating webhook other than Istio's, or a ValidatingAdmissionPolicy (CEL) bound with Deny, whose rules and selectors take in the pod. " +
			"It may refuse the pod, often for what the injector adds (istio-init's capabilities and root user, the proxy's image, resources and volumes), and then none is created. Not knowing is not \"admitted\": the injection check is unknown until a server-side dry run answers.",
		Detects: "For a manifest (-f) diagnosed without --verify: the validating webhook configurations (not Istio's) whose rules cover pod CREATE and whose namespaceSelector and objectSelector match the pod, and the ValidatingAdmissionPolicyBindings with the Deny action whose matchResources, and whose policy's matchConstraints, take in the pod; and the policies and bindings the manifest itself declares (the cluster does not have them yet), which no dry run evaluates until they are applied, --verify or not.",
		Fixes:   "Run the same command with --verify: a server-side dry-run create of the pod as the injector makes it, whose answer names what refuses it and the fix.",
		Source:  "Kubernetes docs, ValidatingAdmissionPolicy and dynamic admission control (validating webhooks run after the mutating ones, on the injected pod); istio/istio#49054",
		Planted: "a ValidatingAdmissionPolicy requiring terminationMessagePolicy FallbackToLogsOnError on every container, bound to an injection-enabled namespace, and a pod manifest that sets it on its own container only",
		run:     admissionUnverified})
}

func admissionUnverified(in *Input) []Finding {
	r := in.Injection
	if in.Pod != nil || r == nil || r.CreationBlocked || (len(r.UnverifiedAdmission) == 0 && r.UnverifiedAdmissionUnknown == "") {
		return nil
	}
	if r.Verified != nil && !fileDeclared(r.UnverifiedAdmission) {
		return nil // a dry run answered for everything the cluster has
	}
	if r.Expected != nil && !*r.Expected && len(r.UnverifiedAdmission) == 0 {
		return nil // nothing is injected, and nothing known validates it
	}
	var by []string
	for _, m := range r.UnverifiedAdmission {
		by = append(by, m.By)
	}
	ev := "validating admission that kubectl-mesh does not evaluate takes in its pods: " + strings.Join(by, ", ")
	if len(by) == 0 {
		ev = "the validating admission that may take in its pods could not be read: " + r.UnverifiedAdmissionUnknown
	} else if r.UnverifiedAdmissionUnknown != "" {
		ev += "; and what else may could not be read: " + r.UnverifiedAdmissionUnknown
	}
	ev += "; whether it admits the pod"
	if r.Expected != nil && *r.Expected {
		ev += " with what the injector adds"
	}
	ev += " only a server-side dry run shows"
	fix := "kubectl mesh diagnose " + in.Target + " --verify"
	if len(in.Files) > 0 {
		fix = "kubectl mesh diagnose -f " + strings.Join(in.Files, " -f ") + " -n " + r.Namespace + " --verify"
	}
	if fileDeclared(r.UnverifiedAdmission) && len(in.Files) > 0 {
		// A policy of the file itself: no dry run sees it before it is
		// applied; once it is, the live workload's answer names it.
		target := strings.ToLower(r.Kind) + "/" + r.Name
		return []Finding{{Status: Unknown, Evidence: ev + ", and a dry run only once the cluster has the policy",
			Fix: "kubectl apply -f " + strings.Join(in.Files, " -f ") + " && sleep 3 && kubectl mesh diagnose " + target + " -n " + r.Namespace +
				"   # the file's policy is evaluated only once it is applied: then the workload's answer names what it refuses, and the fix"}}
	}
	if r.NotVerified != "" {
		// --verify was asked and could not ask admission: what settles it
		// is said there.
		return []Finding{{Status: Unknown, Evidence: ev + " (--verify could not: " + r.NotVerified + ")"}}
	}
	return []Finding{{Status: Unknown, Evidence: ev, Fix: fix + "   # a dry-run create of the pod as the injector makes it: admission's own answer"}}
}

// fileDeclared says one of ms is a policy the manifest declares and the
// cluster does not have yet (no dry run evaluates it).
func fileDeclared(ms []injection.Mutator) bool {
	for _, m := range ms {
		if strings.Contains(m.By, "not applied yet") {
			return true
		}
	}
	return false
}
