package checkup

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// ownerWanted says the diagnosis of a pod reads its workload's own labels
// (diagnose.CodeInjectLabelOnWorkload) and template: it has no sidecar, is
// not in ambient mode, and a workload with a pod template makes it.
func ownerWanted(r *injection.InjectionReport, p *corev1.Pod) bool {
	if p == nil || inspect.OwnerOf(p) == nil {
		return false // no workload makes it
	}
	if r != nil && diagnose.StartNeedsOwner(p) {
		return true // the fix patches what makes the pod
	}
	if p.Annotations["sidecar.istio.io/status"] != "" {
		return true // its template may override what the injector added (diagnose.CodeInjectedOverridden)
	}
	if p == nil || r == nil || r.Injected == nil || *r.Injected || r.Ambient {
		return false
	}
	// With an inject label of its own, its template's is read too: an
	// admission mutator may have set the pod's (diagnose.CodeInjectLabelChanged).
	switch o := inspect.OwnerOf(p); {
	case o == nil:
		return false
	default:
		switch o.Kind {
		case "Deployment", "StatefulSet", "DaemonSet", "Job":
			return true
		}
	}
	return false
}

// ownerIndex is the workloads of a sweep by "namespace/Kind/name".
func ownerIndex(list []inspect.Workload) map[string]*diagnose.WorkloadState {
	out := make(map[string]*diagnose.WorkloadState, len(list))
	for i := range list {
		w := &list[i].WorkloadState
		out[w.Namespace+"/"+w.Kind+"/"+w.Name] = w
	}
	return out
}

// setOwner gives an item whose pod wants it its workload, from a sweep's.
func setOwner(it *item, p *corev1.Pod, index map[string]*diagnose.WorkloadState) {
	if !ownerWanted(it.facts.Injection, p) {
		return
	}
	o := inspect.OwnerOf(p)
	it.facts.Owner = index[p.Namespace+"/"+o.Kind+"/"+o.Name]
}

// readOwners gives the items of named pods that want it their workload:
// one GET per workload (of a CronJob's Job, its CronJob's too), covered by
// FactOwner's permission; what could not be read is returned.
func (e *Engine) readOwners(ctx context.Context, items []*item) (incomplete []string, err error) {
	read := map[string]*diagnose.WorkloadState{}
	failed := map[string]bool{}
	for _, it := range items {
		p := it.pod
		if !ownerWanted(it.facts.Injection, p) {
			continue
		}
		o := inspect.OwnerOf(p)
		key := p.Namespace + "/" + o.Kind + "/" + o.Name
		if w, ok := read[key]; ok || failed[key] {
			it.facts.Owner = w
			continue
		}
		w, err := inspect.PodOwnerFrom(ctx, p, e.workload)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			failed[key] = true
			it.facts.OwnerUnknown = err.Error()
			incomplete = append(incomplete, "the labels of "+key+": "+err.Error())
			continue
		}
		read[key], it.facts.Owner = w, w
	}
	return incomplete, nil
}
