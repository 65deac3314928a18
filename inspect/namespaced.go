package inspect

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// QuotaCache reads a namespace's ResourceQuotas once per run, for every
// engine that needs them (a pod whose checks read them).
type QuotaCache struct {
	mu   sync.Mutex
	byNS map[string]quotaList
}

type quotaList struct {
	items   []corev1.ResourceQuota
	unknown string
}

// Of is namespace ns's ResourceQuotas, read with c the first time; unknown
// says why they could not be read.
func (q *QuotaCache) Of(ctx context.Context, c *Client, ns string) ([]corev1.ResourceQuota, string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.byNS == nil {
		q.byNS = map[string]quotaList{}
	}
	l, ok := q.byNS[ns]
	if !ok {
		l.items, l.unknown = c.ResourceQuotas(ctx, ns)
		q.byNS[ns] = l
	}
	return l.items, l.unknown
}

// PolicySet is the NetworkPolicies of a namespace (or of the cluster) as
// one LIST read them, their pod selectors parsed once.
type PolicySet struct {
	byNS   map[string][]selectingPolicy
	unread string
}

type selectingPolicy struct {
	np  networkingv1.NetworkPolicy
	sel labels.Selector
}

// PolicySet lists the NetworkPolicies of namespace ("" for all): one LIST.
func (c *Client) PolicySet(ctx context.Context, namespace string) *PolicySet {
	list, unread := c.NetworkPolicies(ctx, namespace)
	ps := &PolicySet{byNS: map[string][]selectingPolicy{}, unread: unread}
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

// Selecting are the NetworkPolicies of the pod's namespace whose
// podSelector matches its labels; unread says why they could not be read.
func (ps *PolicySet) Selecting(p *corev1.Pod) (out []networkingv1.NetworkPolicy, unread string) {
	if ps == nil || p == nil {
		return nil, ""
	}
	if ps.unread != "" {
		return nil, ps.unread
	}
	set := labels.Set(p.Labels)
	for _, sp := range ps.byNS[p.Namespace] {
		if sp.sel.Matches(set) {
			out = append(out, sp.np)
		}
	}
	return out, ""
}
