package diagnose

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeWorkloadShort: a workload that wants pods and lacks some;
// CodeJobFailed: a Job that gave up.
const (
	CodeWorkloadShort = "KM-INJ-013"
	CodeJobFailed     = "KM-START-015"
)

// WorkloadState is what a workload's controller reports: how many pods it
// wants, how many of its pods exist, and its own account of why not.
type WorkloadState struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Desired is how many pods it wants now (0 for one finished, paused
	// or suspended); Pods how many of its pods exist.
	Desired int32 `json:"desired"`
	Pods    int32 `json:"pods"`
	// Conditions are its conditions that say something is wrong, "Type
	// (Reason): message"; Failed a Job's Failed condition.
	Conditions []string `json:"conditions,omitempty"`
	Failed     string   `json:"failed,omitempty"`
	// Events are the warning events about it and its ReplicaSets, "Reason
	// (N×): message", newest first.
	Events []string `json:"events,omitempty"`
	// EventsUnknown says why its events could not be read.
	EventsUnknown string `json:"eventsUnknown,omitempty"`
	// PodFailures are how its failed pods failed (a Job's: pod, container,
	// exit, the log's last line), as their own rows say, at most two;
	// PodCause is the first of their findings that names a cause
	// (PodCause), nil when none does.
	PodFailures []string `json:"podFailures,omitempty"`
	PodCause    *Finding `json:"-"`
	// Since is when it last changed (created, a condition moved).
	Since time.Time `json:"since"`
	Now   time.Time `json:"-"`
	// Template is its pod template (what fixes patch), when read.
	Template *corev1.PodTemplateSpec `json:"-"`
	// ClaimTemplates are a StatefulSet's volumeClaimTemplates' names, in
	// order: its pods get a volume of each name; UpdateRevision is the
	// revision of its current template (its pods' controller-revision-hash
	// label once they are updated).
	ClaimTemplates []string `json:"-"`
	UpdateRevision string   `json:"-"`
	// Labels are its own metadata.labels (not its template's), when read;
	// Controller is its own controller ("CronJob/nightly"), "" for none.
	Labels     map[string]string `json:"-"`
	Controller string            `json:"-"`
	// ManagedBy is a Job's spec.managedBy when it names a controller other
	// than the built-in one (which then leaves the Job alone).
	ManagedBy string `json:"managedBy,omitempty"`
	// Rollout says a Deployment's rollout is stuck: its newest ReplicaSet
	// (NewReplicaSet) lacks pods its controller cannot create while the
	// old ones serve ("" when it is not); Progressing is its Progressing
	// condition then.
	Rollout       string `json:"rollout,omitempty"`
	NewReplicaSet string `json:"newReplicaSet,omitempty"`
	Progressing   string `json:"progressing,omitempty"`
	// Paused: a Deployment paused by kubectl rollout pause; it creates no
	// new pods and kubectl refuses to restart it.
	Paused bool `json:"paused,omitempty"`
	// DeletesFirst: its rollout deletes an old pod before it creates its
	// replacement (a Deployment's Recreate strategy, a StatefulSet, a
	// DaemonSet with no surge).
	DeletesFirst bool `json:"-"`
	// SurgesOnly: its rollout adds a pod before it removes an old one and
	// may never remove first (a Deployment's or DaemonSet's rolling update
	// with a surge and maxUnavailable 0): a new pod that cannot be placed
	// beside the old one (a host port, anti-affinity, a full node) stops it.
	SurgesOnly bool `json:"-"`
}

// Short says the workload lacks pods it wants, its Job failed, or its
// rollout is stuck.
func (w *WorkloadState) Short() bool {
	return w != nil && (w.Pods < w.Desired || w.Failed != "" || w.Rollout != "")
}

