package inspect

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// Workload is a controller that wants pods, as its own status reports it,
// with its pod template (WorkloadState.Template).
type Workload struct {
	diagnose.WorkloadState
	// Selector is its pod selector, as kubectl -l takes it ("" when it
	// has none that says so).
	Selector string
	// Held says why a rollout restart does not replace its pods
	// ("" when it does): an OnDelete update strategy, a partition.
	Held string
}

// selectorOf is a label selector as kubectl -l takes it.
func selectorOf(s *metav1.LabelSelector) string {
	if s == nil {
		return ""
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return ""
	}
	return sel.String()
}

// Workloads lists the Deployments, StatefulSets, DaemonSets and Jobs of
// namespace ("" for all): one LIST per kind, at once. A kind the user may
// not list is named in unread (with its permission), not an error.
func (c *Client) Workloads(ctx context.Context, namespace string) (out []Workload, unread []string, err error) {
	var deps *appsv1.DeploymentList
	var sts *appsv1.StatefulSetList
	var dss *appsv1.DaemonSetList
	var jobs *batchv1.JobList
	var rss *appsv1.ReplicaSetList
	errs := make([]error, 5)
	opts := metav1.ListOptions{}
	all(
		func() { deps, errs[0] = c.Proto.AppsV1().Deployments(namespace).List(ctx, opts) },
		func() { sts, errs[1] = c.Proto.AppsV1().StatefulSets(namespace).List(ctx, opts) },
		func() { dss, errs[2] = c.Proto.AppsV1().DaemonSets(namespace).List(ctx, opts) },
		func() { jobs, errs[3] = c.Proto.BatchV1().Jobs(namespace).List(ctx, opts) },
		func() { rss, errs[4] = c.Proto.AppsV1().ReplicaSets(namespace).List(ctx, opts) },
	)
	scope := "in namespace " + namespace
	if namespace == "" {
		scope = "(all namespaces)"
	}
	for i, kind := range []string{"deployments", "statefulsets", "daemonsets", "jobs", "replicasets"} {
		switch {
		case errs[i] == nil:
		case apierrors.IsForbidden(errs[i]):
			unread = append(unread, "workloads without pods: forbidden: the user may not list "+kind+" "+scope)
		case ctx.Err() != nil:
			return nil, nil, ctx.Err()
		default:
			unread = append(unread, "workloads without pods: list "+kind+" ("+scope+"): "+errs[i].Error())
		}
	}
	if deps != nil {
		for i := range deps.Items {
			out = append(out, DeploymentWorkload(&deps.Items[i]))
		}
	}
	if sts != nil {
		for i := range sts.Items {
			out = append(out, StatefulSetWorkload(&sts.Items[i]))
		}
	}
	if dss != nil {
		for i := range dss.Items {
			out = append(out, DaemonSetWorkload(&dss.Items[i]))
		}
	}
	if jobs != nil {
		for i := range jobs.Items {
			out = append(out, JobWorkload(&jobs.Items[i]))
		}
	}
	if rss != nil {
		for i := range rss.Items {
			// A Deployment's ReplicaSets are its own account.
			if metav1.GetControllerOf(&rss.Items[i]) == nil {
				out = append(out, ReplicaSetWorkload(&rss.Items[i]))
			}
		}
	}
	return out, unread, nil
}

// ReplicaSetWorkload is a ReplicaSet's wants (one no Deployment owns: a
// Deployment's are read through it): its replicas, and its ReplicaFailure
// condition (the apiserver's refusal of its pods).
func ReplicaSetWorkload(r *appsv1.ReplicaSet) Workload {
	w := Workload{WorkloadState: diagnose.WorkloadState{Kind: "ReplicaSet", Namespace: r.Namespace, Name: r.Name, Desired: replicas(r.Spec.Replicas),
		Template: &r.Spec.Template, Labels: r.Labels}}
	var times []metav1.Time
	for _, c := range r.Status.Conditions {
		times = append(times, c.LastTransitionTime)
		if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
			w.Conditions = append(w.Conditions, condition(string(c.Type), c.Reason, c.Message))
		}
	}
	w.Since = since(r.CreationTimestamp, times...)
	w.Selector = selectorOf(r.Spec.Selector)
	w.Held = "a ReplicaSet replaces a pod only when it is deleted"
	return w
}

