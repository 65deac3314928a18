package diagnose

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeStatusOnProxyPort: the sidecar's status port is set to a port the
// proxy itself listens on.
const CodeStatusOnProxyPort = "KM-START-019"

func init() {
	register(&Spec{Code: CodeStatusOnProxyPort, Title: "the status port is one of the proxy's own ports", Stage: CheckStart, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactEvents},
		Means:   "status.sidecar.istio.io/port moves the agent's status server, which answers the app's probes the injector rewrote (/app-health/…), off 15020. Set to a port the proxy already listens on (15006 inbound, 15001 outbound, 15000 admin, 15021 health, 15090 stats, 15008 HBONE, 15053 DNS), the two clash: the app's probes reach the proxy's listener, not the agent, and fail, so the app never becomes ready.",
		Detects: "An injected pod whose status.sidecar.istio.io/port annotation names one of the proxy's ports other than 15020; a fail while the pod is not ready, a warning while it is.",
		Fixes:   "The annotation removed from the pod template (the status port is then 15020, and the probes are rewritten to it), or set to a free port.",
		Source:  "Istio annotations reference (status.sidecar.istio.io/port); Istio docs, application requirements (ports used by Istio)",
		Planted: "an injected pod with an HTTP readiness probe and status.sidecar.istio.io/port: \"15006\"",
		run:     statusOnProxyPort})
}

func statusOnProxyPort(in *Input) []Finding {
	p := in.Pod
	if p == nil || !in.injected() {
		return nil
	}
	v := strings.TrimSpace(p.Annotations[annotationStatusPort])
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || int32(n) == istio.PortAgent || !slices.Contains(istio.ReservedPorts, int32(n)) {
		return nil
	}
	f := Finding{Status: Fail, Mesh: fmt.Sprintf("the pod's %s=%q", annotationStatusPort, v),
		Evidence: fmt.Sprintf("the pod's %s=%q puts the agent's status server on %d, a port the proxy itself listens on (%s): the app's probes the injector rewrote to it (/app-health/) reach the proxy's listener, not the agent",
			annotationStatusPort, v, n, istio.PortRole(int32(n))),
		Fix:      annotationPatch(p, annotationStatusPort, "") + "   # the status port is then 15020, and the probes are rewritten to it",
		explains: []string{CodePodNotReady, CodeProxyNotReady, CodeProxyFailing, CodeAppFailing}}
	if isReady(p) {
		f.Status = Warning
		f.Evidence += "; the pod is ready now: a hazard, not yet a failure"
	}
	return []Finding{f}
}