func init() {
	register(&Spec{Code: CodeWorkloadShort, Title: "workload short of its pods", Stage: CheckInjection, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactOwner},
		Means:   "A Deployment, StatefulSet, DaemonSet or Job wants pods that do not exist: its controller cannot create them (admission refuses them: a quota, a policy, a missing ServiceAccount, a webhook), or a Job gave up; or a Deployment's rollout is stuck: its newest ReplicaSet's pods are refused while the old ones serve. There is no pod to diagnose: the controller's own conditions and events say why.",
		Detects: "The workloads' desired pods against the pods that exist; a Deployment's updated replicas against its desired ones when it reports a failure (the newest ReplicaSet named by its Progressing condition, whose events it quotes); their conditions (ReplicaFailure, ProgressDeadlineExceeded, a Job's Failed) and warning events (FailedCreate, any message).",
		Fixes:   "What the controller's message calls for (a ServiceAccount to create, a quota to raise); when the mesh is named (a webhook, istio-init, the sidecar), the mesh's fix; a LimitRange's maximum or limit-to-request ratio that only the injected sidecar breaks, the sidecar's resource annotations on the template (a CronJob's jobTemplate; a Job re-created).",
		Source:  "kubectl's own READY column and kubectl describe; istio/istio issues on Deployments with no pods after injection was turned on",
		Planted: "a Deployment whose ServiceAccount does not exist",
		run:     func(in *Input) []Finding { return onlyWorkload(in, false) }})
	register(&Spec{Code: CodeJobFailed, Title: "Job failed", Stage: CheckStart, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactOwner},
		Means:   "A Job gave up (its backoff limit or deadline exceeded): its pods ran and failed, for the reason their own rows give (their exit codes and logs); a pod whose failure a mesh check explains (a classic sidecar, no network at start) says so there.",
		Detects: "The Job's Failed condition, its reason and message; for a CronJob named, its last Job's (its Jobs' pods are diagnosed in their own rows).",
		Fixes:   "The failed pods' log says why; fix that, then re-create the Job.",
		Source:  "kubectl's own statuses (Job Failed, BackoffLimitExceeded); istio/istio issues on Jobs in meshed namespaces",
		Planted: "a Job whose container exits 2, backoffLimit 1",
		run:     func(in *Input) []Finding { return onlyWorkload(in, true) }})
}

// onlyWorkload is the workload's finding of one kind: a Job that failed,
// or a workload short of its pods.
func onlyWorkload(in *Input, jobFailed bool) []Finding {
	w := in.Workload
	if w == nil && !jobFailed {
		// A template read without its workload's state (why-injected):
		// the injection check puts a refusal of its pods down as this.
		return only(in.injection().findings, CodeWorkloadShort)
	}
	if w == nil || (w.Failed != "") != jobFailed {
		return nil
	}
	return workloadShort(in)
}

var missingSA = regexp.MustCompile(`serviceaccount "([^"]+)" not found`)

// meshWords are what a controller's message says when the mesh refused
// the pods.
var meshWords = []string{"istio", "sidecar.istio.io", "istio-proxy", "istio-init", "istio-validation"}

