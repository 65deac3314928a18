package podstart

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// Facts are what a pod's init and start checks read besides the pod and
// its startup report, read only for the pods whose checks need them, each
// once per run: its workload (diagnose.StartNeedsOwner), its namespace's
// ResourceQuotas (diagnose.NeedsQuotas), the nodes' room
// (diagnose.NeedsNodeRoom: one LIST of the cluster's pods), the NetworkPolicies that select
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
		f.Quotas, f.QuotasUnknown = e.read.quotas.Of(ctx, e.Client, p.Namespace)
		f.ConfigMapAdmissions = e.Client.ConfigMapAdmissions(ctx, p.Namespace, diagnose.MissingClusterConfigMaps(&f))
	}
	if diagnose.NeedsNodeRoom(p) {
		f.NodeRoom = e.read.rooms.Of(ctx, e.Client)
	}
	if diagnose.StartNeedsServices(p) {
		f.Services, f.ServicesUnknown = e.services(ctx, p)
	}
	if p.Annotations["sidecar.istio.io/status"] != "" {
		f.NetworkPolicies, f.NetworkPoliciesUnknown = e.policies(ctx, p.Namespace).Selecting(p)
	}
	f.Startup = nil
	return f
}

// reads keeps what Facts read, by namespace.
type reads struct {
	quotas   inspect.QuotaCache
	rooms    inspect.NodeRoomCache
	mu       sync.Mutex
	policies map[string]*inspect.PolicySet // by namespace; "" the cluster's
	services map[string]serviceList        // by namespace
}

// serviceList is a namespace's Services, or why they could not be read.
type serviceList struct {
	items  []corev1.Service
	unread string
}

// services are the Services that select the pod: one LIST of its
// namespace, once per run.
func (e *Engine) services(ctx context.Context, p *corev1.Pod) ([]corev1.Service, string) {
	e.read.mu.Lock()
	defer e.read.mu.Unlock()
	if e.read.services == nil {
		e.read.services = map[string]serviceList{}
	}
	l, ok := e.read.services[p.Namespace]
	if !ok {
		byNS, unread := e.Client.Services(ctx, p.Namespace)
		l = serviceList{items: byNS[p.Namespace], unread: unread}
		e.read.services[p.Namespace] = l
	}
	if l.unread != "" {
		return nil, l.unread
	}
	var out []corev1.Service
	for _, s := range l.items {
		if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.Labels)) {
			out = append(out, s)
		}
	}
	return out, ""
}

// policies is the NetworkPolicies of namespace ns: one LIST of it, or one
// of the cluster's with AllNamespaces, once per run.
func (e *Engine) policies(ctx context.Context, ns string) *inspect.PolicySet {
	e.read.mu.Lock()
	defer e.read.mu.Unlock()
	if e.read.policies == nil {
		e.read.policies = map[string]*inspect.PolicySet{}
	}
	scope := ns
	if e.AllNamespaces {
		scope = ""
	}
	ps, ok := e.read.policies[scope]
	if !ok {
		ps = e.Client.PolicySet(ctx, scope)
		e.read.policies[scope] = ps
	}
	return ps
}
