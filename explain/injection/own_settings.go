package injection

import (
	"sort"
	"strconv"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// meshPrefixes are the prefixes of the annotations a user sets on a pod
// template to tune Istio's injection (istiod reads them; a policy on them
// refuses the pod, sidecar or not).
var meshPrefixes = []string{"sidecar.istio.io/", "proxy.istio.io/", "traffic.sidecar.istio.io/", "status.sidecar.istio.io/",
	"readiness.status.sidecar.istio.io/", "inject.istio.io/", "prometheus.istio.io/"}

// OptOutCandidates is, for a template that opts its pods out of injection
// (sidecar.istio.io/inject "false", as a label or an annotation), the
// change that takes the opt-out off: a policy that refuses the pods with
// and without their sidecar may be one that asks for the sidecar.
func OptOutCandidates(labels, annotations map[string]string) []MeshSide {
	ms := MeshSide{Set: map[string]string{}, Labels: map[string]string{}}
	var said []string
	if v, ok := labels[istio.KeyInject]; ok && v != "true" {
		ms.Labels[istio.KeyInject] = ""
		said = append(said, "label "+istio.KeyInject+"="+strconv.Quote(v))
	}
	if v, ok := annotations[istio.KeyInject]; ok && v != "true" {
		ms.Set[istio.KeyInject] = ""
		said = append(said, "annotation "+istio.KeyInject+"="+strconv.Quote(v))
	}
	if len(said) == 0 {
		return nil
	}
	ms.What = "the template's opt-out from the mesh (its " + strings.Join(said, " and ") + "): its pods then get the sidecar"
	return []MeshSide{ms}
}

// OwnSettingsCandidates are the changes of a template's annotations that
// take its own Istio settings away, for a template admission refuses with
// or without its sidecar (the policy is about those settings, then, not
// about what the injector adds): each annotation alone (at most four), then
// all of them; each is asked of admission, sidecar and all.
func OwnSettingsCandidates(a map[string]string) []MeshSide {
	var keys []string
	for k := range a {
		for _, p := range meshPrefixes {
			if strings.HasPrefix(k, p) {
				keys = append(keys, k)
				break
			}
		}
	}
	sort.Strings(keys)
	var out []MeshSide
	if len(keys) <= 4 {
		for _, k := range keys {
			out = append(out, MeshSide{Set: map[string]string{k: ""},
				What: "the template's own annotation " + k + " (the injector's default instead)"})
		}
	}
	if len(keys) > 1 {
		all := map[string]string{}
		for _, k := range keys {
			all[k] = ""
		}
		out = append(out, MeshSide{Set: all, What: "the template's own Istio annotations (" + strings.Join(keys, ", ") + "; the injector's defaults instead)"})
	}
	return out
}
