package diagnose

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// surgeBlocked: a pod the scheduler cannot place beside its workload's
// old pods, when the workload's rollout may only add a pod before it
// removes one (SurgesOnly): a host port the old pod holds, or a required
// anti-affinity to its own pods. The old
// pods stay until the new one is ready, so the rollout waits for ever
// (after a revision change, the restart that moves the pods to the new
// revision stops here). The fix lets the rollout remove an old pod first.
func surgeBlocked(in *Input, said string) (why, fix string) {
	w := in.Owner
	if w == nil || !w.SurgesOnly || (w.Kind != "Deployment" && w.Kind != "DaemonSet") {
		return "", ""
	}
	var blocker string
	switch {
	case strings.Contains(said, "free ports"):
		blocker = "a host port its old pod holds"
	case strings.Contains(said, "anti-affinity") && selfAntiAffinity(in.Pod):
		blocker = "its required anti-affinity to its old pod"
	default:
		return "", ""
	}
	field, plural := "strategy", "pods"
	if w.Kind == "DaemonSet" {
		field, plural = "updateStrategy", "pod on each node"
	}
	why = fmt.Sprintf("%s/%s's rollout adds a pod before it removes an old one (a surge, maxUnavailable 0), and this new pod cannot be placed: %s; the old %s stay until it is ready, so the rollout never ends",
		strings.ToLower(w.Kind), w.Name, blocker, plural)
	fix = fmt.Sprintf(`kubectl patch %s/%s -n %s --type=merge -p '{"spec":{%q:{"rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}}}'   # the rollout removes an old pod first, then its replacement takes its place (one pod fewer meanwhile); or make room for both`,
		strings.ToLower(w.Kind), w.Name, w.Namespace, field)
	return why, fix
}

// selfAntiAffinity: the pod may not run beside pods with its own labels
// (a required anti-affinity term that selects it).
func selfAntiAffinity(p *corev1.Pod) bool {
	if p == nil || p.Spec.Affinity == nil || p.Spec.Affinity.PodAntiAffinity == nil {
		return false
	}
	for _, term := range p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err == nil && term.LabelSelector != nil && !sel.Empty() && sel.Matches(labels.Set(p.Labels)) {
			return true
		}
	}
	return false
}
