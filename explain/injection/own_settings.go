package injection

import (
	"sort"
	"strings"
)

// meshPrefixes are the prefixes of the annotations a user sets on a pod
// template to tune Istio's injection (istiod reads them; a policy on them
// refuses the pod, sidecar or not).
var meshPrefixes = []string{"sidecar.istio.io/", "proxy.istio.io/", "traffic.sidecar.istio.io/", "status.sidecar.istio.io/",
	"readiness.status.sidecar.istio.io/", "inject.istio.io/", "prometheus.istio.io/"}

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
