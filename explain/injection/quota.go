package injection

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// quotaRefusal is a ResourceQuota's refusal: the quota's name and its
// requested, used and limited lists ("requests.memory=96Mi,limits.cpu=1").
var quotaRefusal = regexp.MustCompile(`exceeded quota: ([a-z0-9][-a-z0-9.]*), requested: ([^ ]+), used: ([^ ]+), limited: ([^ ]+?)\.?(?:$|[ ;"])`)

// quotaSidecarKey maps a quota's resource to the sidecar annotation that
// sizes it and whether it is a limit.
var quotaSidecarKey = map[string]struct {
	key   string
	limit bool
	res   corev1.ResourceName
}{
	"cpu": {istio.AnnotationProxyCPU, false, corev1.ResourceCPU}, "requests.cpu": {istio.AnnotationProxyCPU, false, corev1.ResourceCPU},
	"memory": {istio.AnnotationProxyMemory, false, corev1.ResourceMemory}, "requests.memory": {istio.AnnotationProxyMemory, false, corev1.ResourceMemory},
	"limits.cpu": {istio.AnnotationProxyCPULimit, true, corev1.ResourceCPU}, "limits.memory": {istio.AnnotationProxyMemoryLimit, true, corev1.ResourceMemory},
}

// istioDefaultRequest is the sidecar's request when no annotation sets it:
// Istio's own values.
var istioDefaultRequest = map[string]string{istio.AnnotationProxyCPU: "100m", istio.AnnotationProxyMemory: "128Mi"}

