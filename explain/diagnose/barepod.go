package diagnose

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// lastApplied is the annotation kubectl apply keeps the applied manifest in.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// recreateBarePod is the command that re-creates a pod no controller
// re-creates, from the manifest it was applied with (kubectl apply keeps it
// in lastApplied), changed by a patch of patchType: "" when there is no such
// manifest, or when it lacks the annotation key the patch is about (then
// something other than the manifest set it). The live pod cannot be the
// source: it carries what the injector added, and istiod does not inject
// a pod that says it is injected already.
func recreateBarePod(p *corev1.Pod, key, patchType, patch string) string {
	raw := p.Annotations[lastApplied]
	if raw == "" {
		return ""
	}
	var m struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return ""
	}
	if _, has := m.Metadata.Annotations[key]; key != "" && !has {
		return ""
	}
	return "kubectl apply view-last-applied pod/" + p.Name + " -n " + p.Namespace + " -o json | kubectl patch --local -f - --type=" + patchType + " -p '" + patch + "' -o json | kubectl replace --force -n " + p.Namespace + " -f -" +
		"   # re-creates the pod from the manifest it was applied with, changed (a pod cannot take the change in place); change the manifest too"
}
