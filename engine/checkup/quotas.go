package checkup

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
)

// quotas are the ResourceQuotas of the namespaces whose pods need them
// (diagnose.NeedsQuotas: most runs have none), each namespace read once.
type quotas struct {
	read func(ns string) ([]corev1.ResourceQuota, string)
	mu   sync.Mutex
	byNS map[string]quotaList
}

type quotaList struct {
	items   []corev1.ResourceQuota
	unknown string
}

// quotas is the run's reader of namespaces' ResourceQuotas.
func (e *Engine) quotas(ctx context.Context) *quotas {
	return &quotas{read: func(ns string) ([]corev1.ResourceQuota, string) { return e.Client.ResourceQuotas(ctx, ns) }, byNS: map[string]quotaList{}}
}

// of puts the ResourceQuotas of the pod's namespace into facts that need
// them.
func (q *quotas) of(f *diagnose.Facts, p *corev1.Pod) {
	if q == nil || p == nil || !diagnose.NeedsQuotas(f) {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	l, ok := q.byNS[p.Namespace]
	if !ok {
		l.items, l.unknown = q.read(p.Namespace)
		q.byNS[p.Namespace] = l
	}
	f.Quotas, f.QuotasUnknown = l.items, l.unknown
}
