package diagnose

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// podBudgetRefusal is the apiserver's refusal of a pod whose pod-level
// spec.resources (Kubernetes' pod-level resources) is below what its
// containers ask for in all: the resource, the pod's value, the aggregate.
var podBudgetRefusal = regexp.MustCompile(`spec\.resources\.requests\[(cpu|memory)\]: Invalid value: "([^"]+)": must be greater than or equal to aggregate container requests of ([^\s;,]+)`)

// podBudget: the template has a pod-level budget (spec.resources) that its
// own containers fit in, and the controller's message says the pod's
// containers ask for more: the injected sidecar is what tips it over. The
// fix raises the pod-level requests to the aggregate the apiserver named
// (and a pod-level limit below it to the same), not the sidecar's
// annotations: without them the sidecar asks for the mesh's defaults,
// larger still.
func podBudget(w *WorkloadState, text string) (ev, mesh, fix string, ok bool) {
	t := w.Template
	if t == nil || t.Spec.Resources == nil {
		return "", "", "", false
	}
	requests, limits := map[string]string{}, map[string]string{}
	var evs []string
	for _, m := range podBudgetRefusal.FindAllStringSubmatch(text, -1) {
		res, aggregate := m[1], m[3]
		if _, seen := requests[res]; seen {
			continue
		}
		want, err := resource.ParseQuantity(aggregate)
		if err != nil {
			return "", "", "", false
		}
		own := ownRequests(t, corev1.ResourceName(res))
		if budget, set := t.Spec.Resources.Requests[corev1.ResourceName(res)]; !set || own.Cmp(budget) > 0 {
			return "", "", "", false // the template's own containers are over it: not the sidecar's doing
		}
		requests[res] = aggregate
		if lim, set := t.Spec.Resources.Limits[corev1.ResourceName(res)]; set && lim.Cmp(want) < 0 {
			limits[res] = aggregate
		}
		evs = append(evs, fmt.Sprintf("%s: the pod-level request is %s, its own containers ask for %s, with the injected istio-proxy %s", res, m[2], own.String(), aggregate))
	}
	if len(requests) == 0 {
		return "", "", "", false
	}
	sort.Strings(evs)
	ev = "the template's pod-level spec.resources fits its own containers, not the sidecar added to them: " + strings.Join(evs, "; ")
	mesh = "the injected istio-proxy's requests, added to a pod-level budget that leaves no room for them"
	budget := map[string]any{"requests": requests}
	if len(limits) > 0 {
		budget["limits"] = limits
	}
	b, err := json.Marshal(map[string]any{"resources": budget})
	if err != nil {
		return "", "", "", false
	}
	comment := "   # the pod-level budget then covers the sidecar too (or lower the sidecar's requests with sidecar.istio.io/proxyCPU / proxyMemory, keeping them set: without them it asks for the mesh's defaults)"
	switch {
	case w.Kind == "Job" && !strings.HasPrefix(w.Controller, "CronJob/"):
		fix = fmt.Sprintf("kubectl get job %s -n %s -o json | kubectl patch --local -f - --type=merge -p '%s' -o json | kubectl replace --force -f -   # a Job's pod template cannot be patched: this creates it again with the larger budget",
			w.Name, w.Namespace, jobBudgetPatch(b))
	case w.Kind == "Job":
		cron := strings.TrimPrefix(w.Controller, "CronJob/")
		fix = fmt.Sprintf(`kubectl patch cronjob/%s -n %s --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"spec":%s}}}}}'`, cron, w.Namespace, b) + comment + "; its next Jobs get it"
	case w.Kind == "CronJob":
		fix = fmt.Sprintf(`kubectl patch cronjob/%s -n %s --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"spec":%s}}}}}'`, w.Name, w.Namespace, b) + comment
	default:
		fix = fmt.Sprintf(`kubectl patch %s/%s -n %s --type=merge -p '{"spec":{"template":{"spec":%s}}}'`, strings.ToLower(w.Kind), w.Name, w.Namespace, b) + comment
	}
	return ev, mesh, fix, true
}

// jobBudgetPatch is the merge patch that re-creates a Job with a new
// pod-level budget: its generated selector and uid labels dropped.
func jobBudgetPatch(spec []byte) string {
	return `{"metadata":{"uid":null,"resourceVersion":null,"creationTimestamp":null,"managedFields":null,"labels":{"controller-uid":null,"batch.kubernetes.io/controller-uid":null}},"status":null,` +
		`"spec":{"selector":null,"manualSelector":null,"template":{"metadata":{"labels":{"controller-uid":null,"batch.kubernetes.io/controller-uid":null}},"spec":` + string(spec) + `}}}`
}

// ownRequests is what the template's own containers request of res in
// all, summed as the scheduler and the pod-level budget's validation do
// (containerRequest), without the pod's overhead or its pod-level request.
func ownRequests(t *corev1.PodTemplateSpec, res corev1.ResourceName) resource.Quantity {
	return containerRequest(&t.Spec, res)
}
