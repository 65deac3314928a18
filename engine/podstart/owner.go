package podstart

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// Facts are what a pod's init and start checks read besides the pod and
// its startup report, read only for the pods whose checks need them, each
// once per run: its workload (diagnose.StartNeedsOwner), its namespace's
// ResourceQuotas (diagnose.NeedsQuotas), the NetworkPolicies that select
// an injected pod (one LIST per namespace, or one for the cluster with
// AllNamespaces).
func (e *Engine) Facts(ctx context.Context, p *corev1.Pod, r *startup.StartupReport) diagnose.Facts {
	var f diagnose.Facts
	if p == nil {
		return f
	}
	f.Startup = r
	if diagnose.StartNeedsOwner(p) {
		f.Owner, _ = inspect.PodOwnerFrom(ctx, p, e.owners.Reader(e.Client))
	}
	if diagnose.NeedsQuotas(&f) {
		f.Quotas, f.QuotasUnknown = e.quotas(ctx, p.Namespace)
	}
	if p.Annotations["sidecar.istio.io/status"] != "" {
		nps, unread := e.policies(ctx, p.Namespace)
		f.NetworkPoliciesUnknown = unread
		set := labels.Set(p.Labels)
		for _, np := range nps {
			if sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err == nil && sel.Matches(set) {
				f.NetworkPolicies = append(f.NetworkPolicies, np)
			}
		}
	}
	f.Startup = nil
	return f
}

// reads keeps what Facts read, by namespace.
type reads struct {
	mu       sync.Mutex
	quotas   map[string]quotaList
	policies map[string][]networkingv1.NetworkPolicy
	unread   map[string]string
	all      bool // the cluster's policies were listed at once
}

type quotaList struct {
	items   []corev1.ResourceQuota
	unknown string
}

func (e *Engine) quotas(ctx context.Context, ns string) ([]corev1.ResourceQuota, string) {
	e.read.mu.Lock()
	defer e.read.mu.Unlock()
	if e.read.quotas == nil {
		e.read.quotas = map[string]quotaList{}
	}
	l, ok := e.read.quotas[ns]
	if !ok {
		l.items, l.unknown = e.Client.ResourceQuotas(ctx, ns)
		e.read.quotas[ns] = l
	}
	return l.items, l.unknown
}

func (e *Engine) policies(ctx context.Context, ns string) ([]networkingv1.NetworkPolicy, string) {
	e.read.mu.Lock()
	defer e.read.mu.Unlock()
	if e.read.policies == nil {
		e.read.policies, e.read.unread = map[string][]networkingv1.NetworkPolicy{}, map[string]string{}
	}
	if _, ok := e.read.unread[ns]; !ok && !e.read.all {
		scope := ns
		if e.AllNamespaces {
			scope, e.read.all = "", true
		}
		list, unread := e.Client.NetworkPolicies(ctx, scope)
		for k, v := range list {
			e.read.policies[k] = v
		}
		e.read.unread[ns] = unread
		if e.read.all {
			e.read.unread[""] = unread
		}
	}
	if e.read.all {
		return e.read.policies[ns], e.read.unread[""]
	}
	return e.read.policies[ns], e.read.unread[ns]
}
