package diagnose

import (
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stsPatch is a fix's line that changes a StatefulSet (its template).
var stsPatch = regexp.MustCompile(`(?m)^(?:sleep \d+; )?kubectl (?:patch|set \S+) (?:statefulset/|statefulset |sts/)([a-z0-9][-a-z0-9.]*)\b`)

// stuckStatefulSetPod completes the fixes that change the template of the
// StatefulSet of a pod that is not ready (round 24's 02: the proxy image
// fixed in the template, db-0 kept waiting on the old one): a StatefulSet's
// rolling update waits for that pod to become ready before it replaces it,
// so it never does; the pod is deleted after the change, and the
// StatefulSet creates it again from the new template. A pod being deleted
// already, or one that is ready, is left to the rollout.
func stuckStatefulSetPod(d *Diagnosis, f Facts) {
	p := f.Pod
	if p == nil || p.DeletionTimestamp != nil || isReady(p) {
		return
	}
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "StatefulSet" {
		return
	}
	del := "kubectl delete pod " + p.Name + " -n " + p.Namespace
	add := func(fix string) string {
		m := stsPatch.FindStringSubmatch(fix)
		if m == nil || m[1] != ref.Name || strings.Contains(fix, del) {
			return fix
		}
		return fix + "\n" + del + "   # a StatefulSet does not replace a pod that never became ready; it creates it again from the new template"
	}
	for i := range d.Findings {
		d.Findings[i].Fix = add(d.Findings[i].Fix)
	}
	for i := range d.Checks {
		d.Checks[i].Fix = add(d.Checks[i].Fix)
	}
}
