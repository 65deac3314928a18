package diagnose

import (
	"fmt"
	"sort"
	"strings"
)

// CodeProbeHost: a container's HTTP probe names a loopback host
// (httpGet.host: localhost): the kubelet sends it from the node, so it asks
// the node's own loopback, not the pod.
const CodeProbeHost = "KM-START-023"

func init() {
	register(&Spec{Code: CodeProbeHost, Title: "a probe's host sends the kubelet to the node", Stage: CheckStart, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod},
		Means:   "An HTTP probe's httpGet.host is the address the kubelet connects to, and the kubelet probes from the node: host localhost (or 127.0.0.1, ::1) asks the node's own loopback, where nothing of the pod listens, so the probe fails and the container is never ready (or, for liveness, restarted). The injector's rewrite keeps the host when it points the probe at its agent (15020/app-health/…), so a sidecar pod fails the same way; without host, the kubelet asks the pod's IP, which the agent or the app answers.",
		Detects: "A container's liveness, readiness or startup probe (as the pod runs it, the injector's rewrite included) with httpGet.host a loopback name or address, on a pod not in the host's network namespace. Fail while the pod is not ready (or for a manifest, -f), a warning on a ready pod.",
		Fixes:   "A strategic merge patch of the pod template that removes httpGet.host from each such probe (the kubelet then asks the pod's IP); a Job re-created, a bare pod re-created from its applied manifest.",
		Source:  "Kubernetes docs, configure liveness, readiness and startup probes (httpGet host: defaults to the pod IP); Istio docs, health checking of Istio services (the probe rewrite); istio/istio issues on rewritten probes with a host",
		Planted: "a sidecar Deployment whose app's readiness probe is httpGet host localhost, port 8080",
		run:     probeHost})
}

// loopbackHosts are the hosts that name the prober's own machine.
var loopbackHosts = map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true, "[::1]": true, "localhost.localdomain": true, "ip6-localhost": true}

func probeHost(in *Input) []Finding {
	p := in.Pod
	if p == nil || p.Spec.HostNetwork {
		return nil
	}
	var hits, patched []string
	var patches []any
	for _, c := range p.Spec.Containers {
		patch := map[string]any{"name": c.Name}
		for _, k := range containerProbes(c) {
			pr := k.probe
			if pr == nil || pr.HTTPGet == nil || !loopbackHosts[strings.ToLower(pr.HTTPGet.Host)] {
				continue
			}
			where := fmt.Sprintf("%s:%s%s", pr.HTTPGet.Host, pr.HTTPGet.Port.String(), pr.HTTPGet.Path)
			if strings.HasPrefix(pr.HTTPGet.Path, "/app-health/") {
				where += ", the injector's rewrite to its agent"
			}
			hits = append(hits, fmt.Sprintf("container %s's %s probe asks host %s (%s)", c.Name, strings.TrimSuffix(k.field, "Probe"), pr.HTTPGet.Host, where))
			patch[k.field] = map[string]any{"httpGet": map[string]any{"host": nil}}
			patched = append(patched, c.Name+"'s "+strings.TrimSuffix(k.field, "Probe"))
		}
		if len(patch) > 1 {
			patches = append(patches, patch)
		}
	}
	if len(hits) == 0 {
		return nil
	}
	sort.Strings(hits)
	status := Fail
	if isReady(p) {
		status = Warning // it answers now: something on the node's loopback does
	}
	fix := "remove httpGet.host from the probe (" + strings.Join(patched, ", ") + "), then re-create the pod"
	if cmd := in.templateSpecFix(plainJSON(map[string]any{"spec": map[string]any{"containers": patches}})); cmd != "" {
		fix = firstLineNote(cmd, "the probes then ask the pod's IP, not the node's loopback")
	}
	return []Finding{{Status: status,
		edit:     "remove httpGet.host from " + strings.Join(patched, ", ") + " probe (the kubelet then asks the pod's IP)",
		Evidence: strings.Join(hits, "; ") + ": the kubelet sends a probe from the node, so a loopback host is the node's own, where nothing of this pod listens; the probe fails there, not in the pod",
		Fix:      fix,
		explains: []string{CodePodNotReady, CodeAppFailing}}}
}
