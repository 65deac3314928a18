package inject

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// proveMeshSide asks admission, for a template refused for what the
// injector adds (the same template without the sidecar was admitted),
// which change of its annotations it admits with the sidecar: a dry-run
// create of each candidate in turn, the first admitted one injected is
// kept in r.RefusedBy.MeshSide. None admitted (or none could be asked)
// leaves it nil.
func (e *Engine) proveMeshSide(ctx context.Context, r *injection.InjectionReport, tmpl *corev1.PodTemplateSpec) {
	var first []injection.MeshSide
	if r.RefusedBy != nil {
		first = injection.MinimumCandidates(r.RefusedBy.Message)
	}
	e.proveFirst(ctx, r, tmpl, append(first, injection.MeshSideCandidates(tmpl.Annotations)...))
}

// proveOwnSettings asks admission, for a template refused with or without
// its sidecar, whether it admits the template without its own Istio
// annotations, sidecar and all (a dry-run create of each candidate in
// turn): the first admitted is kept in r.RefusedBy.MeshSide.
func (e *Engine) proveOwnSettings(ctx context.Context, r *injection.InjectionReport, tmpl *corev1.PodTemplateSpec) {
	e.proveFirst(ctx, r, tmpl, append(injection.OptOutCandidates(tmpl.Labels, tmpl.Annotations), injection.OwnSettingsCandidates(tmpl.Annotations)...))
}

// proveFirst keeps in r.RefusedBy.MeshSide the first candidate admission
// admits injected.
func (e *Engine) proveFirst(ctx context.Context, r *injection.InjectionReport, tmpl *corev1.PodTemplateSpec, candidates []injection.MeshSide) {
	for _, c := range candidates {
		t := tmpl.DeepCopy()
		t.Annotations = c.Apply(t.Annotations)
		t.Labels = c.ApplyLabels(t.Labels)
		pr := e.dryRun(ctx, r.Namespace, strings.ToLower(r.Name), t)
		switch {
		case pr.err != nil || pr.notVerified != "":
			return // admission cannot be asked: nothing is said
		case pr.v == nil || pr.v.Refused || !pr.v.Injected:
			continue
		}
		c := c
		r.RefusedBy.MeshSide = &c
		return
	}
}
