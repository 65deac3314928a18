package diagnose

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeOwnerGroupBypass: istio-init's owner-group settings leave an app
// container's group out of the capture.
const CodeOwnerGroupBypass = "KM-CAP-014"

func init() {
	register(&Spec{Code: CodeOwnerGroupBypass, Title: "owner-group capture lets the app's traffic out", Stage: CheckCapture, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod},
		Means:   "istio-iptables captures outbound traffic by the socket's group when istio-init's environment says so: ISTIO_OUTBOUND_OWNER_GROUPS (only these groups are captured; default *) or, with *, ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE (these groups are let out). The injector copies proxyMetadata (the pod's proxy.istio.io/config, a ProxyConfig, the mesh's) into that environment. An app container whose group is left out sends every outbound connection past the proxy: no mTLS, no policy, no telemetry.",
		Detects: "On a pod with a sidecar and istio-init: those two variables in istio-init's env, against each app container's group (its runAsGroup, else the pod's). A group left out fails; a group the spec does not set is the image's, root's (0) unless the image's user says otherwise: a warning when 0 is left out. Groups given by name are compared by name only (istio-init resolves them in its own image).",
		Fixes:   "The pod's proxy.istio.io/config without the owner-group settings (a patch of the template, the rest of it kept); when a ProxyConfig sets them, remove them there. A choice when the setting is meant: run the app with a group that is captured.",
		Source:  "istio-iptables (ISTIO_OUTBOUND_OWNER_GROUPS, ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE: the owner-group filter); Istio's injection template (proxyMetadata into istio-init's env)",
		Planted: "a StatefulSet whose proxy.istio.io/config sets proxyMetadata ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE=0 and whose app sets no group (root's)",
		run:     ownerGroupBypass})
}

// ownerGroupFilter is istio-iptables' reading of the two variables: the
// groups captured (except false) or let out (except true).
type ownerGroupFilter struct {
	except bool
	groups []string
	said   string // the variable and its value
}

// initOwnerGroups reads the filter from istio-init's env; ok false when it
// captures every group (the default).
func initOwnerGroups(p *corev1.Pod) (ownerGroupFilter, bool) {
	env := func(name string) string { v, _ := initEnv(p, name); return v }
	split := func(v string) []string {
		var out []string
		for _, g := range strings.Split(v, ",") {
			if g = strings.TrimSpace(g); g != "" {
				out = append(out, g)
			}
		}
		return out
	}
	include, exclude := ownerGroupVars[0], ownerGroupVars[1]
	if v := env(include); v != "" && v != "*" {
		return ownerGroupFilter{groups: split(v), said: fmt.Sprintf("%s=%q (only these groups' traffic is captured)", include, v)}, true
	}
	if v := env(exclude); v != "" {
		return ownerGroupFilter{except: true, groups: split(v), said: fmt.Sprintf("%s=%q (these groups' traffic is let out)", exclude, v)}, true
	}
	return ownerGroupFilter{}, false
}

// leftOut says whether the filter leaves group gid out of the capture;
// known is false when a group name in the list could be it (istio-init
// resolves names in its own image, not here).
func (f ownerGroupFilter) leftOut(gid string) (out, known bool) {
	hit, named := false, false
	for _, g := range f.groups {
		if g == gid || g == "root" && gid == "0" {
			hit = true
			continue
		}
		if _, err := strconv.Atoi(g); err != nil && g != "root" {
			named = true
		}
	}
	if f.except {
		return hit, hit || !named
	}
	return !hit, hit || !named
}

func ownerGroupBypass(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil || p.Annotations[istio.AnnotationInterceptionMode] == "NONE" {
		return nil
	}
	f, ok := initOwnerGroups(p)
	if !ok {
		return nil
	}
	var sure, likely []string
	for _, c := range appContainers(p) {
		gid, fromPod := runAsGroup(p, c)
		from := "its runAsGroup"
		if fromPod {
			from = "the pod's runAsGroup"
		}
		assumed := gid == ""
		if assumed {
			gid, from = "0", "no runAsGroup in the spec: its image's group, root's unless the image's user has another"
		}
		out, known := f.leftOut(gid)
		if !out || !known {
			continue
		}
		what := fmt.Sprintf("container %s runs as group %s (%s)", c.Name, gid, from)
		if assumed {
			likely = append(likely, what)
		} else {
			sure = append(sure, what)
		}
	}
	if len(sure)+len(likely) == 0 {
		return nil
	}
	_, fix := ownerGroups(p)
	fd := Finding{Mesh: "istio-init's " + f.said, Fix: fix,
		Evidence: "istio-init's environment sets " + f.said + " (from proxyMetadata): " + strings.Join(slices.Concat(sure, likely), "; ") + ", which that leaves out: its outbound connections bypass the proxy (no mTLS, no policy, no telemetry)"}
	if len(sure) == 0 {
		fd.Status = Warning
	}
	return []Finding{fd}
}
