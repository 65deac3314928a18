package upgrade

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// pinnedServices adds, before the moves, a step for each Service that
// selects a relabelled workload's pods by the revision label as well as
// by their own: after the move it would select none of them (no
// endpoints). The step takes the label out of its selector, which still
// selects the pods on either revision. One LIST of Services, in scope, and
// only when a workload's pods are relabelled; what could not be read is
// returned.
func (e *Engine) pinnedServices(ctx context.Context, ns string, cands []candidate, relabels map[string]string) string {
	var moved []candidate
	for _, c := range cands {
		if _, ok := relabels[strings.ToLower(c.kind)+"/"+c.namespace+"/"+c.name]; ok && c.template != nil {
			moved = append(moved, c)
		}
	}
	if len(moved) == 0 {
		return ""
	}
	svcs, unread := e.Client.Services(ctx, ns)
	if unread != "" {
		return "the Services that select the relabelled pods: " + unread
	}
	for _, c := range moved {
		for _, s := range svcs[c.namespace] {
			v, ok := s.Spec.Selector[istio.LabelRev]
			if !ok {
				continue
			}
			rest := map[string]string{}
			for k, val := range s.Spec.Selector {
				if k != istio.LabelRev {
					rest[k] = val
				}
			}
			if len(rest) == 0 || !labels.SelectorFromSet(rest).Matches(labels.Set(c.template.Labels)) {
				continue
			}
			relabels["0service/"+s.Namespace+"/"+s.Name] = fmt.Sprintf(`kubectl patch service %s -n %s --type=json -p '[{"op":"remove","path":"/spec/selector/istio.io~1rev"}]'   # it selects %s's pods by %s=%s too: after their move it would select none; without the label it selects them on either revision`,
				s.Name, s.Namespace, strings.ToLower(c.kind)+"/"+c.name, istio.LabelRev, v)
		}
	}
	return ""
}