func workloadShort(in *Input) []Finding {
	w := in.Workload
	if !w.Short() {
		return nil
	}
	target := strings.ToLower(w.Kind) + "/" + w.Name + " -n " + w.Namespace
	ev := fmt.Sprintf("%s/%s wants %s and has %d", strings.ToLower(w.Kind), w.Name, pods(w.Desired), w.Pods)
	if w.Failed != "" {
		ev = fmt.Sprintf("job/%s failed: %s", w.Name, w.Failed)
		if len(w.PodFailures) > 0 {
			ev += "; its pods: " + strings.Join(w.PodFailures, "; ")
		}
	}
	if w.Rollout != "" && w.Pods >= w.Desired {
		// Its old pods serve: the rollout is what is short.
		ev = fmt.Sprintf("%s/%s's rollout is stuck: %s; its old pods are diagnosed in their own rows", strings.ToLower(w.Kind), w.Name, w.Rollout)
	}
	// The controller's conditions, then its events that do not repeat them.
	said := append([]string(nil), w.Conditions...)
	if w.Rollout != "" && w.Progressing != "" {
		said = append(said, w.Progressing)
	}
	for _, e := range w.Events {
		repeated := false
		for _, c := range w.Conditions {
			if _, msg, ok := strings.Cut(c, "): "); ok && strings.Contains(e, msg) {
				repeated = true
			}
		}
		if !repeated {
			said = append(said, e)
		}
	}
	keep := 3
	if w.Rollout != "" {
		keep = 4 // its Progressing condition too
	}
	if len(said) > keep {
		said = said[:keep]
	}
	for _, s := range said {
		ev += "; " + injection.ShortInvalid(s)
	}
	f := Finding{Status: Fail, Evidence: ev, Fix: "kubectl describe " + target + "   # its conditions and events say why its pods are missing"}
	text := strings.Join(said, " ")
	if m := missingSA.FindStringSubmatch(text); m != nil {
		f.Fix = "kubectl create serviceaccount " + m[1] + " -n " + w.Namespace + "   # or correct serviceAccountName in its template"
		switch w.Kind {
		case "Deployment", "StatefulSet", "DaemonSet":
			f.Fix += "\nkubectl rollout restart " + strings.ToLower(w.Kind) + "/" + w.Name + " -n " + w.Namespace + "   # its controller tries again at once (its own retries back off for minutes)"
		}
	}
	for _, word := range meshWords {
		if strings.Contains(strings.ToLower(text), word) {
			f.Mesh = "the controller's message names the mesh (" + word + ")"
			break
		}
	}
	if r := in.Injection; r != nil && r.CreationBlocked && r.Fix != "" && strings.HasPrefix(f.Fix, "kubectl describe") {
		f.Fix = r.Fix // the injection check names what refuses the pods, and its fix
	}
	if r := in.Injection; r != nil && r.RefusedBy != nil && len(said) > 0 {
		ev, mesh, fix := refusalAnswer(w, r, text)
		f.Evidence += ev
		if mesh != "" {
			f.Mesh = mesh
		}
		if fix != "" {
			f.Fix = fix
		}
	}
	if w.Failed != "" {
		f.Fix = "kubectl logs job/" + w.Name + " -n " + w.Namespace + "   # why its pods failed (their rows say how each ended); fix that, then re-create the Job"
		if cron, ok := strings.CutPrefix(w.Controller, "CronJob/"); ok {
			f.Evidence = "cronjob/" + cron + "'s Job: " + f.Evidence
			f.Fix = "kubectl logs job/" + w.Name + " -n " + w.Namespace + "   # why its pods failed (their rows say how each ended); fix that in cronjob/" + cron +
				": its next run makes a new Job (or run one now: kubectl create job --from=cronjob/" + cron + " " + cron + "-retry -n " + w.Namespace + ")"
		}
		if c := w.PodCause; c != nil {
			// Its pod's row names the cause: the Job's answer is the same.
			f.Evidence += "; the likely cause (" + c.Code + "), " + c.Evidence
			f.Fix, f.Mesh = c.Fix, c.Mesh
			if f.Mesh == "" {
				f.Mesh = "its pod's finding " + c.Code
			}
		}
	}
	if ev, mesh, fix, ok := in.strippedNative(w, text); ok {
		f.Mesh, f.Evidence, f.Fix = mesh, f.Evidence+"; "+ev, fix
	} else if ev, mesh, fix, ok := RefusalCause(w, text); ok {
		f.Mesh, f.Evidence, f.Fix = mesh, f.Evidence+"; "+ev, fix
	}
	switch {
	case len(said) > 0 || w.Failed != "":
	case w.ManagedBy != "":
		f.Status, f.Evidence, f.Fix = managedElsewhere(w, f.Evidence)
	case w.EventsUnknown != "":
		f.Status = Unknown
		f.Evidence += "; its events could not be read: " + w.EventsUnknown
		f.Needs = []string{"list events (namespace " + w.Namespace + ")"}
	case w.Now.Sub(w.Since) < StartGrace:
		f.Status, f.Evidence = Warning, f.Evidence+"; its controller is creating them"
	default:
		f.Evidence += "; neither its conditions nor its events say why"
	}
	return []Finding{f}
}

