package checkup

import (
	"context"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// pendingWorkloads are the workloads of a sweep being listed meanwhile.
type pendingWorkloads struct {
	done   chan struct{}
	list   []inspect.Workload
	unread []string
	err    error
}

func (e *Engine) startWorkloads(ctx context.Context, ns string) *pendingWorkloads {
	w := &pendingWorkloads{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.list, w.unread, w.err = e.Client.Workloads(ctx, ns)
	}()
	return w
}

// podCounts counts the pods of each workload ("namespace/Kind/name").
type podCounts map[string]int32

func (c podCounts) add(p *corev1.Pod) {
	if o := inspect.OwnerOf(p); o != nil {
		c[p.Namespace+"/"+o.Kind+"/"+o.Name]++
	}
}

// podFailures keeps how the failed pods of each Job failed, two a Job,
// and the first cause their diagnoses name.
type podFailures struct {
	lines  map[string][]string
	causes map[string]*diagnose.Finding
}

func newPodFailures() podFailures {
	return podFailures{lines: map[string][]string{}, causes: map[string]*diagnose.Finding{}}
}

// add keeps how pod p of a Job failed, from its facts (f.Startup), and
// what its diagnosis puts that down to.
func (pf podFailures) add(p *corev1.Pod, f *diagnose.Facts) {
	o := inspect.OwnerOf(p)
	s := f.Startup
	if o == nil || o.Kind != "Job" || s == nil {
		return
	}
	k := p.Namespace + "/Job/" + o.Name
	if len(pf.lines[k]) >= 2 {
		return
	}
	for _, c := range append(append([]startup.ContainerStartup(nil), s.InitContainers...), s.Containers...) {
		if c.Failing && c.LastFailure != "" {
			line := p.Name + ": " + c.FailureSummary()
			if c.Log != nil {
				line += ": " + startup.LogEnd(c)
			}
			pf.lines[k] = append(pf.lines[k], line)
			if pf.causes[k] == nil {
				pf.causes[k] = diagnose.PodCause(p.Name, diagnose.Diagnose(*f))
			}
			return
		}
	}
}

var rsOf = regexp.MustCompile(`^(.+)-[a-z0-9]{5,10}$`)

// covers says a report of a workload whose pods admission refuses is
// about w (itself, or a ReplicaSet of its Deployment).
func covers(r *injection.InjectionReport, w *inspect.Workload) bool {
	if r.Namespace != w.Namespace {
		return false
	}
	if r.Kind == w.Kind && r.Name == w.Name {
		return true
	}
	m := rsOf.FindStringSubmatch(r.Name)
	return w.Kind == "Deployment" && r.Kind == "ReplicaSet" && m != nil && m[1] == w.Name
}

// shortItems are the items of the workloads that lack pods (none of them
// reported already as refused by the mesh): their template's injection
// answer and their controller's account, with no pod.
func (e *Engine) shortItems(ctx context.Context, facts *injection.ClusterFacts, list []inspect.Workload, counts podCounts, failures podFailures,
	refused, proved []*injection.InjectionReport, warnings map[string][]corev1.Event, warningsUnread string) ([]*item, error) {
	var short []inspect.Workload
	var namespaces []string
next:
	for _, w := range list {
		key := w.Namespace + "/" + w.Kind + "/" + w.Name
		w.Pods, w.Now, w.PodFailures, w.PodCause = counts[key], e.Starts.Now(), failures.lines[key], failures.causes[key]
		if !w.Short() {
			continue
		}
		for _, r := range refused {
			if covers(r, &w) {
				continue next
			}
		}
		short = append(short, w)
		namespaces = append(namespaces, w.Namespace)
	}
	if len(short) == 0 {
		return nil, nil
	}
	if err := e.Client.ResolveNamespaces(ctx, facts, namespaces...); err != nil {
		return nil, err
	}
	var items []*item
	for i := range short {
		w := &short[i]
		events := newestOnly(warnings, w)
		if warnings != nil {
			w.Events = inspect.WorkloadEvents(events, w.Namespace, w.Kind, w.Name, 3)
		} else {
			w.EventsUnknown = warningsUnread
		}
		failed := inspect.EventsForOwner(inspect.OnlyReason(events, "FailedCreate"), w.Namespace, w.Kind, w.Name)
		r := e.Inject.ExplainTemplate(ctx, facts, w.Kind, w.Namespace, w.Name, w.Template, failed)
		if !reuseProof(r, proved, w) {
			e.Inject.ProveWithoutSidecar(ctx, r, w.Template)
		}
		st := w.WorkloadState
		it := &item{facts: diagnose.Facts{Injection: r, Workload: &st, NoPod: noPodOf(&st)}}
		items = append(items, it)
	}
	return items, nil
}

// reuseProof gives r the proof made in the sweep for the report of w's
// refused pods (proved: those reports), and says whether there was one.
func reuseProof(r *injection.InjectionReport, proved []*injection.InjectionReport, w *inspect.Workload) bool {
	if r == nil || r.RefusedBy == nil {
		return false
	}
	for _, p := range proved {
		if covers(p, w) && p.RefusedBy != nil && p.RefusedBy.WithoutSidecar != "" {
			r.RefusedBy.WithoutSidecar, r.RefusedBy.MeshSide = p.RefusedBy.WithoutSidecar, p.RefusedBy.MeshSide
			return true
		}
	}
	return false
}

// newestOnly keeps, of a Deployment whose rollout is stuck on a ReplicaSet
// it names, the events about it and that ReplicaSet: an older ReplicaSet's
// refusals are history.
func newestOnly(events map[string][]corev1.Event, w *inspect.Workload) map[string][]corev1.Event {
	if events == nil || w.Rollout == "" || w.NewReplicaSet == "" {
		return events
	}
	out := map[string][]corev1.Event{}
	for _, k := range []string{w.Namespace + "/" + w.Kind + "/" + w.Name, w.Namespace + "/ReplicaSet/" + w.NewReplicaSet} {
		if evs, ok := events[k]; ok {
			out[k] = evs
		}
	}
	return out
}

// noPodOf says why a workload's row has no pod.
func noPodOf(w *diagnose.WorkloadState) string {
	switch {
	case w.Failed != "":
		return "the Job failed: its pods are diagnosed in their own rows"
	case w.Pods == 0:
		return "it has no pods: none was created"
	case w.Rollout != "" && w.Pods >= w.Desired:
		return "its newest ReplicaSet's pods were never created: its old pods are diagnosed in their own rows"
	}
	return "some of its pods were never created"
}

// workloadItem is the item of a named workload that lacks pods (pods: the
// pods read for it), nil when it lacks none; why says why a workload with
// no pods at all lacks none.
func (e *Engine) workloadItem(ctx context.Context, facts *injection.ClusterFacts, r *injection.InjectionReport, pods []*corev1.Pod, failures podFailures) (it *item, why string, incomplete []string, err error) {
	w, ok, err := e.workload(ctx, r.Namespace, r.Kind, r.Name)
	if err != nil || !ok {
		return nil, "", nil, err
	}
	if w.Kind == "CronJob" {
		// Its answer is its last Job's: failed, or short of its pod.
		jobs, err := e.Client.CronJobJobs(ctx, r.Namespace, r.Name)
		switch {
		case err != nil:
			return nil, "", nil, err
		case len(jobs) == 0:
			return nil, "it has made no Job yet", nil, nil
		}
		w = jobs[0]
	}
	counts := podCounts{}
	for _, p := range pods {
		if p != nil {
			counts.add(p)
		}
	}
	var warnings map[string][]corev1.Event
	unread := ""
	if warnings, err = e.Client.WarningEvents(ctx, r.Namespace); err != nil {
		if !apierrors.IsForbidden(err) {
			return nil, "", nil, err
		}
		unread = "forbidden: the user may not list events in namespace " + r.Namespace
		incomplete = append(incomplete, "events: "+unread)
	}
	items, err := e.shortItems(ctx, facts, []inspect.Workload{w}, counts, failures, nil, nil, warnings, unread)
	if err != nil || len(items) == 0 {
		if r.Kind == "CronJob" {
			return nil, "its last Job " + w.Name + " wants no pods now (finished or suspended)", incomplete, err
		}
		why := strings.ToLower(w.Kind) + " scaled to zero, paused, finished or suspended"
		if w.Kind == "DaemonSet" {
			why = "no node matches its nodeSelector, affinity and tolerations"
		}
		return nil, "it wants no pods now (" + why + ")", incomplete, err
	}
	if old := items[0].facts.Injection; r.RefusedBy != nil && r.RefusedBy.WithoutSidecar == "" {
		// The named report is kept: the proof made for the sweep's goes
		// with it (or is made now).
		if old != nil && old.RefusedBy != nil && old.RefusedBy.WithoutSidecar != "" {
			r.RefusedBy.WithoutSidecar, r.RefusedBy.MeshSide = old.RefusedBy.WithoutSidecar, old.RefusedBy.MeshSide
		} else {
			e.Inject.ProveWithoutSidecar(ctx, r, w.Template)
		}
	}
	items[0].facts.Injection = r
	return items[0], "", incomplete, nil
}
