package diagnose

import (
	"fmt"
	"strings"
)

// superseded says a pod is of an old ReplicaSet of its Deployment, whose
// newest (Owner.NewReplicaSet, from its Progressing condition) is another:
// the rollout in progress replaces it, so re-creating it is not the fix
// (a restart would start yet another rollout); fix waits on the rollout,
// whose newer pods' findings say what stops it, after resuming it when
// it is paused. "" otherwise.
func (in *Input) superseded() (why, fix string) {
	p, w := in.Pod, in.Owner
	if p == nil || w == nil || w.Kind != "Deployment" || w.NewReplicaSet == "" {
		return "", ""
	}
	ref := controllerOf(p)
	if ref == nil || ref.Kind != "ReplicaSet" || ref.Name == w.NewReplicaSet || !strings.HasPrefix(ref.Name, w.Name+"-") {
		return "", ""
	}
	why = fmt.Sprintf("It is a pod of ReplicaSet %s, an old one: deployment/%s's rollout to ReplicaSet %s replaces it, with the new revision's sidecar; what holds that rollout up is its new pods' finding, not this one's.",
		ref.Name, w.Name, w.NewReplicaSet)
	fix = fmt.Sprintf("kubectl rollout status deployment/%s -n %s --timeout=5m   # the rollout in progress replaces this pod; if it does not end, its new pod's finding says why", w.Name, p.Namespace)
	if w.Paused {
		// A paused rollout replaces nothing until it is resumed.
		why = strings.Replace(why, "'s rollout to", "'s rollout, paused (kubectl rollout pause), to", 1)
		fix = fmt.Sprintf("kubectl rollout resume deployment/%s -n %s   # the rollout is paused, so this pod is never replaced; resuming also rolls out any template change made while paused\n", w.Name, p.Namespace) + fix
	}
	return why, fix
}
