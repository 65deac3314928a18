package checkup

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// services are the Services of the namespaces diagnosed, read once, with
// their selectors parsed once.
type services struct {
	byNS   map[string][]selecting
	unread string
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
