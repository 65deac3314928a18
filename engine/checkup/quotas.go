package checkup

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// quotas are the ResourceQuotas of the namespaces whose pods need them
// (diagnose.NeedsQuotas: most runs have none), each namespace read once;
// and the nodes' room, for the pods that wait for it
// (diagnose.NeedsNodeRoom), read once a run.
type quotas struct {
	read  func(ns string) ([]corev1.ResourceQuota, string)
	cache inspect.QuotaCache
	room  func() diagnose.NodeRoom
	rooms inspect.NodeRoomCache
	// admit asks admission about the cluster's ConfigMaps a pod lacks.
	admit func(ns string, names []string) []diagnose.ConfigMapAdmission
}

// quotas is the run's reader of namespaces' ResourceQuotas.
func (e *Engine) quotas(ctx context.Context) *quotas {
	q := &quotas{}
	q.read = func(ns string) ([]corev1.ResourceQuota, string) { return q.cache.Of(ctx, e.Client, ns) }
	q.room = func() diagnose.NodeRoom { return q.rooms.Of(ctx, e.Client) }
	q.admit = func(ns string, names []string) []diagnose.ConfigMapAdmission {
		return e.Client.ConfigMapAdmissions(ctx, ns, names)
	}
	return q
}

// of puts the ResourceQuotas of the pod's namespace, and the nodes' room,
// into facts that need them.
func (q *quotas) of(f *diagnose.Facts, p *corev1.Pod) {
	if q == nil || p == nil {
		return
	}
	if diagnose.NeedsNodeRoom(p) {
		f.NodeRoom = q.room()
	}
	if !diagnose.NeedsQuotas(f) {
		return
	}
	f.Quotas, f.QuotasUnknown = q.read(p.Namespace)
	f.ConfigMapAdmissions = q.admit(p.Namespace, diagnose.MissingClusterConfigMaps(f))
}
