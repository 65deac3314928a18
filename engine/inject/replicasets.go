package inject

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// listFrom is how many ReplicaSet owners make one list of them cheaper than
// a GET each.
const listFrom = 50

// listReplicaSets reads, when the pods have many ReplicaSet owners, the
// templates of the ReplicaSets of their namespaces (of the cluster, for
// several) with one paged list, keyed "namespace/name"; nil when it is not
// worth it or the list is refused (each is then read by itself).
func (e *Engine) listReplicaSets(ctx context.Context, pods []*corev1.Pod, namespaces []string) map[string]*corev1.PodTemplateSpec {
	n := 0
	for _, p := range pods {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "ReplicaSet" {
			n++
		}
	}
	if n < listFrom {
		return nil
	}
	scope := ""
	if len(namespaces) == 1 {
		scope = namespaces[0]
	}
	out := map[string]*corev1.PodTemplateSpec{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := e.Client.Proto.AppsV1().ReplicaSets(scope).List(ctx, opts)
		if err != nil {
			return nil
		}
		for i := range list.Items {
			rs := &list.Items[i]
			out[rs.Namespace+"/"+rs.Name] = &rs.Spec.Template
		}
		if list.Continue == "" {
			return out
		}
		opts.Continue = list.Continue
	}
}
