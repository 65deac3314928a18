package podstart

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// OwnerFor is the workload of a pod whose init and start checks read it
// (diagnose.StartNeedsOwner), read once per workload in the run; nil for
// any other pod, or when it cannot be read (the checks then do without).
func (e *Engine) OwnerFor(ctx context.Context, p *corev1.Pod) *diagnose.WorkloadState {
	if !diagnose.StartNeedsOwner(p) {
		return nil
	}
	w, _ := inspect.PodOwnerFrom(ctx, p, e.owners.Reader(e.Client))
	return w
}
