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
	// members are the pods in the mesh each Service selects, by namespace:
	// a sweep's pods as they come (seen), or, for named targets, one LIST
	// of the namespace's pods (list), read the first time a pod outside
	// the mesh needs them.
	members  map[string]diagnose.ServiceMembers
	list     func() ([]corev1.Pod, error)
	listOnce sync.Once
	listErr  string
}

// seen records a sweep's pod in the members of the Services that select it.
func (s *services) seen(p *corev1.Pod, svcs []corev1.Service) {
	if s == nil || p == nil {
		return
	}
	if s.members == nil {
		s.members = map[string]diagnose.ServiceMembers{}
	}
	m := s.members[p.Namespace]
	if m == nil {
		m = diagnose.ServiceMembers{}
		s.members[p.Namespace] = m
	}
	m.Add(p, svcs)
}

// peersOf puts into the facts of a running pod outside the mesh the pods
// in the mesh that its Services also select.
func (s *services) peersOf(f *diagnose.Facts) {
	p := f.Pod
	if s == nil || !diagnose.MixedCandidate(p, len(f.Services)) {
		return
	}
	if s.list != nil {
		s.listOnce.Do(func() {
			pods, err := s.list()
			if err != nil {
				s.listErr = err.Error()
				return
			}
			for i := range pods {
				s.seen(&pods[i], s.byNSServices(pods[i].Namespace))
			}
		})
		if s.listErr != "" {
			f.ServiceMeshedUnknown = s.listErr
			return
		}
	}
	m := s.members[p.Namespace]
	f.ServiceMeshed = diagnose.ServiceMembers{}
	for _, sv := range f.Services {
		if peers := m[sv.Name]; len(peers) > 0 {
			f.ServiceMeshed[sv.Name] = peers
		}
	}
}

// byNSServices are the Services of a namespace.
func (s *services) byNSServices(ns string) []corev1.Service {
	out := make([]corev1.Service, 0, len(s.byNS[ns]))
	for _, sv := range s.byNS[ns] {
		out = append(out, sv.svc)
	}
	return out
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
		switch {
		case sv.sel.Matches(set):
			f.Services = append(f.Services, sv.svc)
		case len(diagnose.InjectedLabelMiss(sv.svc.Spec.Selector, p)) > 0, len(diagnose.TemplateLabelMiss(sv.svc.Spec.Selector, p)) > 0:
			f.ServicesMissing = append(f.ServicesMissing, sv.svc)
		}
	}
}
