package checkup

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// services are the Services of the namespaces diagnosed, read once, with
// their selectors parsed once; and the cluster's ranges, when set.
type services struct {
	byNS   map[string][]selecting
	unread string
	ranges *clusterRanges
	// policies are the NetworkPolicies of the same namespaces.
	policies *policies
	// quotas are the ResourceQuotas of the namespaces that need them.
	quotas *quotas
}

// clusterRanges are the cluster's pod and Service ranges, read once per
// run, when the first pod that needs them comes (most runs have none: no
// pod narrows its outbound capture).
type clusterRanges struct {
	once    sync.Once
	read    func() ([]diagnose.ClusterRange, string, []string)
	ranges  []diagnose.ClusterRange
	unknown string
	needs   []string
}

// clusterRanges is the run's reader of the cluster's ranges.
func (e *Engine) clusterRanges(ctx context.Context) *clusterRanges {
	return &clusterRanges{read: func() ([]diagnose.ClusterRange, string, []string) { return e.Client.ClusterRanges(ctx) }}
}

// of puts the cluster's ranges into the facts of a pod that needs them.
func (r *clusterRanges) of(f *diagnose.Facts, p *corev1.Pod) {
	if r == nil || !diagnose.NeedsClusterRanges(p) {
		return
	}
	r.once.Do(func() { r.ranges, r.unknown, r.needs = r.read() })
	f.ClusterRanges, f.ClusterRangesUnknown, f.ClusterRangesNeeds = r.ranges, r.unknown, r.needs
}

type selecting struct {
	svc corev1.Service
	sel labels.Selector
}

// readServices lists the Services of namespace ("" for all): one LIST.
func readServices(ctx context.Context, c *inspect.Client, namespace string) *services {
	list, unread := c.Services(ctx, namespace)
	s := &services{byNS: map[string][]selecting{}, unread: unread}
	for ns, svcs := range list {
		for _, svc := range svcs {
			if len(svc.Spec.Selector) == 0 {
				continue // its endpoints are its own: it selects no pod
			}
			s.byNS[ns] = append(s.byNS[ns], selecting{svc: svc, sel: labels.SelectorFromSet(svc.Spec.Selector)})
		}
	}
	return s
}

// of puts the Services that select the pod into its facts.
func (s *services) of(f *diagnose.Facts, p *corev1.Pod) {
	if s == nil || p == nil {
		return
	}
	f.Pod = p
	s.ranges.of(f, p)
	s.policies.of(f, p)
	if s.unread != "" {
		f.ServicesUnknown = s.unread
		return
	}
	set := labels.Set(p.Labels)
	for _, sv := range s.byNS[p.Namespace] {
		if sv.sel.Matches(set) {
			f.Services = append(f.Services, sv.svc)
		}
	}
}