// Workload reads one workload by kind (Deployment, StatefulSet, DaemonSet,
// Job) and name; ok is false for another kind.
func (c *Client) Workload(ctx context.Context, namespace, kind, name string) (w Workload, ok bool, err error) {
	get := metav1.GetOptions{}
	switch kind {
	case "Deployment":
		o, err := c.Kube.AppsV1().Deployments(namespace).Get(ctx, name, get)
		if err != nil {
			return w, true, ExplainAPIError(err, "get deployments")
		}
		return DeploymentWorkload(o), true, nil
	case "StatefulSet":
		o, err := c.Kube.AppsV1().StatefulSets(namespace).Get(ctx, name, get)
		if err != nil {
			return w, true, ExplainAPIError(err, "get statefulsets")
		}
		return StatefulSetWorkload(o), true, nil
	case "DaemonSet":
		o, err := c.Kube.AppsV1().DaemonSets(namespace).Get(ctx, name, get)
		if err != nil {
			return w, true, ExplainAPIError(err, "get daemonsets")
		}
		return DaemonSetWorkload(o), true, nil
	case "Job":
		o, err := c.Kube.BatchV1().Jobs(namespace).Get(ctx, name, get)
		if err != nil {
			return w, true, ExplainAPIError(err, "get jobs")
		}
		return JobWorkload(o), true, nil
	case "CronJob":
		o, err := c.Kube.BatchV1().CronJobs(namespace).Get(ctx, name, get)
		if err != nil {
			return w, true, ExplainAPIError(err, "get cronjobs")
		}
		return CronJobWorkload(o), true, nil
	case "ReplicaSet":
		o, err := c.Kube.AppsV1().ReplicaSets(namespace).Get(ctx, name, get)
		if err != nil {
			return w, true, ExplainAPIError(err, "get replicasets")
		}
		return ReplicaSetWorkload(o), true, nil
	}
	return w, false, nil
}

// CronJobWorkload is a CronJob: it wants no pod of its own (its Jobs do).
func CronJobWorkload(cj *batchv1.CronJob) Workload {
	return Workload{WorkloadState: diagnose.WorkloadState{Kind: "CronJob", Namespace: cj.Namespace, Name: cj.Name,
		Template: &cj.Spec.JobTemplate.Spec.Template, Labels: cj.Labels, Since: cj.CreationTimestamp.Time}}
}

// PodOwner reads the workload whose template makes the pod (a ReplicaSet's
// Deployment, a StatefulSet, a DaemonSet, a Job, and a Job's CronJob when
// the Job's labels do not say what the check needs): one GET, two for a
// CronJob's Job; nil for a pod no such workload makes.
func (c *Client) PodOwner(ctx context.Context, p *corev1.Pod) (*diagnose.WorkloadState, error) {
	return PodOwnerFrom(ctx, p, c.Workload)
}

// WorkloadReader reads a workload, as Client.Workload does.
type WorkloadReader func(ctx context.Context, namespace, kind, name string) (Workload, bool, error)

// PodOwnerFrom is PodOwner with the workloads read by read.
func PodOwnerFrom(ctx context.Context, p *corev1.Pod, read WorkloadReader) (*diagnose.WorkloadState, error) {
	o := OwnerOf(p)
	if o == nil {
		return nil, nil
	}
	w, ok, err := read(ctx, p.Namespace, o.Kind, o.Name)
	if err != nil || !ok {
		return nil, err
	}
	if cron, isCron := strings.CutPrefix(w.Controller, "CronJob/"); isCron && w.Labels[diagnose.InjectLabel] == "" {
		cj, _, err := read(ctx, p.Namespace, "CronJob", cron)
		if err != nil {
			return nil, err
		}
		return &cj.WorkloadState, nil
	}
	return &w.WorkloadState, nil
}