// refusalAnswer is what a refusal of a workload's pods, named by what
// acted on them (text, the controller's words), adds to its finding: the
// evidence (from "; refused by …"), what of the mesh it refuses when the
// dry runs proved that, and the fix ("" keeps the finding's).
func refusalAnswer(w *WorkloadState, r *injection.InjectionReport, text string) (ev, mesh, fix string) {
	if ev, mesh, fix, ok := injectedTwice(w, r, text); ok {
		return ev, mesh, fix
	}
	rb := r.RefusedBy
	ev, fix = "; refused by "+rb.By, rb.Fix
	if rb.Condition {
		// The webhook's own condition failed, before it looked at the pod.
		return ev + ", which the apiserver cannot evaluate on this pod, and the webhook's failurePolicy Fail refuses it", "the matchCondition of " + rb.By, fix
	}
	if ms := rb.MeshSide; ms != nil && rb.WithoutSidecar != "admitted" {
		// Its own Istio settings are what the policy refuses: the dry runs
		// admitted the template without them, sidecar and all.
		return ev + "; " + ProvedMeshSide(ms), ms.What, meshSideThen(w, r, ms)
	}
	if rb.WithoutSidecar != "admitted" {
		return ev, "", fix
	}
	// Proved: the pod's own part is admitted, what the injector adds is
	// what the policy refuses.
	mesh = "what Istio's injector adds to the pod (its containers, volumes or their settings)"
	ev += "; the same template without the sidecar is admitted (a dry-run create labelled sidecar.istio.io/inject=false): it is " + mesh + " that " + rb.By + " refuses"
	if rb.Fix != "" {
		then := classicRunAfter(w, r)
		if then == "" && w.Kind == "Job" {
			// Admitted now, its pods still wait out the Job controller's
			// back-off: made again, it runs at once.
			then = "\nsleep 3; " + injection.RecreateJob(w.Name, w.Namespace, nil, nil) + ", which runs it now rather than after the Job controller's back-off"
		}
		fix = rb.Fix + then + "\n" + meshSideOfRefusal(w, text)
	} else if rb.MeshSide == nil && w.Template != nil {
		// The apiserver's own validation: nothing to exempt, and no
		// setting proved to make it valid. Out of the mesh, it is created.
		fix = templateMetaFix(w, nil, map[string]string{InjectLabel: "false"}, "a choice: its pods are then created without the sidecar, out of the mesh; to keep them in it, change what in the template makes the injected containers invalid (the fields the refusal names)")
	}
	if ms := rb.MeshSide; ms != nil {
		mesh, ev = ms.What, ev+"; "+ProvedMeshSide(ms)
		fix = meshSideThen(w, r, ms)
	}
	return ev, mesh, fix
}

// meshSideThen is the proved mesh-side fix, with the native sidecar a
// run-to-completion workload needs next (unless the change is the sidecar's
// kind itself).
func meshSideThen(w *WorkloadState, r *injection.InjectionReport, ms *injection.MeshSide) string {
	fix := MeshSideFix(w, ms, r.RefusedBy.Fix)
	if _, kind := ms.Set[istio.AnnotationNativeSidecar]; kind {
		return fix
	}
	then := classicRunAfter(w, r)
	if then == "" {
		return fix
	}
	first, rest, _ := strings.Cut(fix, "\n# or,")
	if rest != "" {
		rest = "\n# or," + rest
	}
	return first + then + rest
}

