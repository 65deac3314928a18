package inspect

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// NetworkPolicies lists the NetworkPolicies of namespace ("" for all): one
// LIST. Each keeps its name, namespace and spec, by namespace; unread says
// why they could not be read (with the permission), "" when they were.
func (c *Client) NetworkPolicies(ctx context.Context, namespace string) (map[string][]networkingv1.NetworkPolicy, string) {
	list, err := c.Proto.NetworkingV1().NetworkPolicies(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		scope := "namespace " + namespace
		if namespace == "" {
			scope = "cluster-wide"
		}
		if apierrors.IsForbidden(err) {
			return nil, "forbidden: list networkpolicies (" + scope + ")"
		}
		return nil, "list networkpolicies (" + scope + "): " + err.Error()
	}
	out := map[string][]networkingv1.NetworkPolicy{}
	for _, np := range list.Items {
		out[np.Namespace] = append(out[np.Namespace], networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: np.Name, Namespace: np.Namespace}, Spec: np.Spec})
	}
	return out, ""
}

// ValidatingPolicies reads the cluster's ValidatingAdmissionPolicies into
// f, once, when a binding exists (one LIST): what a manifest's pods meet
// at admission. Not read, f says why.
func (c *Client) ValidatingPolicies(ctx context.Context, f *injection.ClusterFacts) {
	if len(f.PolicyBindings) == 0 || f.ValidatingPolicies != nil || f.ValidatingPoliciesUnknown != "" {
		return
	}
	list, err := c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			f.ValidatingPoliciesUnknown = "forbidden: list validatingadmissionpolicies.admissionregistration.k8s.io (cluster-wide)"
			return
		}
		f.ValidatingPoliciesUnknown = "list validatingadmissionpolicies.admissionregistration.k8s.io: " + err.Error()
		return
	}
	f.ValidatingPolicies = append([]admissionregistrationv1.ValidatingAdmissionPolicy{}, list.Items...)
}
