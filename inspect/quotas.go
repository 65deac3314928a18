package inspect

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ResourceQuotas lists the ResourceQuotas of a namespace: one LIST; the
// string says why they could not be read.
func (c *Client) ResourceQuotas(ctx context.Context, namespace string) ([]corev1.ResourceQuota, string) {
	list, err := c.Proto.CoreV1().ResourceQuotas(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, "forbidden: list resourcequotas (namespace " + namespace + ")"
		}
		return nil, "list resourcequotas (namespace " + namespace + "): " + err.Error()
	}
	return list.Items, ""
}