// classicRunAfter is the line a fix that admits a run-to-completion
// workload's pods (a Job, a CronJob's) needs next when they would get a
// classic sidecar: its istio-proxy keeps running after the pod's own
// containers end, and the Job never completes (KM-START-007); a native
// sidecar ends with them. "" for any other workload or sidecar.
func classicRunAfter(w *WorkloadState, r *injection.InjectionReport) string {
	if r.Sidecar != "classic" || w.Kind != "Job" && w.Kind != "CronJob" || w.Template != nil && w.Template.Annotations[istio.AnnotationNativeSidecar] == "false" {
		return ""
	}
	return "\n" + templateAnnotationsFix(w, map[string]string{istio.AnnotationNativeSidecar: "true"},
		"its pods get a native sidecar: admitted as they are, they would get a classic one, which keeps running after the Job's own containers end, and the Job would never complete")
}

// RefusalCause puts an admission refusal of a workload's pods (text, the
// controller's words) down to what of the sidecar the cluster refuses, when
// the words say which: the status port, a pod-level budget, a LimitRange's
// ratio or maximum, the sidecar's resource annotations. ok is false when
// none of them explains it.
func RefusalCause(w *WorkloadState, text string) (ev, mesh, fix string, ok bool) {
	owner := strings.ToLower(w.Kind) + "/" + w.Name
	if ev, mesh, fix, ok := statusPortRefusal(w, text); ok {
		return ev, mesh, fix, true
	}
	if ev, mesh, fix, ok := templatesClash(w, text); ok {
		return ev, mesh, fix, true
	}
	if ev, mesh, fix, ok := annotationBudget(w, text); ok {
		return ev, mesh, fix, true
	}
	if ev, mesh, fix, ok := podBudget(w, text); ok {
		// A pod-level budget its own containers fit in: the sidecar tips it.
		return ev, mesh, fix, true
	}
	if ev, mesh, fix, ok := podMaxRefusal(w, text); ok {
		return ev, mesh, fix, true
	}
	t := w.Template
	if t == nil || !resourceRefusal.MatchString(text) {
		return "", "", "", false
	}
	if ev, mesh, set, ok := sidecarRatio(t, text); ok {
		// The LimitRange's limit-to-request ratio: no app container
		// breaks it, the injected sidecar does.
		return ev, mesh, templateAnnotationsFix(w, set, "the sidecar's limit within the namespace's LimitRange ratio, its request kept (or raise the request instead)"), true
	}
	if keys := proxyResourceAnnotations(t.Annotations); len(keys) > 0 {
		// The sidecar's resources come from these annotations.
		mesh = "the template's " + quoteAnnotations(t.Annotations, keys)
		ev = "the sidecar's resources are set by " + mesh
		if set := limitsForRequests(t.Annotations, text); len(set) > 0 {
			// A request over the limit a LimitRange defaults: the
			// sidecar's own limit, equal to its request, keeps its size.
			return ev + "; the sidecar has a request but no limit of its own, so the namespace's LimitRange gives it a default limit below that request", mesh,
				templateAnnotationsFix(w, set, "the sidecar's limit equal to its request (the LimitRange's default limit no longer applies to it)"), true
		}
		fix := templatePatch(owner, w.Namespace, keys)
		if cron, isCron := strings.CutPrefix(w.Controller, "CronJob/"); isCron && w.Kind == "Job" {
			fix = templatePatch("cronjob/"+cron, w.Namespace, keys)
		}
		fix += "   # the sidecar then gets the mesh's own resources; or set values the cluster admits (a request no larger than its limit, within the namespace's LimitRange)"
		if cron, isCron := strings.CutPrefix(w.Controller, "CronJob/"); isCron && w.Kind == "Job" {
			fix += "\n" + stuckRun(w.Name, cron, w.Namespace)
		}
		return ev, mesh, fix, true
	}
	// A LimitRange's maximum that no container of the template asks for:
	// the injected sidecar's default limits do.
	var said []string
	set := map[string]string{}
	seen := map[string]bool{}
	for _, m := range limitRangeMax.FindAllStringSubmatch(text, -1) {
		if seen[m[1]] || appHasLimit(t, m[1], m[3]) {
			continue
		}
		seen[m[1]] = true
		key := istio.AnnotationProxyCPULimit
		if m[1] == "memory" {
			key = istio.AnnotationProxyMemoryLimit
		}
		set[key] = m[2]
		said = append(said, m[1]+" "+m[3]+" (maximum "+m[2]+")")
	}
	if len(set) == 0 {
		return "", "", "", false
	}
	mesh = "the sidecar's default limits (" + strings.Join(said, ", ") + ", from the mesh's values)"
	return "no container of the template has those limits: they are " + mesh, mesh, templateAnnotationsFix(w, set, "the sidecar's limits within the namespace's LimitRange maximum"), true
}

