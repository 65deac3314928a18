package checkup

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// policies are the NetworkPolicies of the namespaces diagnosed, read once.
type policies struct{ set *inspect.PolicySet }

// readPolicies lists the NetworkPolicies of namespace ("" for all): one
// LIST.
func readPolicies(ctx context.Context, c *inspect.Client, namespace string) *policies {
	return &policies{set: c.PolicySet(ctx, namespace)}
}

// of puts the NetworkPolicies whose podSelector matches the pod's labels,
// in its namespace, into its facts.
func (ps *policies) of(f *diagnose.Facts, p *corev1.Pod) {
	if ps == nil || p == nil {
		return
	}
	f.NetworkPolicies, f.NetworkPoliciesUnknown = ps.set.Selecting(p)
}
