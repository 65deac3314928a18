package inject

import (
	"context"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// blockedOwners reports workloads whose pods the apiserver refuses to create
// because of the mesh (FailedCreate events: an Istio webhook, PodSecurity
// refusing istio-init, a quota refusing the sidecar): they have no pod to list.
func (e *Engine) blockedOwners(ctx context.Context, facts *injection.ClusterFacts, events map[string][]corev1.Event) ([]*injection.InjectionReport, error) {
	var out []*injection.InjectionReport
	keys := make([]string, 0, len(events))
	var namespaces []string
	for k := range events {
		keys = append(keys, k)
		namespaces = append(namespaces, strings.SplitN(k, "/", 2)[0])
	}
	sort.Strings(keys)
	if err := e.Client.ResolveNamespaces(ctx, facts, namespaces...); err != nil {
		return nil, err
	}
	for _, k := range keys {
		evs := events[k]
		if injection.RefusalOf(evs[0].Message) == "" && !injection.MayRefuseInjected(evs[0].Message) && !admissionDenied(evs[0].Message) && !injection.CitesLimitRange(evs[0].Message) {
			continue // not admission's refusal of the mesh's or of what it adds
		}
		parts := strings.SplitN(k, "/", 3)
		w := &injection.Workload{Kind: parts[1], Namespace: parts[0], Name: parts[2], NamespaceSource: injection.NamespaceFromCluster, Events: evs}
		// Its pods would come from the template of the object the events are
		// about: read (one GET per refused workload), it says why admission
		// refuses them, and what to change; unread, the events say it alone.
		yes := true
		owned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: parts[0], Name: parts[2],
			OwnerReferences: []metav1.OwnerReference{{Kind: parts[1], Name: parts[2], Controller: &yes}}}}
		tmpl, _, short, ok, err := e.Client.OwnerState(ctx, owned)
		if err == nil && ok && !short || apierrors.IsNotFound(err) {
			continue // it has its pods now, or is gone: the refusal is over (their own rows say how they are)
		}
		if err == nil && ok {
			w.Labels, w.Annotations, w.Spec = tmpl.Labels, tmpl.Annotations, tmpl.Spec
		}
		r := e.explainRefused(ctx, facts, w)
		if !r.CreationBlocked && r.RefusedBy == nil {
			continue // e.g. a quota refusing pods that get no sidecar
		}
		if err == nil && ok {
			e.ProveWithoutSidecar(ctx, r, tmpl)
		}
		e.recordLive(r, owned)
		r.Factors = injection.DecidingFactors(r.Factors)
		out = append(out, r)
	}
	return out, nil
}

// currentRefusals keeps the FailedCreate events of the controllers still
// short of their pods (one GET per controller the events are about): a
// refusal whose controller has its pods now (a ReplicaSet at its replicas,
// a Job done or running) or that is gone (deleted, replaced) is over, as
// the sweep reads it; a controller that cannot be read keeps its events.
func (e *Engine) currentRefusals(ctx context.Context, events []corev1.Event) []corev1.Event {
	over := map[string]bool{}
	var out []corev1.Event
	yes := true
	for _, ev := range events {
		o := ev.InvolvedObject
		key := o.Kind + "/" + o.Name
		if _, seen := over[key]; !seen {
			owned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ev.Namespace, Name: o.Name,
				OwnerReferences: []metav1.OwnerReference{{Kind: o.Kind, Name: o.Name, Controller: &yes}}}}
			_, _, short, ok, err := e.Client.OwnerState(ctx, owned)
			// Over: its controller has its pods now, or is gone (a Job
			// deleted, a ReplicaSet replaced): what it was refused is
			// history.
			over[key] = err == nil && ok && !short || apierrors.IsNotFound(err)
		}
		if !over[key] {
			out = append(out, ev)
		}
	}
	return out
}

// admissionDenied: a validating webhook or admission policy denied the
// pod (its words name neither the mesh nor what it adds: a dry run
// without the sidecar says whose refusal it is).
func admissionDenied(msg string) bool {
	return strings.Contains(msg, "denied request") || strings.Contains(msg, "denied the request")
}

// explainRefused explains a workload whose pods are refused (w.Events),
// with the LimitRanges of its namespace read first when a refusal cites
// one: the explanation names the one whose rule it is.
func (e *Engine) explainRefused(ctx context.Context, facts *injection.ClusterFacts, w *injection.Workload) *injection.InjectionReport {
	e.Client.ResolveLimitRanges(ctx, facts, w.Namespace, w.Events)
	return e.Mesh.Explain(facts, w)
}