func pods(n int32) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

// resourceRefusal: a controller's message about containers' resources.
// minRequest is a policy's words for a minimum request: "request at
// least 20m cpu", "at least 64Mi of memory".
var minRequest = regexp.MustCompile(`at least (\d+(?:\.\d+)?(?:m|mi|gi|ki)?) (?:of )?(cpu|memory)`)

var resourceRefusal = regexp.MustCompile(`resources\.(requests|limits)|max limit to request ratio|must be less than or equal to|maximum (cpu|memory) usage|minimum (cpu|memory) usage|Insufficient (cpu|memory)`)

// limitRangeMax is a LimitRange's refusal: resource, maximum, limit asked.
var limitRangeMax = regexp.MustCompile(`maximum (cpu|memory) usage per Container is ([^,\] ]+), but limit is ([^,\] ]+)`)

// appHasLimit says a container of the template has that limit of resource.
func appHasLimit(t *corev1.PodTemplateSpec, res, limit string) bool {
	want, err := resource.ParseQuantity(limit)
	if err != nil {
		return true // not understood: not put down to the sidecar
	}
	for _, c := range append(append([]corev1.Container(nil), t.Spec.InitContainers...), t.Spec.Containers...) {
		if q, ok := c.Resources.Limits[corev1.ResourceName(res)]; ok && q.Cmp(want) == 0 {
			return true
		}
	}
	return false
}

// limitRangeRatio is a LimitRange's refusal of a container's limit-to-request
// ratio: resource, maximum ratio.
var limitRangeRatio = regexp.MustCompile(`(cpu|memory) max limit to request ratio per Container is ([0-9.]+)`)

// sidecarDefaults are the sidecar's request and limit of each resource when
// no annotation sets them: Istio's own values.
var sidecarDefaults = map[string][2]string{"cpu": {"100m", "2000m"}, "memory": {"128Mi", "1Gi"}}

// sidecarRatio: the controller's message is a LimitRange's refusal of a
// limit-to-request ratio that no container of the template breaks (each
// has both within the ratio, or neither), so the injected sidecar does.
// It says the sidecar's request and limit (the template's annotations, or
// Istio's defaults) and the annotations that fix it: the request kept, the
// limit the ratio times it.
func sidecarRatio(t *corev1.PodTemplateSpec, text string) (ev, mesh string, set map[string]string, ok bool) {
	set = map[string]string{}
	var evs, meshes []string
	seen := map[string]bool{}
	for _, m := range limitRangeRatio.FindAllStringSubmatch(text, -1) {
		res := m[1]
		if seen[res] {
			continue
		}
		seen[res] = true
		ratio, err := strconv.ParseFloat(m[2], 64)
		if err != nil || ratio < 1 || appBreaksRatio(t, res, ratio) {
			return "", "", nil, false
		}
		reqKey, limKey := istio.AnnotationProxyCPU, istio.AnnotationProxyCPULimit
		if res == "memory" {
			reqKey, limKey = istio.AnnotationProxyMemory, istio.AnnotationProxyMemoryLimit
		}
		req, lim := sidecarDefaults[res][0], sidecarDefaults[res][1]
		from := "Istio's defaults"
		if v, ok := t.Annotations[reqKey]; ok {
			req, from = v, "the template's "+reqKey
		}
		if v, ok := t.Annotations[limKey]; ok {
			lim = v
			from += ", the template's " + limKey
		} else if from != "Istio's defaults" {
			from += ", Istio's default limit"
		}
		q, err := resource.ParseQuantity(req)
		if err != nil || q.IsZero() {
			return "", "", nil, false
		}
		var newLim string
		if res == "cpu" {
			newLim = fmt.Sprintf("%dm", int64(float64(q.MilliValue())*ratio))
		} else {
			newLim = resource.NewQuantity(int64(float64(q.Value())*ratio), resource.BinarySI).String()
		}
		set[reqKey], set[limKey] = req, newLim
		evs = append(evs, fmt.Sprintf("%s: request %s, limit %s (%s), a ratio above %s", res, req, lim, from, m[2]))
		meshes = append(meshes, fmt.Sprintf("the sidecar's %s request %s and limit %s", res, req, lim))
	}
	if len(set) == 0 {
		return "", "", nil, false
	}
	ev = "no container of the template breaks the LimitRange's limit-to-request ratio: the injected sidecar (istio-proxy) does, " + strings.Join(evs, "; ")
	return ev, strings.Join(meshes, ", "), set, true
}

