package injection

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// sidecarKind is how a revision adds the proxy, and what decided it.
type sidecarKind struct {
	// kind is "native", "classic", or "" when a fact it depends on is unknown.
	kind string
	// why is the deciding setting, for the "sidecar kind" row.
	why string
	// nodes, when node versions decided it: the node(s) that did, with their
	// kubelet versions, for the "node versions" row.
	nodes string
}

// kindOf names a sidecar kind: "native" or "classic".
func kindOf(native bool) string {
	if native {
		return "native"
	}
	return "classic"
}

// nativeSidecar predicts whether revision r adds the proxy as a native
// sidecar, by the rules of its Istio release (istio.ReleaseDefaults: the
// ENABLE_NATIVE_SIDECARS default, whether "auto" exists and the kubelet it
// needs, what the pod annotation sidecar.istio.io/nativeSidecar does). For a
// revision whose release is not modelled (unknown, or outside the table),
// the answer is given only when every modelled release gives the same;
// otherwise the kind is unknown, and the row says why.
func nativeSidecar(f *ClusterFacts, r *istioRevision, w *Workload) sidecarKind {
	if r.modelled {
		return nativeSidecarIn(f, r, w, r.release, "Istio "+r.release.Minor)
	}
	rels := istio.Releases()
	kinds := make([]sidecarKind, len(rels))
	agree := true
	for i, rel := range rels {
		kinds[i] = nativeSidecarIn(f, r, w, rel, "Istio "+rel.Minor)
		agree = agree && kinds[i].kind != "" && kinds[i].kind == kinds[0].kind
	}
	last := kinds[len(kinds)-1]
	if agree {
		return sidecarKind{kind: last.kind, nodes: last.nodes,
			why: r.unmodelled + "; every modelled release (" + istio.ModelledRange() + ") adds a " + last.kind + " sidecar here (" + rels[len(rels)-1].Minor + ": " + last.why + ")"}
	}
	// Which releases give what, in runs: "1.20–1.23: classic; 1.24–1.32: native".
	var runs []string
	for i := 0; i < len(kinds); {
		j := i
		for j+1 < len(kinds) && kinds[j+1].kind == kinds[i].kind {
			j++
		}
		span := rels[i].Minor
		if j > i {
			span += "–" + rels[j].Minor
		}
		k := kinds[i].kind
		if k == "" {
			k = "unknown"
		}
		runs = append(runs, span+": "+k)
		i = j + 1
	}
	return sidecarKind{why: r.unmodelled + "; the sidecar kind depends on the release here (" + strings.Join(runs, "; ") + ")"}
}

// nativeSidecarIn is nativeSidecar by the rules of release rel (named
// release in the rows). In auto mode istiod looks at Node objects: the
// pod's node when it is bound to one that exists, else every node, each of
// whose kubelet must be new enough (a version it cannot parse counts as
// older; no node at all means classic).
func nativeSidecarIn(f *ClusterFacts, r *istioRevision, w *Workload, rel istio.ReleaseDefaults, release string) sidecarKind {
	annotation := ""
	if v, ok := w.Annotations[istio.AnnotationNativeSidecar]; ok {
		set := "pod annotation " + istio.AnnotationNativeSidecar + "=" + quote(v)
		odd := v != "true" && v != "false"
		switch rel.NativeAnnotation {
		case istio.NativeAnnotationTrueOnly:
			if odd {
				set += " (" + release + " reads only \"true\" as native)"
			}
			return sidecarKind{kind: kindOf(v == "true"), why: set}
		case istio.NativeAnnotationNotFalse:
			if v != "" {
				if odd {
					set += " (" + release + " reads any value but \"false\" as native)"
				}
				return sidecarKind{kind: kindOf(v != "false"), why: set}
			}
			annotation = set + " is empty: the mode decides; "
		default:
			annotation = set + " is not read by " + release + " (istiod reads it from 1.24); "
		}
	}
	mode, modeFrom := "", ""
	if v, ok := r.values.Pilot.Env["ENABLE_NATIVE_SIDECARS"]; ok {
		mode = fmt.Sprint(v)
	}
	if mode == "" {
		mode, modeFrom = rel.NativeSidecars, " (the default of "+release+")"
	}
	switch {
	case mode == "true", mode == "false":
		return sidecarKind{kind: kindOf(mode == "true"), why: annotation + "ENABLE_NATIVE_SIDECARS=" + mode + modeFrom}
	case mode == "auto" && !rel.NativeSidecarsAuto:
		return sidecarKind{kind: "classic", why: annotation + "ENABLE_NATIVE_SIDECARS=auto: " + release + " has no auto mode (only \"true\" turns native sidecars on)"}
	case mode != "auto":
		return sidecarKind{kind: "classic", why: annotation + "ENABLE_NATIVE_SIDECARS=" + quote(mode) + ": not a value istiod knows (\"true\", \"false\" or \"auto\"): native sidecars off"}
	}
	auto := annotation + "ENABLE_NATIVE_SIDECARS=auto" + modeFrom
	minKubelet := fmt.Sprintf("1.%d", rel.NativeMinKubelet)
	if why, unknown := f.Unknown[FactNodes]; unknown {
		return sidecarKind{why: auto + " decides from the nodes' kubelet versions, which could not be read (" + why + ")"}
	}
	names := make([]string, 0, len(f.KubeletVersions))
	for n := range f.KubeletVersions {
		names = append(names, n)
	}
	sort.Strings(names)
	// A pod bound to a node when it is created is decided by that node. A live
	// pod that a controller re-creates was placed by the scheduler after
	// admission: its replacement arrives unbound, and every node decides.
	nodeName := w.Spec.NodeName
	if w.Pod != nil && w.Owner != nil {
		nodeName = ""
	}
	if _, bound := f.KubeletVersions[nodeName]; bound && nodeName != "" {
		names = []string{nodeName}
	}
	if len(names) == 0 {
		return sidecarKind{kind: "classic", why: auto + " and the cluster has no node: istiod adds a classic sidecar", nodes: "no node"}
	}
	var old []string
	for _, n := range names {
		v := f.KubeletVersions[n]
		if pv, err := version.ParseGeneric(v); err != nil {
			old = append(old, n+" "+quoteIfOdd(v)+" (not a version: counts as below "+minKubelet+")")
		} else if pv.Major() == 1 && pv.Minor() < uint(rel.NativeMinKubelet) {
			old = append(old, n+" "+v+" (below "+minKubelet+")")
		}
	}
	scope := "every node"
	if len(names) == 1 && nodeName != "" {
		scope = "the pod's node"
	}
	if len(old) > 0 {
		nodes := listSome(old, 3)
		return sidecarKind{kind: "classic", why: auto + ": " + scope + " must run kubelet " + minKubelet + " or newer: " + nodes, nodes: nodes}
	}
	var all []string
	for _, n := range names {
		all = append(all, n+" "+f.KubeletVersions[n])
	}
	return sidecarKind{kind: "native", why: auto + ": " + scope + " runs kubelet " + minKubelet + " or newer",
		nodes: listSome(all, 3) + ": " + minKubelet + " or newer"}
}
