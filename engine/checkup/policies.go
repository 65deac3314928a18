package checkup

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// policies are the NetworkPolicies of the namespaces diagnosed, read once,
// with their pod selectors parsed once.
type policies struct {
	byNS   map[string][]selectingPolicy
	unread string
}

type selectingPolicy struct {
	np  networkingv1.NetworkPolicy
	sel labels.Selector
}

// readPolicies lists the NetworkPolicies of namespace ("" for all): one
// LIST.
func readPolicies(ctx context.Context, c *inspect.Client, namespace string) *policies {
	list, unread := c.NetworkPolicies(ctx, namespace)
	ps := &policies{byNS: map[string][]selectingPolicy{}, unread: unread}
	for ns, nps := range list {
		for _, np := range nps {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err != nil {
				sel = labels.Nothing() // not one the apiserver admits
			}
			ps.byNS[ns] = append(ps.byNS[ns], selectingPolicy{np: np, sel: sel})
		}
	}
	return ps
}

// of puts the NetworkPolicies whose podSelector matches the pod's labels,
// in its namespace, into its facts.
func (ps *policies) of(f *diagnose.Facts, p *corev1.Pod) {
	if ps == nil || p == nil {
		return
	}
	if ps.unread != "" {
		f.NetworkPoliciesUnknown = ps.unread
		return
	}
	set := labels.Set(p.Labels)
	for _, sp := range ps.byNS[p.Namespace] {
		if sp.sel.Matches(set) {
			f.NetworkPolicies = append(f.NetworkPolicies, sp.np)
		}
	}
}
