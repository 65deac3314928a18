package diagnose

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// gatesHolding are the pod's readiness gates whose condition is not True,
// when every container is ready: what keeps it unready is then a
// controller that has not set them (a load balancer's), not the kubelet.
func gatesHolding(p *corev1.Pod) (missing, unset []string) {
	if len(p.Spec.ReadinessGates) == 0 {
		return nil, nil
	}
	for _, st := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if st.State.Running != nil && !st.Ready {
			return nil, nil
		}
	}
	for _, g := range p.Spec.ReadinessGates {
		found := false
		for _, c := range p.Status.Conditions {
			if c.Type == g.ConditionType {
				found = true
				if c.Status != corev1.ConditionTrue {
					unset = append(unset, string(g.ConditionType))
				}
			}
		}
		if !found {
			missing = append(missing, string(g.ConditionType))
		}
	}
	return missing, unset
}

// readinessGateFinding says the pod waits on readiness gates nothing sets,
// and the fix: the template without them, a choice.
func (in *Input) readinessGateFinding(f *Finding) bool {
	missing, unset := gatesHolding(in.Pod)
	if len(missing)+len(unset) == 0 {
		return false
	}
	all := append(append([]string(nil), missing...), unset...)
	ev := "every container is ready, and the pod waits on its readiness gates: " + strings.Join(all, ", ")
	if len(missing) > 0 {
		ev += ": no controller has set the condition " + strings.Join(missing, ", ") + " (a load balancer's controller sets such a gate's condition; not the kubelet, not the mesh)"
	} else {
		ev += ": their conditions are not True (set by their controller, not the kubelet or the mesh)"
	}
	f.Evidence += "; " + ev
	if fix := in.templateSpecFix(`{"spec":{"readinessGates":null}}`); fix != "" {
		f.Fix = firstLineNote(fix, "a choice: the template without readiness gates, when nothing in this cluster sets them; or install (or repair) the controller that sets "+all[0])
	}
	return true
}
