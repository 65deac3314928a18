package injection

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// RevisionInfo is one of the mesh's control-plane revisions as the
// injection model reads it: its injector ConfigMap, the release it runs
// and where that was read, and the tags that point at it.
type RevisionInfo struct {
	Name string `json:"name"`
	// Version is the tag it runs ("" when nothing says), VersionSource
	// where it was read.
	Version       string `json:"version,omitempty"`
	VersionSource string `json:"versionSource,omitempty"`
	// Modelled says kubectl-mesh models the release it runs; null when the
	// release is not known.
	Modelled  *bool    `json:"modelled"`
	ConfigMap string   `json:"configMap"`
	Tags      []string `json:"tags,omitempty"`
}

// Revisions are the mesh's revisions, by name, with the tags (istio.io/tag
// webhook configurations) that point at each.
func Revisions(f *ClusterFacts) []RevisionInfo {
	revs := istioRevisions(f)
	tags := map[string][]string{}
	for _, c := range f.Webhooks {
		if tag := c.Labels[istio.LabelTag]; tag != "" {
			rev := c.Labels[istio.LabelRev]
			if rev == "" {
				rev = "default"
			}
			tags[rev] = append(tags[rev], tag)
		}
	}
	out := make([]RevisionInfo, 0, len(revs))
	for name, r := range revs {
		ri := RevisionInfo{Name: name, Version: r.version, VersionSource: r.versionSource, ConfigMap: r.configMap}
		if r.verKnown {
			m := r.modelled
			ri.Modelled = &m
		}
		ts := tags[name]
		sort.Strings(ts)
		for i, t := range ts {
			if i == 0 || ts[i-1] != t {
				ri.Tags = append(ri.Tags, t)
			}
		}
		out = append(out, ri)
	}
	sort.Slice(out, func(i, j int) bool { return strings.Compare(out[i].Name, out[j].Name) < 0 })
	return out
}

// ProxyGroup counts the injected pods of one revision whose istio-proxy
// runs one proxy version (the image's tag: "" when it is not a release's).
type ProxyGroup struct {
	Revision string `json:"revision"`
	Version  string `json:"version"`
	Pods     int    `json:"pods"`
}

// Proxies are a page of pods' proxies added to groups (by revision, then
// version): only pods with a sidecar count.
func Proxies(groups map[[2]string]int, pods []corev1.Pod) {
	for i := range pods {
		st := readIstioStatus(&pods[i])
		if !st.injected {
			continue
		}
		groups[[2]string{st.revision, istio.ImageTag(st.image)}]++
	}
}

// ProxyGroups are groups in order.
func ProxyGroups(groups map[[2]string]int) []ProxyGroup {
	out := make([]ProxyGroup, 0, len(groups))
	for k, n := range groups {
		out = append(out, ProxyGroup{Revision: k[0], Version: k[1], Pods: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Revision != out[j].Revision {
			return out[i].Revision < out[j].Revision
		}
		return out[i].Version < out[j].Version
	})
	return out
}
