package diagnose

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

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

// selectorSays tells, for each of keys, the Service's value, this pod's
// (or none) and where the pod's comes from (origin).
func selectorSays(s corev1.Service, p *corev1.Pod, keys []string, origin func(string) string) string {
	var said []string
	for _, k := range keys {
		has := "none"
		if v, ok := p.Labels[k]; ok {
			has = fmt.Sprintf("%q", v)
		}
		said = append(said, fmt.Sprintf("%s=%q (this pod's: %s; %s)", k, s.Spec.Selector[k], has, origin(k)))
	}
	return strings.Join(said, "; ")
}

// selectorRemoval is the kubectl patch that takes keys out of the
// Service's selector.
func selectorRemoval(s corev1.Service, keys []string) string {
	var ops []string
	for _, k := range keys {
		ops = append(ops, `{"op":"remove","path":"/spec/selector/`+jsonPointer(k)+`"}`)
	}
	return fmt.Sprintf("kubectl patch service %s -n %s --type=json -p '[%s]'", s.Name, s.Namespace, strings.Join(ops, ","))
}