// since is the latest of the object's creation and its conditions' changes:
// how long it has been as it is.
func since(created metav1.Time, times ...metav1.Time) time.Time {
	t := created.Time
	for _, c := range times {
		if c.After(t) {
			t = c.Time
		}
	}
	return t
}

// condition is a condition that says something is wrong, as "Type
// (Reason): message".
func condition(typ, reason, message string) string {
	s := typ
	if reason != "" {
		s += " (" + reason + ")"
	}
	if message != "" {
		s += ": " + message
	}
	return s
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// DeploymentWorkload is a Deployment's wants and troubles.
func DeploymentWorkload(d *appsv1.Deployment) Workload {
	w := Workload{WorkloadState: diagnose.WorkloadState{Kind: "Deployment", Namespace: d.Namespace, Name: d.Name, Desired: replicas(d.Spec.Replicas),
		Template: &d.Spec.Template, Labels: d.Labels, DeletesFirst: d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType}}
	if ru := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType && ru != nil {
		w.SurgesOnly = scaled(ru.MaxUnavailable, w.Desired, false) == 0 && scaled(ru.MaxSurge, w.Desired, true) > 0
	}
	var times []metav1.Time
	failing, progressing := false, ""
	for _, c := range d.Status.Conditions {
		times = append(times, c.LastUpdateTime, c.LastTransitionTime)
		bad := c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue ||
			c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse
		if bad {
			failing = true
			w.Conditions = append(w.Conditions, condition(string(c.Type), c.Reason, c.Message))
		}
		if c.Type == appsv1.DeploymentProgressing {
			progressing = condition(string(c.Type)+"="+string(c.Status), c.Reason, c.Message)
			if m := newReplicaSet.FindStringSubmatch(c.Message); m != nil {
				w.NewReplicaSet = m[1]
			}
		}
	}
	if d.Spec.Paused {
		w.Desired = 0 // a paused Deployment makes no pods
		w.Paused = true
	}
	// A rollout its controller cannot carry out: the newest ReplicaSet lacks
	// pods while the Deployment says why (its old ReplicaSets serve on).
	// One in progress, or one the controller has not seen yet, is not.
	if failing && w.Desired > 0 && d.Status.UpdatedReplicas < w.Desired && d.Status.ObservedGeneration >= d.Generation {
		w.Rollout = fmt.Sprintf("%s of its new template exist (updated %d of %d)", pods(d.Status.UpdatedReplicas), d.Status.UpdatedReplicas, w.Desired)
		if w.NewReplicaSet != "" {
			w.Rollout = fmt.Sprintf("%s of its newest ReplicaSet %s exist, of %d wanted", pods(d.Status.UpdatedReplicas), w.NewReplicaSet, w.Desired)
		}
		if progressing != "" && !strings.HasPrefix(progressing, "Progressing=False") {
			w.Progressing = progressing // a False one is among its conditions already
		}
	}
	w.Since = since(d.CreationTimestamp, times...)
	w.Selector = selectorOf(d.Spec.Selector)
	return w
}

// newReplicaSet is the ReplicaSet a Deployment's Progressing condition names.
var newReplicaSet = regexp.MustCompile(`^ReplicaSet "([^"]+)"`)

func pods(n int32) string {
	if n == 1 {
		return "1 pod"
	}
	return fmt.Sprintf("%d pods", n)
}

// StatefulSetWorkload is a StatefulSet's wants and troubles.
func StatefulSetWorkload(s *appsv1.StatefulSet) Workload {
	w := Workload{WorkloadState: diagnose.WorkloadState{Kind: "StatefulSet", Namespace: s.Namespace, Name: s.Name, Desired: replicas(s.Spec.Replicas), Template: &s.Spec.Template, Labels: s.Labels,
		DeletesFirst: true}} // a StatefulSet's rollout replaces a pod after deleting it
	var times []metav1.Time
	for _, c := range s.Status.Conditions {
		times = append(times, c.LastTransitionTime)
		if c.Status == corev1.ConditionTrue && strings.Contains(string(c.Type), "Failure") {
			w.Conditions = append(w.Conditions, condition(string(c.Type), c.Reason, c.Message))
		}
	}
	w.Since = since(s.CreationTimestamp, times...)
	w.Selector = selectorOf(s.Spec.Selector)
	for _, c := range s.Spec.VolumeClaimTemplates {
		w.ClaimTemplates = append(w.ClaimTemplates, c.Name)
	}
	w.UpdateRevision = s.Status.UpdateRevision
	switch u := s.Spec.UpdateStrategy; {
	case u.Type == appsv1.OnDeleteStatefulSetStrategyType:
		w.Held = "its update strategy is OnDelete: a pod is replaced only when it is deleted"
	case u.RollingUpdate != nil && u.RollingUpdate.Partition != nil && *u.RollingUpdate.Partition > 0:
		w.Held = fmt.Sprintf("its rolling update has partition %d: pods with a lower ordinal are not replaced", *u.RollingUpdate.Partition)
	}
	return w
}

// DaemonSetWorkload is a DaemonSet's wants: a pod on each node it is to run on.
func DaemonSetWorkload(d *appsv1.DaemonSet) Workload {
	surge := d.Spec.UpdateStrategy.RollingUpdate != nil && d.Spec.UpdateStrategy.RollingUpdate.MaxSurge != nil && d.Spec.UpdateStrategy.RollingUpdate.MaxSurge.String() != "0"
	w := Workload{WorkloadState: diagnose.WorkloadState{Kind: "DaemonSet", Namespace: d.Namespace, Name: d.Name, Desired: d.Status.DesiredNumberScheduled, Template: &d.Spec.Template, Labels: d.Labels,
		DeletesFirst: !surge}}
	if ru := d.Spec.UpdateStrategy.RollingUpdate; surge && ru != nil {
		w.SurgesOnly = scaled(ru.MaxUnavailable, max(w.Desired, 1), false) == 0
	}
	var times []metav1.Time
	for _, c := range d.Status.Conditions {
		times = append(times, c.LastTransitionTime)
		if c.Status == corev1.ConditionTrue {
			w.Conditions = append(w.Conditions, condition(string(c.Type), c.Reason, c.Message))
		}
	}
	w.Since = since(d.CreationTimestamp, times...)
	w.Selector = selectorOf(d.Spec.Selector)
	if d.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
		w.Held = "its update strategy is OnDelete: a pod is replaced only when it is deleted"
	}
	return w
}