// appBreaksRatio says a container of the template has a request of res and
// no limit, or a limit above ratio times its request (one with a limit and
// no request gets the limit as its request; one with neither, the
// LimitRange's defaults).
func appBreaksRatio(t *corev1.PodTemplateSpec, res string, ratio float64) bool {
	name := corev1.ResourceName(res)
	for _, c := range append(append([]corev1.Container(nil), t.Spec.InitContainers...), t.Spec.Containers...) {
		req, hasReq := c.Resources.Requests[name]
		lim, hasLim := c.Resources.Limits[name]
		switch {
		case hasReq && !hasLim, hasReq && req.IsZero() && hasLim:
			return true
		case hasReq && hasLim && float64(lim.MilliValue()) > ratio*float64(req.MilliValue()):
			return true
		}
	}
	return false
}

// templateAnnotationsFix is the command that sets annotations on the
// workload's pod template (a Job's CronJob's, for a Job it made; a Job of
// its own is re-created), comment after it.
func templateAnnotationsFix(w *WorkloadState, set map[string]string, comment string) string {
	return templateMetaFix(w, set, nil, comment)
}

// templateMetaFix is templateAnnotationsFix with the template's labels set
// the same way.
func templateMetaFix(w *WorkloadState, set, labels map[string]string, comment string) string {
	kind, name := w.Kind, w.Name
	cron, isCron := strings.CutPrefix(w.Controller, "CronJob/")
	if isCron && kind == "Job" {
		kind, name = "CronJob", cron
	}
	pointers := func(set map[string]string) map[string]*string {
		change := map[string]*string{}
		for k, v := range set {
			change[k] = nil // "" removes it
			if v != "" {
				change[k] = &v
			}
		}
		return change
	}
	fix := injection.SetTemplateMeta(kind, name, w.Namespace, pointers(set), pointers(labels)) + comment
	if isCron && w.Kind == "Job" {
		fix += "\n" + stuckRun(w.Name, cron, w.Namespace)
	}
	return fix
}

// stuckRun is the line that ends a CronJob's Job made from the template
// before the fix: it keeps that template, and while it runs (its pods
// refused, it never ends) a Forbid policy holds the next runs back.
func stuckRun(job, cron, ns string) string {
	return "kubectl delete job " + job + " -n " + ns + " --ignore-not-found   # made from the old template, it keeps it; cronjob/" + cron + "'s next run gets the change (or run one now: kubectl create job " + cron + "-retry --from=cronjob/" + cron + " -n " + ns + ")"
}

