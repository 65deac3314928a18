package inject

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// ProveWithoutSidecar asks admission, for a template whose pods a platform
// policy or webhook refuses, whether the same template without its sidecar
// is admitted: one dry-run create (dryRun=All, nothing stored) labelled
// sidecar.istio.io/inject=false, so that no Istio webhook selects it.
// Admitted, the refusal is of what the injector adds, not of the pod's
// own. It needs create pods in the namespace; without it (or any other
// failure to ask) nothing is said.
func (e *Engine) ProveWithoutSidecar(ctx context.Context, r *injection.InjectionReport, tmpl *corev1.PodTemplateSpec) {
	if r == nil || r.RefusedBy == nil || tmpl == nil || r.RefusedBy.Condition {
		// A webhook's condition that fails on the pod refused it before
		// anything in it was looked at: there is nothing to prove.
		return
	}
	t := tmpl.DeepCopy()
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[istio.KeyInject] = "false"
	pr := e.dryRun(ctx, r.Namespace, strings.ToLower(r.Name), t)
	switch {
	case pr.v == nil:
	case pr.v.Refused:
		r.RefusedBy.WithoutSidecar = "refused: " + pr.v.Summary()
		e.proveOwnSettings(ctx, r, tmpl)
	default:
		r.RefusedBy.WithoutSidecar = "admitted"
		e.proveMeshSide(ctx, r, tmpl)
	}
}
