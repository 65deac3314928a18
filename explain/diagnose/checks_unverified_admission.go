package diagnose

import (
	"strings"
)

// CodeAdmissionUnverified: a manifest's pods meet validating admission
// that the model does not evaluate.
const CodeAdmissionUnverified = "KM-INJ-018"

func init() {
	register(&Spec{Code: CodeAdmissionUnverified, Title: "admission not evaluated: a dry run decides", Stage: CheckInjection, Kind: Static, Status: Unknown,
		Reads: []Fact{FactMesh},
		Means: "A manifest's pods will meet validating admission that kubectl-mesh does not evaluate: a validating webhook other than Istio's, or a ValidatingAdmissionPolicy (CEL) bound with Deny, whose rules and selectors take in the pod. " +
			"It may refuse the pod, often for what the injector adds (istio-init's capabilities and root user, the proxy's image, resources and volumes), and then none is created. Not knowing is not \"admitted\": the injection check is unknown until a server-side dry run answers.",
		Detects: "For a manifest (-f) diagnosed without --verify: the validating webhook configurations (not Istio's) whose rules cover pod CREATE and whose namespaceSelector and objectSelector match the pod, and the ValidatingAdmissionPolicyBindings with the Deny action whose matchResources, and whose policy's matchConstraints, take in the pod.",
		Fixes:   "Run the same command with --verify: a server-side dry-run create of the pod as the injector makes it, whose answer names what refuses it and the fix.",
		Source:  "Kubernetes docs, ValidatingAdmissionPolicy and dynamic admission control (validating webhooks run after the mutating ones, on the injected pod); istio/istio#49054",
		Planted: "a ValidatingAdmissionPolicy requiring terminationMessagePolicy FallbackToLogsOnError on every container, bound to an injection-enabled namespace, and a pod manifest that sets it on its own container only",
		run:     admissionUnverified})
}

func admissionUnverified(in *Input) []Finding {
	r := in.Injection
	if in.Pod != nil || r == nil || r.Verified != nil || r.CreationBlocked || (len(r.UnverifiedAdmission) == 0 && r.UnverifiedAdmissionUnknown == "") {
		return nil
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
	if r.NotVerified != "" {
		// --verify was asked and could not ask admission: what settles it
		// is said there.
		return []Finding{{Status: Unknown, Evidence: ev + " (--verify could not: " + r.NotVerified + ")"}}
	}
	return []Finding{{Status: Unknown, Evidence: ev, Fix: fix + "   # a dry-run create of the pod as the injector makes it: admission's own answer"}}
}
