package diagnose

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// CodeServiceTemplateLabel: a Service selects by a label the pod's
// controller sets per template (pod-template-hash, controller-revision-hash):
// each rollout gives the pods a new value, and the Service misses them.
const CodeServiceTemplateLabel = "KM-CONN-011"

// templateLabels are the labels a workload's controller sets on its pods,
// one value per template, and where the value comes from.
var templateLabels = map[string]string{
	"pod-template-hash":        "set by the Deployment's ReplicaSet, a new value at every rollout",
	"controller-revision-hash": "set by the StatefulSet or DaemonSet, a new value at every change of its template",
}

func init() {
	register(&Spec{Code: CodeServiceTemplateLabel, Title: "a Service selects by a label set per template", Stage: CheckConnections, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactServices},
		Means:   "A Service's selector reads a label the pod's controller sets with one value per template (pod-template-hash, controller-revision-hash), copied from a pod's labels. Every other key of the selector matches this pod, but that label's value on it differs, so the Service does not send to it: since the last rollout it selects none of the workload's pods. One that still selects the pod does so until the next rollout.",
		Detects: "The Services of the pod's namespace whose selector, less those labels, matches the pod while one of them differs on it (fail); and, as a hazard, a Service that selects the pod by one of them beside its own labels (warning).",
		Fixes:   "A kubectl patch of the Service that removes that key from its selector: its other keys still select the pods, at every rollout.",
		Source:  "Kubernetes docs, Deployments: the pod-template-hash label is added by the Deployment controller to every ReplicaSet it creates or adopts, and is not to be changed",
		Planted: "a Deployment's pod (app=cart) and a Service selecting app=cart with a pod-template-hash no ReplicaSet of it has",
		run:     serviceTemplateLabel})
}

// WithoutTemplateLabels is selector less the labels set per template.
func WithoutTemplateLabels(selector map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range selector {
		if _, set := templateLabels[k]; !set {
			out[k] = v
		}
	}
	return out
}

// TemplateLabelMiss are the keys of selector that a controller sets on
// pods per template, when selector less them matches pod while one of
// them does not. None otherwise.
func TemplateLabelMiss(selector map[string]string, pod *corev1.Pod) []string {
	return labelMiss(selector, pod, templateLabels)
}

func serviceTemplateLabel(in *Input) []Finding {
	p := in.Pod
	if p == nil {
		return nil
	}
	var out []Finding
	const still = "   # its other keys still select the pods, at every rollout"
	for _, s := range in.ServicesMissing {
		keys := TemplateLabelMiss(s.Spec.Selector, p)
		if len(keys) == 0 {
			continue
		}
		said := selectorSays(s, p, keys, func(k string) string { return templateLabels[k] })
		out = append(out, Finding{Status: Fail,
			Evidence: fmt.Sprintf("Service %s selects %s: every other key of its selector matches this pod, so it is meant for it, but it does not send to it, nor to any pod of a template made since", s.Name, said),
			Fix:      selectorRemoval(s, keys) + still})
	}
	for _, s := range in.Services {
		var keys []string
		for k := range templateLabels {
			if _, ok := s.Spec.Selector[k]; ok && len(s.Spec.Selector) > 1 {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			continue
		}
		sort.Strings(keys)
		out = append(out, Finding{Status: Warning,
			Evidence: fmt.Sprintf("Service %s selects %s beside the pod's own labels: it sends to this pod now, and to none of its workload's pods after the next rollout (%s)", s.Name, quoteList(keys), templateLabels[keys[0]]),
			Fix:      selectorRemoval(s, keys) + still})
	}
	return out
}
