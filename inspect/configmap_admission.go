package inspect

import (
	"context"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
)

// vapBinding: the binding a ValidatingAdmissionPolicy's refusal names.
var vapBinding = regexp.MustCompile(`ValidatingAdmissionPolicy '[^']+' with binding '([^']+)'`)

// ConfigMapAdmissions asks admission, for each cluster-written ConfigMap
// a pod cannot mount, whether it may be created in the namespace now: a
// dry-run create (nothing stored) of it as its writer makes it, and the
// binding a refusal names (one GET). One that exists now is admitted.
func (c *Client) ConfigMapAdmissions(ctx context.Context, ns string, names []string) []diagnose.ConfigMapAdmission {
	var out []diagnose.ConfigMapAdmission
	for _, name := range names {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"ca.crt": "-"}}
		if name == "istio-ca-root-cert" {
			cm.Labels = map[string]string{"istio.io/config": "true"}
			cm.Data = map[string]string{"root-cert.pem": "-"}
		}
		a := diagnose.ConfigMapAdmission{Name: name}
		_, err := c.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
		case apierrors.IsForbidden(err) && !vapBinding.MatchString(err.Error()) && !isAdmissionDenial(err):
			a.Unknown = "forbidden: the user may not create configmaps in namespace " + ns
		case vapBinding.MatchString(err.Error()) || isAdmissionDenial(err):
			a.Refusal = err.Error()
			if m := vapBinding.FindStringSubmatch(err.Error()); m != nil {
				if b, err := c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, m[1], metav1.GetOptions{}); err == nil {
					a.Binding = b
				}
			}
		default:
			a.Unknown = err.Error()
		}
		out = append(out, a)
	}
	return out
}

// isAdmissionDenial: a webhook denied the request (or could not be
// called).
func isAdmissionDenial(err error) bool {
	return webhookDenial.MatchString(err.Error())
}

// webhookDenial: a webhook's denial, or a call to one that failed.
var webhookDenial = regexp.MustCompile(`admission webhook "[^"]+" denied the request|failed calling webhook`)
