package inject

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// InjectionTemplate is, for a pod that carries a label or annotation that
// decides injection, the template its controller made it from (diagnose
// compares the two: an admission mutator may have set them); nil for any
// other pod, or when it cannot be read; and for a Job's injected pod, its
// Job (whose own labels may hold a misplaced opt-out). One GET per
// controller, for those pods only.
func (e *Engine) InjectionTemplate(ctx context.Context, p *corev1.Pod) *diagnose.WorkloadState {
	switch {
	case p == nil:
		return nil
	case p.Annotations["sidecar.istio.io/status"] != "":
		if !diagnose.OptOutNeedsOwner(p) {
			return nil // an injected pod's labels did not keep it out
		}
		// A Job's injected pod: its Job's own labels may hold the opt-out
		// its template lacks (diagnose.CodeOptOutOnWorkload).
	case !diagnose.HasInjectionKeys(p):
		return nil
	}
	o := inspect.OwnerOf(p)
	if o == nil {
		return nil
	}
	// The workload diagnose reads for the same pod (a Deployment, not its
	// ReplicaSet): one answer, the same template.
	key := p.Namespace + "/" + o.Kind + "/" + o.Name
	if w, ok := e.templates.Load(key); ok {
		return w.(*diagnose.WorkloadState)
	}
	w, err := inspect.PodOwnerFrom(ctx, p, e.workloads.Reader(e.Client))
	if err != nil || w == nil || w.Template == nil {
		w = nil
	}
	e.templates.Store(key, w)
	return w
}

// keepLive keeps the pod a report of a named target was made from, so
// that what diagnoses the report need not read it again.
func (e *Engine) keepLive(r *injection.InjectionReport, p *corev1.Pod) {
	e.live.Store(r, p.DeepCopy())
}

// LivePod is the pod the report was made from, when it was kept (a named
// target's pods), else nil.
func (e *Engine) LivePod(r *injection.InjectionReport) *corev1.Pod {
	if p, ok := e.live.Load(r); ok {
		return p.(*corev1.Pod)
	}
	return nil
}

// LivePods are the pods the reports were made from, in their order, when
// every one was kept as it was read (nil otherwise).
func (e *Engine) LivePods(reports []*injection.InjectionReport) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(reports))
	for _, r := range reports {
		p, ok := e.live.Load(r)
		if !ok {
			return nil
		}
		out = append(out, p.(*corev1.Pod))
	}
	return out
}