// JobWorkload is a Job's wants: a pod while it is neither finished nor
// suspended; its Failed condition is a fault of its own.
func JobWorkload(j *batchv1.Job) Workload {
	w := Workload{WorkloadState: diagnose.WorkloadState{Kind: "Job", Namespace: j.Namespace, Name: j.Name, Desired: 1, Template: &j.Spec.Template, Labels: j.Labels}}
	if ref := metav1.GetControllerOf(j); ref != nil {
		w.Controller = ref.Kind + "/" + ref.Name
	}
	if j.Spec.Suspend != nil && *j.Spec.Suspend {
		w.Desired = 0
	}
	if m := j.Spec.ManagedBy; m != nil && *m != batchv1.JobControllerName {
		w.ManagedBy = *m
	}
	var times []metav1.Time
	for _, c := range j.Status.Conditions {
		times = append(times, c.LastTransitionTime)
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			w.Desired = 0
		case batchv1.JobFailed, batchv1.JobFailureTarget:
			w.Desired = 0
			w.Failed = condition("Failed", c.Reason, c.Message)
		}
	}
	w.Since = since(j.CreationTimestamp, times...)
	return w
}

// WarningEvents lists the Warning events about objects that are not pods
// (workloads, ReplicaSets) in namespace ("" for all), keyed by
// "namespace/kind/name", newest first: one LIST.
func (c *Client) WarningEvents(ctx context.Context, namespace string) (map[string][]corev1.Event, error) {
	sel := fields.AndSelectors(fields.OneTermEqualSelector("type", corev1.EventTypeWarning), fields.OneTermNotEqualSelector("involvedObject.kind", "Pod"))
	list, err := c.Proto.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	out := map[string][]corev1.Event{}
	items := list.Items
	sort.SliceStable(items, func(i, j int) bool { return eventTime(items[i]).After(eventTime(items[j])) })
	for _, e := range items {
		k := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name
		out[k] = append(out[k], e)
	}
	return out, nil
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// OnlyReason keeps the events of one reason.
func OnlyReason(events map[string][]corev1.Event, reason string) map[string][]corev1.Event {
	out := map[string][]corev1.Event{}
	for k, evs := range events {
		for _, e := range evs {
			if e.Reason == reason {
				out[k] = append(out[k], e)
			}
		}
	}
	return out
}

// WorkloadEvents are the warning events about a workload and its
// ReplicaSets, as "Reason (N×): message", newest first, each once, at most n.
func WorkloadEvents(events map[string][]corev1.Event, namespace, kind, name string, n int) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range EventsForOwner(events, namespace, kind, name) {
		if seen[e.Reason+e.Message] || len(out) == n {
			continue
		}
		seen[e.Reason+e.Message] = true
		line := e.Reason
		if e.Count > 1 {
			line += fmt.Sprintf(" (%d×)", e.Count)
		}
		out = append(out, line+": "+strings.TrimSpace(e.Message))
	}
	return out
}

