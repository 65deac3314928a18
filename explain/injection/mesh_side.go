package injection

import (
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Annotations of the injection a policy most often refuses a part of.
const (
	annMergeMetrics  = "prometheus.istio.io/merge-metrics"
	annProxyCPU      = istio.AnnotationProxyCPU
	annProxyCPULimit = istio.AnnotationProxyCPULimit
	annProxyMem      = istio.AnnotationProxyMemory
	annProxyMemLimit = istio.AnnotationProxyMemoryLimit
)

// MeshSideCandidates are the changes of a template's annotations that
// change one part of what the injector adds, in the order they are tried
// (the least change first): each is asked of admission, sidecar and all.
func MeshSideCandidates(a map[string]string) []MeshSide {
	cpu, mem := a[annProxyCPU], a[annProxyMem]
	if cpu == "" {
		cpu = "100m" // the injector's default request
	}
	if mem == "" {
		mem = "128Mi"
	}
	first, last := privilegeCandidates(a)
	out := first
	if a[annMergeMetrics] != "false" {
		out = append(out, MeshSide{Set: map[string]string{annMergeMetrics: "false"},
			What: "the prometheus.io/* scrape annotations the injector adds for metrics merging (left out with " + annMergeMetrics + "=false)"})
	}
	requestsOnly := map[string]string{annProxyCPU: cpu, annProxyMem: mem, annProxyCPULimit: "", annProxyMemLimit: ""}
	if a[annProxyCPU] == "" || a[annProxyMem] == "" || a[annProxyCPULimit] != "" || a[annProxyMemLimit] != "" {
		out = append(out, MeshSide{Set: requestsOnly,
			What: "the sidecar's resource limits (with its requests set by annotation and no limit annotations, the injector gives istio-proxy and istio-init requests only)"})
	}
	if a[annProxyCPULimit] != cpu || a[annProxyMemLimit] != mem {
		out = append(out, MeshSide{Set: map[string]string{annProxyCPU: cpu, annProxyMem: mem, annProxyCPULimit: cpu, annProxyMemLimit: mem},
			What: "the sidecar's resources (limits equal to requests: istio-proxy and istio-init get limits, and Guaranteed QoS)"})
	}
	// The other sidecar kind (both, when the template does not say which
	// it has: the revision's default decides).
	if a[istio.AnnotationNativeSidecar] != "false" {
		out = append(out, MeshSide{Set: map[string]string{istio.AnnotationNativeSidecar: "false"},
			What: "the native sidecar (a classic one instead: istio-proxy among the containers, not a restartable init container)"})
	}
	if a[istio.AnnotationNativeSidecar] != "true" {
		out = append(out, MeshSide{Set: map[string]string{istio.AnnotationNativeSidecar: "true"},
			What: "the classic sidecar (a native one instead: istio-proxy as a restartable init container, not among the containers)"})
	}
	if a[annMergeMetrics] != "false" {
		both := map[string]string{annMergeMetrics: "false"}
		for k, v := range requestsOnly {
			both[k] = v
		}
		out = append(out, MeshSide{Set: both, What: "the prometheus.io/* scrape annotations and the sidecar's resource limits"})
	}
	// The sidecar's requests at their least (a policy that caps a
	// container's request): istio-proxy and istio-init are sized alike.
	if q, err := resource.ParseQuantity(cpu); err == nil && q.MilliValue() > 10 {
		out = append(out, MeshSide{Set: map[string]string{annProxyCPU: "10m"},
			What: "the sidecar's CPU request (" + cpu + "; 10m instead, or any value up to what the policy admits: istio-proxy and istio-init are sized alike)"})
	}
	if q, err := resource.ParseQuantity(mem); err == nil && q.Value() > 40<<20 {
		out = append(out, MeshSide{Set: map[string]string{annProxyMem: "40Mi"},
			What: "the sidecar's memory request (" + mem + "; 40Mi instead, or any value up to what the policy admits: istio-proxy and istio-init are sized alike)"})
	}
	return append(out, last...)
}

// underMinimum is a LimitRange's refusal of a container's request below
// its minimum ("minimum cpu usage per Container is 150m, but request is
// 100m").
var underMinimum = regexp.MustCompile(`minimum (cpu|memory) usage per Container is ([0-9][0-9.]*[a-zA-Z]*), but request is`)

// MinimumCandidates are, for a refusal of requests under a LimitRange's
// minimum, the sidecar's requests raised to it (tried before the others:
// the change the refusal itself names); none for any other refusal.
func MinimumCandidates(refusal string) []MeshSide {
	set := map[string]string{}
	var said []string
	for _, m := range underMinimum.FindAllStringSubmatch(refusal, -1) {
		key := annProxyCPU
		if m[1] == "memory" {
			key = annProxyMem
		}
		if _, err := resource.ParseQuantity(m[2]); err != nil || set[key] != "" {
			continue
		}
		set[key] = m[2]
		said = append(said, m[1]+" "+m[2])
	}
	if len(set) == 0 {
		return nil
	}
	sort.Strings(said)
	return []MeshSide{{Set: set, What: "the sidecar's requests, under the LimitRange's minimum per container (" + strings.Join(said, ", ") + " instead: istio-proxy and istio-init are sized alike)"}}
}

// Apply is a copy of annotations changed as m says (a value "" removes
// the key).
func (m MeshSide) Apply(annotations map[string]string) map[string]string {
	return setKeys(annotations, m.Set)
}

// ApplyLabels is a copy of labels changed as m says.
func (m MeshSide) ApplyLabels(labels map[string]string) map[string]string {
	if len(m.Labels) == 0 {
		return labels
	}
	return setKeys(labels, m.Labels)
}

func setKeys(in, set map[string]string) map[string]string {
	out := make(map[string]string, len(in)+len(set))
	for k, v := range in {
		out[k] = v
	}
	for k, v := range set {
		if v == "" {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}
