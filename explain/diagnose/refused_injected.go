package diagnose

// Refusals of a workload's pods that are about what the injector added,
// put down to it with the change that makes them admitted: a LimitRange's
// maximum per pod that the sidecar's limits tip over; istio-proxy's
// restartPolicy removed after injection by another mutator.

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

var limitRangePodMax = regexp.MustCompile(`maximum (cpu|memory) usage per Pod is ([^,\] ]+), but limit is ([^,\] ]+)`)

// podMaxRefusal: a LimitRange's maximum per pod that the template's own
// containers fit in, and the sidecar's limits (Istio's default 1Gi memory
// and 2 CPU, or its annotations) tip over; the fix sizes the sidecar to
// the room left.
func podMaxRefusal(w *WorkloadState, text string) (ev, mesh, fix string, ok bool) {
	t := w.Template
	if t == nil {
		return "", "", "", false
	}
	set := map[string]string{}
	var said []string
	for _, m := range limitRangePodMax.FindAllStringSubmatch(text, -1) {
		res := corev1.ResourceName(m[1])
		maxQ, err := resource.ParseQuantity(m[2])
		if err != nil {
			return "", "", "", false
		}
		var app resource.Quantity
		for _, c := range append(append([]corev1.Container(nil), t.Spec.Containers...), restartable(t.Spec.InitContainers)...) {
			if q, has := c.Resources.Limits[res]; has {
				app.Add(q)
			}
		}
		room := maxQ.DeepCopy()
		room.Sub(app)
		reqKey, limKey := istio.AnnotationProxyCPU, istio.AnnotationProxyCPULimit
		lim := fmt.Sprintf("%dm", room.MilliValue())
		if res == corev1.ResourceMemory {
			reqKey, limKey = istio.AnnotationProxyMemory, istio.AnnotationProxyMemoryLimit
			lim = fmt.Sprintf("%dMi", room.Value()/(1<<20))
		}
		limQ := resource.MustParse(lim)
		if limQ.Sign() <= 0 {
			return "", "", "", false // the app alone fills it
		}
		set[limKey] = lim
		req := sidecarDefaults[string(res)][0]
		if v, has := t.Annotations[reqKey]; has {
			req = v
		}
		if q, err := resource.ParseQuantity(req); err != nil || q.Cmp(limQ) > 0 {
			set[reqKey] = lim // a request no larger than its limit
		}
		said = append(said, fmt.Sprintf("%s: the pod's limit %s against a maximum of %s, of which the template's own containers take %s", res, m[3], m[2], app.String()))
	}
	if len(set) == 0 {
		return "", "", "", false
	}
	mesh = "the sidecar's limits (Istio's defaults, or its annotations), added to the pod's"
	ev = "no container of the template goes over the namespace's LimitRange maximum per pod; with the injected sidecar's limits the pod does (" + strings.Join(said, "; ") + ")"
	return ev, mesh, templateAnnotationsFix(w, set, "the sidecar sized to the room the LimitRange leaves"), true
}

// restartable are the native sidecars among init containers.
func restartable(cs []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range cs {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			out = append(out, c)
		}
	}
	return out
}

// strippedNative: the apiserver refuses istio-proxy's native-sidecar
// fields on an init container without restartPolicy Always: a mutator
// called after the injector dropped the field (one built against an older
// Kubernetes API). The fix that holds whatever the mutator does: a
// classic sidecar; or the mutator exempted.
func (in *Input) strippedNative(w *WorkloadState, text string) (ev, mesh, fix string, ok bool) {
	if !strings.Contains(text, "without restartPolicy=Always") {
		return "", "", "", false
	}
	ms := in.otherMutators()
	by := "a mutating webhook or policy called after Istio's injector"
	if len(ms) > 0 {
		by = mutatorsNamed(ms)
	}
	ev = "Istio's injector adds istio-proxy as a native sidecar (an init container with restartPolicy Always, its probes and lifecycle with it); the pod reached the apiserver without that restartPolicy: " + by + " removed it"
	mesh = "istio-proxy's restartPolicy, removed after injection by " + by
	owner := strings.ToLower(w.Kind) + "/" + w.Name
	path := `{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/nativeSidecar":"false"}}}}}`
	if cron, isCron := strings.CutPrefix(w.Controller, "CronJob/"); isCron && w.Kind == "Job" {
		owner, path = "cronjob/"+cron, `{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/nativeSidecar":"false"}}}}}}}`
	}
	if w.Kind == "Job" && !strings.HasPrefix(owner, "cronjob/") {
		no := "false"
		fix = templateAnnotationsFix(w, map[string]string{"sidecar.istio.io/nativeSidecar": no}, "a classic sidecar, which the mutator leaves as it is")
	} else {
		fix = fmt.Sprintf("kubectl patch %s -n %s --type=merge -p '%s'   # a classic sidecar, which the mutator leaves as it is", owner, w.Namespace, path)
	}
	if len(ms) == 1 && ms[0].Exempt != "" {
		fix += "\n# or, keeping native sidecars: " + ms[0].Exempt + "   # exempts namespace " + w.Namespace + " from " + ms[0].By + " (or upgrade it to keep restartPolicy)"
	}
	return ev, mesh, fix, true
}