// UnknownEvents records the warning events as unread in f.
func UnknownEvents(f *injection.ClusterFacts, err error) error {
	return unknown(f, injection.FactEvents, "list events", err)
}

// CronJobJobs lists the Jobs a CronJob made (their controller), newest
// first: one LIST of the namespace's Jobs.
func (c *Client) CronJobJobs(ctx context.Context, namespace, name string) ([]Workload, error) {
	list, err := c.Proto.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, ExplainAPIError(err, "list jobs")
	}
	var jobs []*batchv1.Job
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.Kind == "CronJob" && ref.Name == name {
			jobs = append(jobs, &list.Items[i])
		}
	}
	sort.SliceStable(jobs, func(i, j int) bool {
		a, b := jobs[i].CreationTimestamp, jobs[j].CreationTimestamp
		if !a.Equal(&b) {
			return b.Before(&a)
		}
		return jobs[i].Name > jobs[j].Name
	})
	out := make([]Workload, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, JobWorkload(j))
	}
	return out, nil
}

// WorkloadCache keeps the workloads read in one run: each is read once.
type WorkloadCache struct{ m sync.Map }

// Reader reads workloads through the cache, with c.
func (wc *WorkloadCache) Reader(c *Client) WorkloadReader {
	return func(ctx context.Context, namespace, kind, name string) (Workload, bool, error) {
		key := namespace + "/" + kind + "/" + name
		if w, ok := wc.m.Load(key); ok {
			return w.(Workload), true, nil
		}
		w, ok, err := c.Workload(ctx, namespace, kind, name)
		if err == nil && ok {
			wc.m.Store(key, w)
		}
		return w, ok, err
	}
}

// scaled is a rolling update's maxSurge (up: rounded up) or maxUnavailable
// of n pods, as the controller counts it; -1 when it cannot be read.
func scaled(v *intstr.IntOrString, n int32, up bool) int {
	if v == nil {
		return -1
	}
	got, err := intstr.GetScaledValueFromIntOrPercent(v, int(n), up)
	if err != nil {
		return -1
	}
	return got
}
