package diagnose

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// finalizerGrace is how long past its deletion deadline a pod's finalizers
// may hold it before the controller that set them is taken to be gone.
const finalizerGrace = 30 * time.Second

// heldByFinalizers is the start row of a pod deleted a while ago that its
// finalizers keep (ok false when it is not): whatever set them has not
// removed them, so the pod stays, and a StatefulSet makes no new pod of
// its name. Nothing of the mesh sets finalizers on pods.
func (in *Input) heldByFinalizers() (status, evidence, fix string, ok bool) {
	p := in.Pod
	if p == nil || p.DeletionTimestamp == nil || len(p.Finalizers) == 0 {
		return "", "", "", false
	}
	past := in.Startup.Now.Sub(p.DeletionTimestamp.Time)
	if past < finalizerGrace {
		return "", "", "", false
	}
	ev := "the pod was deleted and its grace period ended " + past.Round(time.Second).String() + " ago, but its finalizers " +
		quoteList(p.Finalizers) + " keep it: whatever set them (a controller, an operator) has not removed them"
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "StatefulSet" {
		ev += "; statefulset/" + ref.Name + " makes no new " + p.Name + " until it is gone"
	}
	fix = "kubectl patch pod " + p.Name + " -n " + p.Namespace + ` --type=json -p '[{"op":"remove","path":"/metadata/finalizers"}]'` +
		"   # a finalizer is its controller's promise to clean up first: remove it once that controller is gone or has nothing left to do"
	return Fail, ev, fix, true
}

// gated is the start row of a pod the scheduler does not consider yet: its
// scheduling gates are still on it (ok false when it has none). A gate
// comes off only by a client that removes it; one its workload's template
// carries is on every pod it makes.
func (in *Input) gated(age time.Duration) (status, evidence, fix string, ok bool) {
	p := in.Pod
	if p == nil || len(p.Spec.SchedulingGates) == 0 {
		return "", "", "", false
	}
	var names []string
	for _, g := range p.Spec.SchedulingGates {
		names = append(names, g.Name)
	}
	ev := "the pod waits on its scheduling gates " + quoteList(names) + ": the scheduler does not consider it until every one is removed"
	if age < StartGrace {
		return Warning, ev, "kubectl get pod " + p.Name + " -n " + p.Namespace + " -o jsonpath='{.spec.schedulingGates}'", true
	}
	ev += ", and none has been in " + age.Round(time.Second).String()
	liftPod := "kubectl patch pod " + p.Name + " -n " + p.Namespace + ` --type=json -p '[{"op":"remove","path":"/spec/schedulingGates"}]'`
	owner := templateOwner(p)
	if o := in.Owner; o != nil && o.Template != nil && owner != "" && carriesGates(o.Template, names) {
		ev += "; its pod template (" + owner + ") carries them, so every pod it makes starts gated"
		fix = "kubectl patch " + owner + " -n " + p.Namespace + ` --type=json -p '[{"op":"remove","path":"/spec/template/spec/schedulingGates"}]'` +
			"   # unless a controller of " + quoteList(names) + " is meant to lift them (then it is the one not working)"
		switch {
		case strings.HasPrefix(owner, "deployment/"):
			// The rollout replaces the gated pod.
		case strings.HasPrefix(owner, "job/"):
			// A Job's template cannot change: lift the pod's own gates.
			fix = liftPod + "   # a Job's template cannot be changed: its next pods start gated again unless a controller of " + quoteList(names) + " lifts them"
		default:
			fix += "\n" + liftPod + "   # this pod's own: its controller replaces it only once it runs"
		}
		return Fail, ev, fix, true
	}
	ev += "; something added them when the pod was created (a webhook or policy: the template does not carry them), for a controller to lift when it admits the pod"
	return Fail, ev, liftPod + "   # lifts them by hand; if a queue or controller of " + quoteList(names) + " should admit the pod, it is the one to look at", true
}

// carriesGates: the template carries every gate named.
func carriesGates(t *corev1.PodTemplateSpec, names []string) bool {
	has := map[string]bool{}
	for _, g := range t.Spec.SchedulingGates {
		has[g.Name] = true
	}
	for _, n := range names {
		if !has[n] {
			return false
		}
	}
	return true
}
