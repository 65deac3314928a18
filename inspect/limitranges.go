package inspect

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// ResolveLimitRanges reads, into f, the LimitRanges of namespace ns when
// one of events is a LimitRange's refusal (injection.CitesLimitRange):
// one LIST per namespace and run, none when no refusal cites one. What
// could not be read is kept in f.LimitRangesUnknown.
func (c *Client) ResolveLimitRanges(ctx context.Context, f *injection.ClusterFacts, ns string, events []corev1.Event) {
	if f == nil || ns == "" {
		return
	}
	if _, read := f.LimitRanges[ns]; read {
		return
	}
	if _, tried := f.LimitRangesUnknown[ns]; tried {
		return
	}
	cited := false
	for _, ev := range events {
		if injection.CitesLimitRange(ev.Message) {
			cited = true
			break
		}
	}
	if !cited {
		return
	}
	list, err := c.Proto.CoreV1().LimitRanges(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		why := "list limitranges (namespace " + ns + "): " + err.Error()
		if apierrors.IsForbidden(err) {
			why = "forbidden: the user may not list limitranges in namespace " + ns
		}
		if f.LimitRangesUnknown == nil {
			f.LimitRangesUnknown = map[string]string{}
		}
		f.LimitRangesUnknown[ns] = why
		return
	}
	if f.LimitRanges == nil {
		f.LimitRanges = map[string][]corev1.LimitRange{}
	}
	f.LimitRanges[ns] = list.Items
}
