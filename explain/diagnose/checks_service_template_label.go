package diagnose

import (
	"fmt"
	"sort"
	"strings"

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

// labelMiss are the keys of selector among set whose value pod lacks, when
// every other key of selector (at least one) matches pod.
func labelMiss[V any](selector map[string]string, pod *corev1.Pod, set map[string]V) []string {
	if pod == nil || len(selector) == 0 {
		return nil
	}
	var miss []string
	rest := 0
	for k, v := range selector {
		if _, in := set[k]; in {
			if got, ok := pod.Labels[k]; !ok || got != v {
				miss = append(miss, k)
			}
			continue
		}
		rest++
		if got, ok := pod.Labels[k]; !ok || got != v {
			return nil // it does not select the pod for another key
		}
	}
	if rest == 0 {
		return nil // nothing but those labels: not this pod's Service by anything else
	}
	sort.Strings(miss)
	return miss
}

func serviceTemplateLabel(in *Input) []Finding {
	p := in.Pod
	if p == nil {
		return nil
	}
	var out []Finding
	remove := func(s corev1.Service, keys []string) string {
		var ops []string
		for _, k := range keys {
			ops = append(ops, `{"op":"remove","path":"/spec/selector/`+jsonPointer(k)+`"}`)
		}
		return fmt.Sprintf("kubectl patch service %s -n %s --type=json -p '[%s]'   # its other keys still select the pods, at every rollout", s.Name, s.Namespace, strings.Join(ops, ","))
	}
	for _, s := range in.ServicesMissing {
		keys := TemplateLabelMiss(s.Spec.Selector, p)
		if len(keys) == 0 {
			continue
		}
		var said []string
		for _, k := range keys {
			has := "none"
			if v, ok := p.Labels[k]; ok {
				has = fmt.Sprintf("%q", v)
			}
			said = append(said, fmt.Sprintf("%s=%q (this pod's: %s; %s)", k, s.Spec.Selector[k], has, templateLabels[k]))
		}
		out = append(out, Finding{Status: Fail,
			Evidence: fmt.Sprintf("Service %s selects %s: every other key of its selector matches this pod, so it is meant for it, but it does not send to it, nor to any pod of a template made since", s.Name, strings.Join(said, "; ")),
			Fix:      remove(s, keys)})
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
			Fix:      remove(s, keys)})
	}
	return out
}
