package diagnose

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeSidecarProbeCycle: a native sidecar of the app's own has a startup
// probe that only something started after it can answer.
const CodeSidecarProbeCycle = "KM-INIT-013"

func init() {
	register(&Spec{Code: CodeSidecarProbeCycle, Title: "a native sidecar's startup probe can never pass", Stage: CheckInit, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod},
		Means:   "The kubelet starts each native sidecar (an init container with restartPolicy Always) in order, and starts nothing after it until its startup probe has passed. A user's native sidecar whose startup probe asks a port an app container serves, or the agent's 15020 (where Istio's injector points rewritten HTTP probes) while istio-proxy is a classic sidecar, waits for a container that starts only after it: the pod stays in init for ever.",
		Detects: "Each user native sidecar's startupProbe (as its template has it, when the injector rewrote it): an httpGet or tcpSocket port that an app container declares and the sidecar does not; or the agent's /app-health/ path on 15020 in a pod whose istio-proxy is a regular container.",
		Fixes:   "A choice, both named: for the agent's port, istio-proxy as a native sidecar (the annotation sidecar.istio.io/nativeSidecar=true: it then starts first), or the probe removed; for an app's port, the probe removed from the sidecar (a strategic merge of the template), or one on what the sidecar itself serves.",
		Source:  "Kubernetes sidecar containers (startup probes of restartable init containers gate the next containers); Istio docs, health checking (probe rewrite to the agent's 15020)",
		Planted: "a pod with a native sidecar whose startupProbe asks the app container's port 8080",
		run:     sidecarProbeCycle})
}

func sidecarProbeCycle(in *Input) []Finding {
	p := in.Pod
	if p == nil {
		return nil
	}
	classicProxy := classicSidecar(p)
	var out []Finding
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways || c.StartupProbe == nil || istio.IsIstioContainer(c.Name) {
			continue
		}
		probe := c.StartupProbe
		if h := probe.HTTPGet; h != nil && h.Port.Type == intstr.Int && h.Port.IntVal == istio.PortAgent && strings.HasPrefix(h.Path, "/app-health/") && classicProxy {
			fix := in.templateSpecFix(`{"metadata":{"annotations":{"` + istio.AnnotationNativeSidecar + `":"true"}}}`)
			if fix == "" {
				fix = "in the pod's manifest, set the annotation " + istio.AnnotationNativeSidecar + `: "true", then re-create the pod`
			}
			out = append(out, Finding{Mesh: "the injector's rewrite of its startup probe to the agent (15020), in istio-proxy, a classic sidecar",
				Evidence: fmt.Sprintf("native sidecar %s's startup probe asks %s on 15020, the agent's port, where Istio's injector pointed it; the agent runs in istio-proxy, a classic sidecar, which the kubelet starts only after every init container, %s included: the probe can never pass, and the pod stays in init", c.Name, h.Path, c.Name),
				Fix:      firstLineNote(fix, "a choice: istio-proxy as a native sidecar, started before "+c.Name+" (Kubernetes 1.29+); or "+c.Name+"'s startup probe removed"),
				explains: []string{CodeStuckInInit, CodePodNotReady, CodeNotRunning}})
			continue
		}
		if orig := rewrittenProbes(p, c.Name)["startupProbe"]; orig != nil {
			probe = orig
		}
		port, ok := probePortOf(probe, c)
		if !ok || declaresPort(c, port) {
			continue
		}
		for _, app := range appContainers(p) {
			if !declaresPort(app, port) {
				continue
			}
			fix := in.templateSpecFix(fmt.Sprintf(`{"spec":{"initContainers":[{"name":%q,"startupProbe":null}]}}`, c.Name))
			if fix == "" {
				fix = "in the pod's manifest, remove init container " + c.Name + "'s startupProbe, then re-create the pod"
			}
			out = append(out, Finding{
				Evidence: fmt.Sprintf("native sidecar %s's startup probe asks port %d, which app container %s serves; the kubelet starts the app's containers only once every native sidecar's startup probe has passed: the probe can never pass, and the pod stays in init", c.Name, port, app.Name),
				Fix:      firstLineNote(fix, "a choice: "+c.Name+" without its startup probe; or one on what "+c.Name+" itself serves"),
				explains: []string{CodeStuckInInit, CodePodNotReady, CodeNotRunning}})
			break
		}
	}
	return out
}

// probePortOf is the port an httpGet or tcpSocket probe asks, a name
// resolved among c's ports.
func probePortOf(probe *corev1.Probe, c corev1.Container) (int32, bool) {
	var port intstr.IntOrString
	switch {
	case probe.HTTPGet != nil:
		port = probe.HTTPGet.Port
	case probe.TCPSocket != nil:
		port = probe.TCPSocket.Port
	default:
		return 0, false
	}
	if port.Type == intstr.Int {
		return port.IntVal, true
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// declaresPort says container c declares port.
func declaresPort(c corev1.Container, port int32) bool {
	for _, p := range c.Ports {
		if p.ContainerPort == port {
			return true
		}
	}
	return false
}