// meshSideOfRefusal is the other way out of a policy that refuses what the
// injector adds: a change of the template that makes the injected parts
// comply, where the policy's words say which (a pod-level seccomp profile,
// which the injected containers inherit; a classic sidecar instead of a
// restartable init container), else the places to change in words.
func meshSideOfRefusal(w *WorkloadState, text string) string {
	if fix := MeshSideOfPolicy(w, text); fix != "" {
		return "# or, keeping the policy: " + fix
	}
	return "# or, on the mesh's side: change what the policy requires in the injection (an istio-proxy/istio-init override in the template, sidecar.istio.io annotations), or Istio's CNI plugin for istio-init's capabilities"
}

// MeshSideOfPolicy is the change of a workload's template that makes what
// the injector adds comply with a policy that refuses it, where the
// policy's words say which ("" when they do not): a pod-level seccomp
// profile, which the injected containers inherit; a classic sidecar
// instead of a restartable init container; a native sidecar instead of a
// classic one's postStart hook (holdApplicationUntilProxyStarts).
func MeshSideOfPolicy(w *WorkloadState, text string) string {
	kind, name := strings.ToLower(w.Kind), w.Name
	if cron, ok := strings.CutPrefix(w.Controller, "CronJob/"); ok && w.Kind == "Job" {
		kind, name = "cronjob", cron
	}
	patch := func(template string) string { return injection.TemplatePatch(kind, name, w.Namespace, template) }
	patchable := kind != "job"
	lower := strings.ToLower(text)
	switch {
	case patchable && strings.Contains(lower, "seccomp"):
		return "a pod-level seccomp profile, which the injected containers inherit:\n" +
			patch(injection.SeccompRuntimeDefault)
	case patchable && (strings.Contains(lower, "restartpolicy") || strings.Contains(lower, "restartable")):
		return "a classic sidecar instead of a native one (a restartable init container):\n" +
			patch(`{"metadata":{"annotations":{"sidecar.istio.io/nativeSidecar":"false"}}}`)
	case patchable && minRequest.MatchString(lower):
		// A minimum request: the sidecar's request raised to it (istio-init
		// is sized alike).
		m := minRequest.FindStringSubmatch(lower)
		key := istio.AnnotationProxyCPU
		if m[2] == "memory" {
			key = istio.AnnotationProxyMemory
		}
		q := m[1]
		if strings.HasSuffix(q, "mi") || strings.HasSuffix(q, "gi") || strings.HasSuffix(q, "ki") {
			q = q[:len(q)-2] + strings.ToUpper(q[len(q)-2:len(q)-1]) + "i"
		}
		ann := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, q)
		return "the sidecar's request raised to the policy's minimum (istio-init and istio-proxy are sized alike):\n" +
			patch(ann)
	case patchable && (strings.Contains(lower, "guaranteed") || strings.Contains(lower, "qos")):
		// The sidecar template sizes istio-init and istio-proxy alike from
		// these annotations: limits equal to requests make both Guaranteed.
		cpu, mem := "100m", "128Mi"
		if t := w.Template; t != nil {
			if v := t.Annotations[istio.AnnotationProxyCPU]; v != "" {
				cpu = v
			}
			if v := t.Annotations[istio.AnnotationProxyMemory]; v != "" {
				mem = v
			}
		}
		ann := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q,%q:%q,%q:%q,%q:%q}}}`, istio.AnnotationProxyCPU, cpu, istio.AnnotationProxyCPULimit, cpu, istio.AnnotationProxyMemory, mem, istio.AnnotationProxyMemoryLimit, mem)
		return "the sidecar's limits equal to its requests (istio-init and istio-proxy are then Guaranteed; the app's containers must be too):\n" +
			patch(ann)
	case patchable && (strings.Contains(lower, "poststart") || strings.Contains(lower, "lifecycle")):
		return "a native sidecar instead of a classic one, whose start is held by a postStart hook (holdApplicationUntilProxyStarts):\n" +
			patch(`{"metadata":{"annotations":{"sidecar.istio.io/nativeSidecar":"true"}}}`)
	}
	return ""
}
