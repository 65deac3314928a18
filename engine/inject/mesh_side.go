package inject

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Annotations of the injection a policy most often refuses a part of.
const (
	annMergeMetrics  = "prometheus.istio.io/merge-metrics"
	annProxyCPU      = "sidecar.istio.io/proxyCPU"
	annProxyCPULimit = "sidecar.istio.io/proxyCPULimit"
	annProxyMem      = "sidecar.istio.io/proxyMemory"
	annProxyMemLimit = "sidecar.istio.io/proxyMemoryLimit"
)

// meshSideCandidates are the changes of a template's annotations that
// change one part of what the injector adds, in the order they are tried
// (the least change first): each is asked of admission, sidecar and all.
func meshSideCandidates(a map[string]string) []injection.MeshSide {
	cpu, mem := a[annProxyCPU], a[annProxyMem]
	if cpu == "" {
		cpu = "100m" // the injector's default request
	}
	if mem == "" {
		mem = "128Mi"
	}
	var out []injection.MeshSide
	if a[annMergeMetrics] != "false" {
		out = append(out, injection.MeshSide{Set: map[string]string{annMergeMetrics: "false"},
			What: "the prometheus.io/* scrape annotations the injector adds for metrics merging (left out with " + annMergeMetrics + "=false)"})
	}
	requestsOnly := map[string]string{annProxyCPU: cpu, annProxyMem: mem, annProxyCPULimit: "", annProxyMemLimit: ""}
	if a[annProxyCPU] == "" || a[annProxyMem] == "" || a[annProxyCPULimit] != "" || a[annProxyMemLimit] != "" {
		out = append(out, injection.MeshSide{Set: requestsOnly,
			What: "the sidecar's resource limits (with its requests set by annotation and no limit annotations, the injector gives istio-proxy and istio-init requests only)"})
	}
	if a[annProxyCPULimit] != cpu || a[annProxyMemLimit] != mem {
		out = append(out, injection.MeshSide{Set: map[string]string{annProxyCPU: cpu, annProxyMem: mem, annProxyCPULimit: cpu, annProxyMemLimit: mem},
			What: "the sidecar's resources (limits equal to requests: istio-proxy and istio-init get limits, and Guaranteed QoS)"})
	}
	flip := "false"
	what := "the native sidecar (a classic one instead: istio-proxy among the containers, not a restartable init container)"
	if a[istio.AnnotationNativeSidecar] == "false" {
		flip, what = "true", "the classic sidecar (a native one instead: istio-proxy as a restartable init container)"
	}
	out = append(out, injection.MeshSide{Set: map[string]string{istio.AnnotationNativeSidecar: flip}, What: what})
	if a[annMergeMetrics] != "false" {
		both := map[string]string{annMergeMetrics: "false"}
		for k, v := range requestsOnly {
			both[k] = v
		}
		out = append(out, injection.MeshSide{Set: both, What: "the prometheus.io/* scrape annotations and the sidecar's resource limits"})
	}
	return out
}

// proveMeshSide asks admission, for a template refused for what the
// injector adds (the same template without the sidecar was admitted),
// which change of its annotations it admits with the sidecar: a dry-run
// create of each candidate in turn, the first admitted one injected is
// kept in r.RefusedBy.MeshSide. None admitted (or none could be asked)
// leaves it nil.
func (e *Engine) proveMeshSide(ctx context.Context, r *injection.InjectionReport, tmpl *corev1.PodTemplateSpec) {
	for _, c := range meshSideCandidates(tmpl.Annotations) {
		t := tmpl.DeepCopy()
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		for k, v := range c.Set {
			if v == "" {
				delete(t.Annotations, k)
				continue
			}
			t.Annotations[k] = v
		}
		pr := e.dryRun(ctx, r.Namespace, strings.ToLower(r.Name), t)
		switch {
		case pr.err != nil || pr.notVerified != "":
			return // admission cannot be asked: nothing is said
		case pr.v == nil || pr.v.Refused || !pr.v.Injected:
			continue
		}
		c := c
		r.RefusedBy.MeshSide = &c
		return
	}
}
