package diagnose

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// specFixAnnotation sets an annotation on the pod's template.
func specFixAnnotation(p *corev1.Pod, key, value string) string {
	owner := templateOwner(p)
	if owner == "" {
		if cmd := recreateBarePod(p, "", "merge", fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, value)); cmd != "" {
			return cmd
		}
		return fmt.Sprintf("in the pod's manifest, set the annotation %s: %q, then re-create the pod", key, value)
	}
	if job, ok := strings.CutPrefix(owner, "job/"); ok {
		return injection.RecreateJob(job, p.Namespace, map[string]*string{key: &value}, nil)
	}
	return fmt.Sprintf(`kubectl patch %s -n %s --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}'`, owner, p.Namespace, key, value) + replacePod(p, owner)
}

// proxyResourceKeys are the annotations that size the sidecar.
var proxyResourceKeys = []string{istio.AnnotationProxyCPU, istio.AnnotationProxyCPULimit, istio.AnnotationProxyMemory, istio.AnnotationProxyMemoryLimit}

// proxyResourceAnnotations are those of annotations that size the sidecar.
func proxyResourceAnnotations(annotations map[string]string) []string {
	var out []string
	for _, k := range proxyResourceKeys {
		if _, ok := annotations[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

// quoteAnnotations is `k="v", …` for the keys.
func quoteAnnotations(annotations map[string]string, keys []string) string {
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, annotations[k]))
	}
	return strings.Join(parts, ", ")
}

// removeAnnotations is the patch that removes annotations from the pod's
// template (or what to change in its manifest).
func removeAnnotations(p *corev1.Pod, keys []string) string {
	owner := templateOwner(p)
	if owner == "" {
		gone := map[string]any{}
		for _, k := range keys {
			gone[k] = nil
		}
		if b, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": gone}}); err == nil {
			if cmd := recreateBarePod(p, keys[0], "merge", string(b)); cmd != "" {
				return cmd
			}
		}
		return "remove the annotations " + strings.Join(keys, ", ") + " from the pod's manifest, then re-create the pod"
	}
	return templatePatch(owner, p.Namespace, keys)
}

// templatePatch is the JSON patch of a workload that removes annotations
// from its template.
func templatePatch(owner, ns string, keys []string) string {
	if job, ok := strings.CutPrefix(owner, "job/"); ok {
		gone := map[string]*string{}
		for _, k := range keys {
			gone[k] = nil
		}
		return injection.RecreateJob(job, ns, gone, nil)
	}
	base := "/spec/template/metadata/annotations/"
	if strings.HasPrefix(owner, "cronjob/") {
		base = "/spec/jobTemplate/spec/template/metadata/annotations/"
	}
	var ops []string
	for _, k := range keys {
		ops = append(ops, `{"op":"remove","path":"`+base+jsonPointer(k)+`"}`)
	}
	return "kubectl patch " + owner + " -n " + ns + " --type=json -p '[" + strings.Join(ops, ",") + "]'"
}

// limitRequestOver: the apiserver's refusal of a request above the limit
// of its resource ("…requests: Invalid value: "128Mi": must be less than
// or equal to memory limit of 64Mi").
var limitRequestOver = regexp.MustCompile(`must be less than or equal to (cpu|memory) limit`)

// limitsForRequests are, for a refusal of requests above their limits, the
// sidecar's limit annotations set to its request annotations, for each
// resource refused whose request the template sets and whose limit it
// does not (nil when there is none).
func limitsForRequests(annotations map[string]string, text string) map[string]string {
	set := map[string]string{}
	for _, m := range limitRequestOver.FindAllStringSubmatch(text, -1) {
		req, lim := istio.AnnotationProxyCPU, istio.AnnotationProxyCPULimit
		if m[1] == "memory" {
			req, lim = istio.AnnotationProxyMemory, istio.AnnotationProxyMemoryLimit
		}
		if v := annotations[req]; v != "" && annotations[lim] == "" {
			set[lim] = v
		}
	}
	if len(set) == 0 {
		return nil
	}
	return set
}
