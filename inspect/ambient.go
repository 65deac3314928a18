package inspect

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// IstioCNIConfig reads istio-cni's ConfigMap (the chart labels it
// istio.io/rev; injection.AmbientConfigMap picks it), nil when there is
// none. One LIST of labelled ConfigMaps, all namespaces.
func (c *Client) IstioCNIConfig(ctx context.Context) (*corev1.ConfigMap, error) {
	l, err := c.Proto.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: istio.LabelRev})
	if err != nil {
		return nil, err
	}
	f := &injection.ClusterFacts{ConfigMaps: map[string]*corev1.ConfigMap{}}
	for i := range l.Items {
		f.ConfigMaps[l.Items[i].Namespace+"/"+l.Items[i].Name] = &l.Items[i]
	}
	cm, _ := injection.AmbientConfigMap(f)
	return cm, nil
}

// AmbientAgent is the istio-cni node agent's pod on node (nil when none
// runs there): its image holds the iptables and nft tools the agent writes
// in-pod rules with, already on the node.
func (c *Client) AmbientAgent(ctx context.Context, node string) (*corev1.Pod, error) {
	l, err := c.Proto.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: injection.AmbientCNISelector,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil || len(l.Items) == 0 {
		return nil, err
	}
	for i := range l.Items {
		if p := &l.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return p, nil
		}
	}
	return &l.Items[0], nil
}
