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

// staleStatefulSetPod answers for a StatefulSet's pod that is not ready and
// runs an older revision than its StatefulSet's template (round 25's 04: a
// bad change rolled back, kv-1 left on it): the StatefulSet waits for it to
// become ready before it replaces it, which it never does. Its not-ready
// or failing findings say so, and their fix deletes the pod: it is created
// again from the current template. It reports whether it answered: the
// stale revision is then the cause, and no hint of an unexplained one is
// added.
func staleStatefulSetPod(d *Diagnosis, f Facts) bool {
	p, o := f.Pod, f.Owner
	if p == nil || o == nil || o.Kind != "StatefulSet" || o.UpdateRevision == "" || p.DeletionTimestamp != nil || isReady(p) {
		return false
	}
	ref := metav1.GetControllerOf(p)
	rev := p.Labels["controller-revision-hash"]
	if ref == nil || ref.Kind != "StatefulSet" || ref.Name != o.Name || rev == "" || rev == o.UpdateRevision {
		return false
	}
	why := "; the pod runs revision " + rev + " of statefulset/" + o.Name + ", whose template is now " + o.UpdateRevision + ": a StatefulSet does not replace a pod that never became ready, so it stays on the old one"
	fix := "kubectl delete pod " + p.Name + " -n " + p.Namespace + "   # created again from statefulset/" + o.Name + "'s current template (" + o.UpdateRevision + ")"
	answered := false
	for i := range d.Findings {
		if fd := &d.Findings[i]; (fd.Code == CodePodNotReady || fd.Code == CodeAppFailing) && (fd.Status == Fail || fd.Status == Warning) {
			fd.Evidence += why
			fd.Fix = fix
			answered = true
		}
	}
	for i := range d.Checks {
		if c := &d.Checks[i]; c.Code == CodePodNotReady || c.Code == CodeAppFailing {
			c.Evidence += why
			c.Fix = fix
		}
	}
	return answered
}