// sidecarFloor is the least a sidecar is sized to: below it, the quota is
// what to raise.
var sidecarFloor = map[corev1.ResourceName]resource.Quantity{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")}

// quotaSizing works out, from a quota's refusal, what the sidecar may ask
// for: the quota's room (limited − used) less what the pod's own
// containers ask for. It returns the sidecar annotations that fit, or, when
// a resource leaves less than sidecarFloor, the quota's new hard values
// (used + requested: room for this pod). ok is false when the message has
// no figures or names a resource the sidecar's annotations do not size.
func quotaSizing(spec *corev1.PodSpec, annotations map[string]string, msg string) (quota string, set map[string]string, raise map[string]string, ok bool) {
	m := quotaRefusal.FindStringSubmatch(msg)
	if m == nil {
		return "", nil, nil, false
	}
	requested, used, limited := quotaList(m[2]), quotaList(m[3]), quotaList(m[4])
	set, raise = map[string]string{}, map[string]string{}
	keys := make([]string, 0, len(requested))
	for k := range requested {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sk, known := quotaSidecarKey[k]
		req := requested[k]
		lim, hasLimited := limited[k]
		if !hasLimited {
			return "", nil, nil, false
		}
		use := used[k]
		if !known {
			// Not a resource the sidecar's annotations size (pods, a
			// count): only raising the quota lets the pod in.
			need := use.DeepCopy()
			need.Add(req)
			raise[k] = need.String()
			continue
		}
		room := lim.DeepCopy()
		room.Sub(use)
		room.Sub(podOwn(spec, sk.res, sk.limit))
		need := use.DeepCopy()
		need.Add(req)
		raise[k] = need.String()
		if room.Cmp(sidecarFloor[sk.res]) < 0 {
			continue
		}
		set[sk.key] = roundDown(room, sk.res)
	}
	if len(set) < len(raise) {
		return m[1], nil, raise, true // some resource leaves no room for a sidecar
	}
	// A request above its new limit, or a limit below its request, is refused.
	for _, pair := range [][2]string{{istio.AnnotationProxyCPU, istio.AnnotationProxyCPULimit}, {istio.AnnotationProxyMemory, istio.AnnotationProxyMemoryLimit}} {
		lim, limSet := set[pair[1]]
		if !limSet {
			continue
		}
		req := set[pair[0]]
		if req == "" {
			req = annotations[pair[0]]
		}
		if req == "" {
			req = istioDefaultRequest[pair[0]] // no annotation: Istio's default request
		}
		if q, err := resource.ParseQuantity(req); err != nil || q.Cmp(resource.MustParse(lim)) > 0 {
			set[pair[0]] = lim
		}
	}
	return m[1], set, raise, true
}

// quotaList reads "requests.memory=96Mi,limits.cpu=1".
func quotaList(s string) map[string]resource.Quantity {
	out := map[string]resource.Quantity{}
	for _, kv := range strings.Split(strings.TrimSuffix(s, ","), ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if q, err := resource.ParseQuantity(v); err == nil {
			out[k] = q
		}
	}
	return out
}

// podOwn is what the pod's own containers count for against a quota: the
// sum of its containers' (and its restartable init containers'), or its
// largest init container's when larger.
func podOwn(spec *corev1.PodSpec, res corev1.ResourceName, limit bool) resource.Quantity {
	of := func(c corev1.Container) (resource.Quantity, bool) {
		if limit {
			q, ok := c.Resources.Limits[res]
			return q, ok
		}
		if q, ok := c.Resources.Requests[res]; ok {
			return q, true
		}
		q, ok := c.Resources.Limits[res] // a limit alone is the request too
		return q, ok
	}
	var sum, initMax resource.Quantity
	for _, c := range spec.Containers {
		if q, ok := of(c); ok {
			sum.Add(q)
		}
	}
	for _, c := range spec.InitContainers {
		q, ok := of(c)
		switch {
		case !ok:
		case c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways:
			sum.Add(q)
		case q.Cmp(initMax) > 0:
			initMax = q
		}
	}
	if initMax.Cmp(sum) > 0 {
		return initMax
	}
	return sum
}

// roundDown writes q as whole millicores or whole MiB, rounded down.
func roundDown(q resource.Quantity, res corev1.ResourceName) string {
	if res == corev1.ResourceCPU {
		return fmt.Sprintf("%dm", q.MilliValue())
	}
	return fmt.Sprintf("%dMi", q.Value()/(1<<20))
}

// quotaFix is the fix for pods a quota refuses with their sidecar: the
// sidecar sized within the quota's room when there is room for one, else
// the quota raised by what one pod asks for; each names the other way.
func quotaFix(w *Workload, msg string) string {
	kind, name := templateOwnerOf(w)
	quota, set, raise, ok := quotaSizing(&w.Spec, w.Annotations, msg)
	for i := 0; !ok && i < len(w.Events); i++ {
		// The whole message: the verdict's copy may be cut short.
		quota, set, raise, ok = quotaSizing(&w.Spec, w.Annotations, w.Events[i].Message)
	}
	if !ok {
		return mustSpecifyFix(w, kind, name, msg)
	}
	hard, err := json.Marshal(map[string]any{"spec": map[string]any{"hard": raise}})
	if err != nil {
		return ""
	}
	raiseCmd := fmt.Sprintf("kubectl patch resourcequota %s -n %s --type=merge -p '%s'", quota, w.Namespace, hard)
	if set == nil {
		if _, pods := raise["pods"]; pods && len(raise) == 1 {
			return raiseCmd + "   # room for one more pod: quota " + quota + " counts pods of a scope the pod is in with its sidecar (the sidecar's requests make a pod whose own containers ask for none Burstable, not BestEffort); or opt the pod out of the mesh"
		}
		return raiseCmd + "   # room for one more pod with its sidecar: what quota " + quota + " has left is less than a sidecar needs (add what one pod asks for, per further pod)"
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var said []string
	for _, k := range keys {
		said = append(said, strings.TrimPrefix(k, "sidecar.istio.io/")+"="+set[k])
	}
	comment := "the sidecar sized to what quota " + quota + " leaves after the pod's own containers (" + strings.Join(said, ", ") + "); or raise the quota: " + raiseCmd
	if kind == "Pod" {
		return "set the annotations " + strings.Join(said, ", ") + " (sidecar.istio.io/…) in the pod's manifest, then re-create it   # " + comment
	}
	change := map[string]*string{}
	for k, v := range set {
		change[k] = &v
	}
	return SetTemplateAnnotations(kind, name, w.Namespace, change) + comment
}

// RefusalFix is the fix for an admission refusal (msg) of w's pods with
// their sidecar: the quota's arithmetic, PodSecurity's two ways out; "" for
// a refusal of another kind.
func RefusalFix(w *Workload, msg string) string {
	switch RefusalOf(msg) {
	case BlockedQuota:
		return quotaFix(w, msg)
	case BlockedPodSecurity:
		return podSecurityFix(w, msg)
	}
	return ""
}

// QuotaFitsWithout says whether a quota refusal (msg) would admit the pod
// once the old pod (spec: what counts against the quota now) is deleted:
// every resource the refusal names fits in its limit with the old pod's
// usage taken off. ok is false when msg is not a quota refusal.
func QuotaFitsWithout(old *corev1.PodSpec, msg string) (fits, ok bool) {
	m := quotaRefusal.FindStringSubmatch(msg)
	if m == nil || old == nil {
		return false, false
	}
	requested, used, limited := quotaList(m[2]), quotaList(m[3]), quotaList(m[4])
	for name, req := range requested {
		lim, known := limited[name]
		if !known {
			return false, false
		}
		after := used[name].DeepCopy()
		after.Sub(quotaUsage(old, name))
		after.Add(req)
		if after.Cmp(lim) > 0 {
			return false, true
		}
	}
	return true, true
}

// quotaUsage is what a pod counts for against a quota's resource name
// ("pods", "requests.cpu", "limits.memory", "cpu", …).
func quotaUsage(spec *corev1.PodSpec, name string) resource.Quantity {
	switch name {
	case "pods", "count/pods":
		return resource.MustParse("1")
	}
	limit := strings.HasPrefix(name, "limits.")
	res := corev1.ResourceName(strings.TrimPrefix(strings.TrimPrefix(name, "limits."), "requests."))
	return podOwn(spec, res, limit)
}

var mustSpecify = regexp.MustCompile(`must specify ([a-z.,]+) for: ([-a-z0-9,]+)`)

// sidecarDefaults are the annotation that sets each of the sidecar's
// resources and the mesh's default value of it.
var sidecarDefaults = map[string][2]string{
	"requests.cpu": {istio.AnnotationProxyCPU, "100m"}, "requests.memory": {istio.AnnotationProxyMemory, "128Mi"},
	"limits.cpu": {istio.AnnotationProxyCPULimit, "2000m"}, "limits.memory": {istio.AnnotationProxyMemoryLimit, "1024Mi"},
}

// mustSpecifyFix: a quota refuses Istio's containers for a resource they
// do not set (with only some of the sidecar's resource annotations given,
// the injector sets only those): the missing ones from the mesh's
// defaults.
func mustSpecifyFix(w *Workload, kind, name, msg string) string {
	m := mustSpecify.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	for _, c := range strings.Split(m[2], ",") {
		if !istio.IsIstioContainer(c) {
			return "" // the pod's own containers lack it too
		}
	}
	change := map[string]*string{}
	var said []string
	for _, res := range strings.Split(m[1], ",") {
		d, ok := sidecarDefaults[res]
		if _, set := w.Annotations[d[0]]; !ok || set {
			continue
		}
		v := d[1]
		change[d[0]] = &v
		said = append(said, d[0]+"="+v)
	}
	if len(change) == 0 {
		return ""
	}
	comment := "Istio's containers set no " + m[1] + ": with only some of the sidecar's resource annotations given, the injector sets only those; " + strings.Join(said, ", ") + " is the mesh's default (or what the quota leaves)"
	if kind == "Pod" {
		return "set the annotations " + strings.Join(said, ", ") + " in the pod's manifest, then re-create it   # " + comment
	}
	return SetTemplateAnnotations(kind, name, w.Namespace, change) + comment
}
