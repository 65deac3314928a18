package diagnose

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeServiceInjectedLabel: a Service selects by a label Istio's injector
// sets on each pod, with a value this pod's differs from, and so misses it.
const CodeServiceInjectedLabel = "KM-CONN-010"

// injectedLabels are the labels Istio's injector sets on every pod it
// injects, from its other labels (a Service's selector should not read
// them: their values follow the pod's version and the mesh).
var injectedLabels = map[string]string{
	"service.istio.io/canonical-name":     "from the pod's app.kubernetes.io/name or app label, else its workload's name",
	"service.istio.io/canonical-revision": "from the pod's app.kubernetes.io/version or version label, else \"latest\"",
	"security.istio.io/tlsMode":           "\"istio\" on every injected pod",
	// Not the injector's, but the mesh's: the revision that injects the
	// pod, which a revision move (a canary upgrade) changes.
	istio.LabelRev: "",
}

// labelOrigin says where a pod's value of one of injectedLabels comes from.
func labelOrigin(k string) string {
	if k == istio.LabelRev {
		return "the revision label, which moving the pods to another revision (a canary upgrade) changes"
	}
	return "the injector sets it " + injectedLabels[k]
}

func init() {
	register(&Spec{Code: CodeServiceInjectedLabel, Title: "a Service selects by a label the injector sets", Stage: CheckConnections, Kind: Static, Status: Warning,
		Reads:   []Fact{FactPod, FactServices},
		Means:   "A Service's selector reads a label Istio's injector sets on each pod it injects (service.istio.io/canonical-name, service.istio.io/canonical-revision, security.istio.io/tlsMode), derived from the pod's other labels, or the revision label istio.io/rev. Every other key of the selector matches this pod, but that label's value on it differs, so the Service does not send to it: after a version bump (version: v2), a Service pinned to canonical-revision v1 has no endpoints; after a canary upgrade moves the pods to another revision, one pinned to istio.io/rev=OLD has none.",
		Detects: "The Services of the pod's namespace whose selector, less those labels, matches the pod, while one of them in it has another value on the pod (or none); and, as a hazard, a Service that selects the pod by istio.io/rev beside its own labels (empty at the next revision move).",
		Fixes:   "A kubectl patch of the Service that removes that key from its selector (its other keys still select the pods); or, if the Service is meant to pin one version, select by the pod's own version label instead.",
		Source:  "Istio docs, canonical service labels (service.istio.io/canonical-name and canonical-revision are set by the injector from app and version)",
		Planted: "a sidecar pod labelled app=web version=v2 and a Service selecting app=web service.istio.io/canonical-revision=v1",
		run:     serviceInjectedLabel})
}

// WithoutInjectedLabels is selector less the labels Istio's injector sets.
func WithoutInjectedLabels(selector map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range selector {
		if _, injected := injectedLabels[k]; !injected {
			out[k] = v
		}
	}
	return out
}

// InjectedLabelMiss are the keys of selector that Istio's injector sets on
// pods, when selector less them matches pod while one of them does not:
// the Service misses the pod for them alone. None otherwise.
func InjectedLabelMiss(selector map[string]string, pod *corev1.Pod) []string {
	return labelMiss(selector, pod, injectedLabels)
}

func serviceInjectedLabel(in *Input) []Finding {
	p := in.Pod
	if p == nil {
		return nil
	}
	out := revisionSelected(in)
	if len(in.ServicesMissing) == 0 {
		return out
	}
	for _, s := range in.ServicesMissing {
		keys := InjectedLabelMiss(s.Spec.Selector, p)
		if len(keys) == 0 {
			continue
		}
		out = append(out, Finding{Status: Warning,
			Evidence: fmt.Sprintf("Service %s selects %s: every other key of its selector matches this pod, so it is meant for it, but it does not send to it", s.Name, selectorSays(s, p, keys, labelOrigin)),
			Mesh:     "the label Istio's injector sets (" + strings.Join(keys, ", ") + ")",
			Fix:      selectorRemoval(s, keys) + "   # its other keys still select the pods; to pin a version, select the pod's own version label instead"})
	}
	return out
}

// revisionSelected: a Service that selects this pod by its revision label
// as well as by its own: it sends to it now, and to none of the pods once
// they move to another revision, until its selector is changed too.
func revisionSelected(in *Input) []Finding {
	var out []Finding
	for _, s := range in.Services {
		v, ok := s.Spec.Selector[istio.LabelRev]
		if !ok || len(s.Spec.Selector) < 2 {
			continue
		}
		out = append(out, Finding{Status: Warning,
			Evidence: fmt.Sprintf("Service %s selects %s=%q beside the pod's own labels: it sends to this pod now, and to none of its workload's pods once they move to another revision (a canary upgrade relabels them), until its selector is changed as well", s.Name, istio.LabelRev, v),
			Mesh:     "the revision label " + istio.LabelRev,
			Fix:      selectorRemoval(s, []string{istio.LabelRev}) + "   # its other keys still select the pods, on any revision"})
	}
	return out
}
