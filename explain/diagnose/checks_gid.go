package diagnose

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeProxyGID: an app container runs as the proxy's group.
const CodeProxyGID = "KM-CAP-009"

func init() {
	register(&Spec{Code: CodeProxyGID, Title: "app runs as the proxy's gid 1337", Stage: CheckCapture, Kind: Static, Status: Warning,
		Reads:   []Fact{FactPod},
		Means:   "An app container runs with group 1337, the proxy's: istio-iptables lets the traffic of that gid through uncaptured (-m owner --gid-owner 1337 -j RETURN) as it does the proxy's uid, so the app's outbound traffic bypasses the proxy (no mTLS, no policy, no telemetry). istioctl analyze's IST0144 looks at the uid only.",
		Detects: "The app containers' effective runAsGroup (the container's, else the pod's) on a pod with a sidecar, or one that is to get one; Istio's own containers run as 1337 by design and are left out. User init containers are left out too: running one as 1337 is Istio's documented way to let it reach the network before the proxy runs.",
		Fixes:   "A kubectl patch of the workload's template that removes runAsGroup 1337 where it is set (the container's, or the pod's): a strategic merge by container name.",
		Source:  "istio-iptables' capture rules (the proxy's uid and gid are exempt); Istio docs, application requirements (application UIDs)",
		Planted: "a sidecar pod whose app container has securityContext.runAsGroup 1337",
		run:     proxyGID})
}

// gidHit is an app container that runs as the proxy's group, and where
// its runAsGroup is set.
type gidHit struct {
	container string
	onPod     bool
}

func proxyGID(in *Input) []Finding {
	p := in.Pod
	if p == nil || !in.injected() && (in.Injection == nil || !in.Injection.IsExpected()) {
		return nil
	}
	if p.Annotations[istio.AnnotationInterceptionMode] == "NONE" {
		return nil // no capture rules: nothing to bypass
	}
	gid := istio.ProxyGID
	var hits []gidHit
	for _, c := range appContainers(p) {
		if g, fromPod := runAsGroup(p, c); g == gid {
			hits = append(hits, gidHit{container: c.Name, onPod: fromPod})
		}
	}
	if len(hits) == 0 {
		return nil
	}
	var said, own []string
	onPod := false
	for _, h := range hits {
		if h.onPod {
			onPod = true
			said = append(said, "container "+h.container+" (the pod's securityContext.runAsGroup, which it inherits)")
		} else {
			own = append(own, h.container)
			said = append(said, "container "+h.container+" (its own securityContext.runAsGroup)")
		}
	}
	ev := quoteList(said) + " runs as gid " + gid + ", the proxy's: istio-iptables lets that gid's traffic through uncaptured (--gid-owner " + gid + " -j RETURN), so its outbound traffic bypasses the proxy"
	return []Finding{{Evidence: ev, Fix: gidFix(p, own, onPod)}}
}

// runAsGroup is the group container c of p runs as by their spec: its own
// securityContext.runAsGroup, else the pod's (fromPod); "" when neither
// sets one (the image's user's group).
func runAsGroup(p *corev1.Pod, c corev1.Container) (gid string, fromPod bool) {
	if sc := c.SecurityContext; sc != nil && sc.RunAsGroup != nil {
		return strconv.FormatInt(*sc.RunAsGroup, 10), false
	}
	if sc := p.Spec.SecurityContext; sc != nil && sc.RunAsGroup != nil {
		return strconv.FormatInt(*sc.RunAsGroup, 10), true
	}
	return "", false
}

// gidFix removes runAsGroup 1337 from the template where it is set: the
// containers' own (a strategic merge by name), and the pod's.
func gidFix(p *corev1.Pod, containers []string, onPod bool) string {
	var parts, what []string
	if onPod {
		parts = append(parts, `"securityContext":{"runAsGroup":null}`)
		what = append(what, "the pod's securityContext.runAsGroup")
	}
	if len(containers) > 0 {
		var cs []string
		for _, c := range containers {
			cs = append(cs, `{"name":"`+c+`","securityContext":{"runAsGroup":null}}`)
		}
		parts = append(parts, `"containers":[`+strings.Join(cs, ",")+`]`)
		what = append(what, "securityContext.runAsGroup of container "+quoteList(containers))
	}
	fix := specPatch(p, "{"+strings.Join(parts, ",")+"}", "remove "+quoteList(what)+" (or set a gid other than "+istio.ProxyGID+")")
	if templateOwner(p) != "" {
		fix += "   # or set another gid than " + istio.ProxyGID + " that the app's files allow"
	}
	return fix
}
