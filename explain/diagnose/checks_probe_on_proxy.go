package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeProbeOnProxy: an app container's probe asks one of the proxy's ports
// (its readiness 15021, its agent 15020, …): it answers for the proxy, and a
// dead app stays Ready and is never restarted.
const CodeProbeOnProxy = "KM-START-022"

func init() {
	register(&Spec{Code: CodeProbeOnProxy, Title: "an app's probe asks the proxy, not the app", Stage: CheckStart, Kind: Static, Status: Warning,
		Reads:   []Fact{FactPod},
		Means:   "An app container's liveness, readiness or startup probe asks a port of the proxy or its agent (15021 the proxy's readiness, 15020 the agent, 15000, 15090, …), which the app does not serve: the proxy answers it, so the probe says the proxy is up, not the app. A dead or hung app stays Ready, keeps its traffic, and is never restarted.",
		Detects: "The app containers' probes, as the pod's template gave them (before the injector rewrote them to the agent; kept in istio-proxy's ISTIO_KUBE_APP_PROBERS), on a pod with a sidecar: an HTTP, TCP or gRPC port among the proxy's ports that the container does not declare.",
		Fixes:   "A strategic merge patch of the template that points each such probe at the app's own declared port (an HTTP probe at its path /: a choice, the app's own health path if it has one); with no port declared, say where the app listens.",
		Source:  "Istio docs, application requirements (ports used by Istio) and health checking of Istio services (probes are rewritten to the agent, which asks the app's port)",
		Planted: "a sidecar pod whose app's liveness and readiness probes ask /healthz/ready on 15021",
		run:     probeOnProxy})
}

func probeOnProxy(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil {
		return nil
	}
	var hits []string
	var patches []any
	for _, c := range appContainers(p) {
		kept := rewrittenProbes(p, c.Name)
		appPort := int32(0)
		for _, port := range c.Ports {
			if !slices.Contains(istio.ReservedPorts, port.ContainerPort) {
				appPort = port.ContainerPort
				break
			}
		}
		patch := map[string]any{"name": c.Name}
		for _, k := range containerProbes(c) {
			pr := k.probe
			if orig, ok := kept[k.field]; ok {
				pr = orig // as the template gave it
			}
			if pr == nil || pr.HTTPGet != nil && strings.HasPrefix(pr.HTTPGet.Path, "/app-health/") {
				continue // (the injector's rewrite, its original not kept: not the template's)
			}
			n, ok := probePortOf(pr, c)
			kind := "HTTP"
			switch {
			case pr.TCPSocket != nil:
				kind = "TCP"
			case pr.GRPC != nil:
				n, ok, kind = pr.GRPC.Port, true, "gRPC"
			}
			if !ok || !slices.Contains(istio.ReservedPorts, n) || declaresPort(c, n) {
				continue
			}
			hits = append(hits, fmt.Sprintf("container %s's %s (%s on %d)", c.Name, strings.TrimSuffix(k.field, "Probe"), kind, n))
			if appPort == 0 {
				continue
			}
			switch kind {
			case "HTTP":
				patch[k.field] = map[string]any{"httpGet": map[string]any{"port": appPort, "path": "/"}}
			case "TCP":
				patch[k.field] = map[string]any{"tcpSocket": map[string]any{"port": appPort}}
			case "gRPC":
				patch[k.field] = map[string]any{"grpc": map[string]any{"port": appPort}}
			}
		}
		if len(patch) > 1 {
			patches = append(patches, patch)
		}
	}
	if len(hits) == 0 {
		return nil
	}
	sort.Strings(hits)
	fix := "point the probes at the port the app serves (not the proxy's), then re-create the pod"
	if len(patches) > 0 {
		if cmd := in.templateSpecFix(plainJSON(map[string]any{"spec": map[string]any{"containers": patches}})); cmd != "" {
			fix = firstLineNote(cmd, "the probes ask the app's own port (an HTTP probe its path /: a choice, the app's health path if it has one)")
		}
	}
	return []Finding{{Evidence: quoteList(hits) + ": a port of the proxy or its agent, which the app does not serve: the proxy answers, so the probe says the proxy is up, not the app (a dead or hung app stays Ready and is never restarted)",
		Mesh: "the proxy's ports (" + quoteList(hits) + ")",
		Fix:  fix}}
}

// fieldProbe is one of a container's probes and its field's name.
type fieldProbe struct {
	field string
	probe *corev1.Probe
}

// containerProbes are c's liveness, readiness and startup probes (nil when
// not set), in that order.
func containerProbes(c corev1.Container) []fieldProbe {
	return []fieldProbe{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}}
}
