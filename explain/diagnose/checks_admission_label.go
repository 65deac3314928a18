package diagnose

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// CodeInjectLabelChanged: the pod's injection labels are not its
// template's: an admission mutator set them.
const CodeInjectLabelChanged = "KM-INJ-017"

func init() {
	register(&Spec{Code: CodeInjectLabelChanged, Title: "admission changed the pod's injection labels", Stage: CheckInjection, Kind: Static, Status: Fail,
		Reads: []Fact{FactPod, FactOwner, FactMesh},
		Means: "The labels and annotation that decide injection (sidecar.istio.io/inject, istio.io/rev) are not on the pod as its template has them: a mutating webhook or MutatingAdmissionPolicy set them when the pod was created " +
			"(a platform rule such as \"no sidecars for Jobs\", written for the classic sidecar's Job hang): the pod is not injected as its template and namespace ask, and every new pod is changed the same way.",
		Detects: "The pod's sidecar.istio.io/inject and istio.io/rev labels and sidecar.istio.io/inject annotation against its template's (the workload's, or a bare pod's applied manifest), and the admission mutators other than Istio's whose rules and selectors match the pod.",
		Fixes:   "The namespace exempted from the one mutator that matches (a JSON patch of its namespaceSelector), then the pod re-created (a Job re-created); with several, which to exempt is named as a choice.",
		Source:  "istio/istio issues on Job pods and classic sidecars (platform policies that opt Jobs out); Kubernetes docs, MutatingAdmissionPolicy",
		Planted: "a MutatingAdmissionPolicy that labels Job pods sidecar.istio.io/inject=false in an injection-enabled namespace",
		run:     injectLabelChanged})
}

// injectionKeys are the labels and annotations that decide injection, as
// "label KEY" or "annotation KEY".
var injectionKeys = []string{"label sidecar.istio.io/inject", "label istio.io/rev", "annotation sidecar.istio.io/inject"}

// HasInjectionKeys says the pod carries a label or annotation that
// decides injection.
func HasInjectionKeys(p *corev1.Pod) bool {
	for _, k := range injectionKeys {
		kind, key, _ := strings.Cut(k, " ")
		m := p.Labels
		if kind == "annotation" {
			m = p.Annotations
		}
		if _, ok := m[key]; ok {
			return true
		}
	}
	return false
}

func injectLabelChanged(in *Input) []Finding {
	p := in.Pod
	t, owner, ns := in.template()
	if p == nil || t == nil {
		return nil
	}
	var changed []string
	for _, k := range injectionKeys {
		kind, key, _ := strings.Cut(k, " ")
		pod, tmpl := p.Labels, t.Labels
		if kind == "annotation" {
			pod, tmpl = p.Annotations, t.Annotations
		}
		pv, pok := pod[key]
		tv, tok := tmpl[key]
		if pok == tok && pv == tv {
			continue
		}
		switch {
		case !pok:
			changed = append(changed, fmt.Sprintf("%s %s=%q of its template is not on the pod", kind, key, tv))
		case !tok:
			changed = append(changed, fmt.Sprintf("the pod has %s %s=%q, which its template does not set", kind, key, pv))
		default:
			changed = append(changed, fmt.Sprintf("the pod has %s %s=%q where its template has %q", kind, key, pv, tv))
		}
	}
	if len(changed) == 0 {
		return nil
	}
	sort.Strings(changed)
	what := owner
	if what == "" {
		what = "the manifest it was applied with"
	}
	ev := strings.Join(changed, "; ") + " (template: " + what + "): it was changed when the pod was created, by an admission mutator"
	status := Warning
	if !in.injected() {
		status = Fail
		ev += "; the pod is not injected"
	}
	f := Finding{Status: status, Evidence: ev}
	ms := in.otherMutators()
	switch {
	case len(ms) > 0:
		f.Evidence += ": " + mutatorsNamed(ms) + " (the mutators other than Istio's injector whose rules and selectors match the pod)"
		f.Mesh = "the pod's injection labels, set at admission by " + mutatorsNamed(ms)
		recreate := recreateCommand(p)
		if job, ok := strings.CutPrefix(owner, "job/"); ok {
			recreate = injection.RecreateJob(job, ns, nil, nil)
		}
		f.Fix = mutatorFixThen(p, ms, "sets them", recreate)
	case in.Injection != nil && in.Injection.OtherMutatorsUnknown != "":
		f.Status = Unknown
		f.Evidence += " (which mutators act on the pod is unknown: " + in.Injection.OtherMutatorsUnknown + "), or the template changed since the pod was created"
		f.Fix = "kubectl get mutatingwebhookconfigurations,mutatingadmissionpolicybindings   # if one of them sets the labels: exempt namespace " + ns + " from it, then re-create the pod"
		f.Needs = []string{"list mutatingwebhookconfigurations and mutatingadmissionpolicybindings"}
	default:
		// No mutator matches the pod: its template changed since (a
		// rollout), not admission.
		return nil
	}
	return []Finding{f}
}
