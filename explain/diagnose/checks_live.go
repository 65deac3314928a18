package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Live checks no static analyzer can make: the pod's sockets (read with
// its rules, --rules) against its rules and its Services.
const (
	CodeProxyNotListening = "KM-CAP-005"
	CodeLocalhostListener = "KM-CONN-002"
)

func init() {
	register(&Spec{Code: CodeProxyNotListening, Title: "rules redirect to a port nothing serves", Stage: CheckCapture, Kind: Live, Status: Fail,
		Reads:   []Fact{FactPod, FactRules, FactSockets},
		Means:   "The pod's rules redirect its traffic to the proxy's ports, but nothing listens there: the proxy is down or never started, and every captured connection is refused.",
		Detects: "The REDIRECT targets of the pod's rules against its listening sockets, read in the same pass as the rules.",
		Fixes:   "Find why the proxy is down (its previous log), then re-create the pod.",
		Source:  "istio/istio issues on traffic failing while the proxy is not running",
		Planted: "a sidecar pod whose proxy image is replaced by one that exits (sidecar.istio.io/proxyImage)",
		run:     proxyNotListening})
	register(&Spec{Code: CodeLocalhostListener, Title: "app listens on localhost only", Stage: CheckConnections, Kind: Live, Status: Fail,
		Istioctl: []string{"IST0143"}, Reads: []Fact{FactPod, FactServices, FactRules, FactSockets},
		Means:   "The app listens on 127.0.0.1 (or ::1) only, on a port a Service sends to: the proxy forwards inbound traffic to the pod's address, where nothing listens, and every request is refused.",
		Detects: "The pod's listening sockets on each Service target port.",
		Fixes:   "Make the app listen on 0.0.0.0 (or ::).",
		Source:  "istioctl's LocalhostListener message (IST0143); Istio 1.10's change of inbound forwarding",
		Planted: "busybox httpd -p 127.0.0.1:8080 behind a Service targeting 8080",
		run:     localhostListener})
}

// proxyStarting: the proxy runs, is not ready, and has not been so for
// long (startup's proxy-not-ready hazard is not there yet): its listeners
// come with its configuration.
func proxyStarting(s *startup.StartupReport) bool {
	if s == nil {
		return false
	}
	for _, h := range s.Hazards {
		if h.ID == "proxy-not-ready" {
			return false
		}
	}
	for _, c := range append(append([]startup.ContainerStartup(nil), s.InitContainers...), s.Containers...) {
		if c.Name == istio.ProxyContainer {
			return c.State == "running" && !c.Ready
		}
	}
	return false
}

func proxyNotListening(in *Input) []Finding {
	r := in.Capture
	if r == nil || !socketsRead(r) || !in.injected() || proxyStarting(in.Startup) {
		return nil
	}
	ports := map[uint16]bool{}
	for _, d := range r.Dumps {
		if d.Ambient {
			return nil // ztunnel serves these, from the node
		}
		for _, t := range d.Tables {
			for _, c := range t.Chains {
				for _, rule := range c.Rules {
					if rule.Target == "REDIRECT" {
						if p, err := strconv.Atoi(rule.TargetArg("--to-ports")); err == nil {
							ports[uint16(p)] = true
						}
					}
				}
			}
		}
	}
	var dead []string
	for p := range ports {
		if len(capture.ListeningOn(r.Listeners, p)) == 0 {
			dead = append(dead, strconv.Itoa(int(p)))
		}
	}
	if len(dead) == 0 {
		return nil
	}
	sort.Strings(dead)
	return []Finding{{Evidence: "the rules redirect traffic to port " + quoteList(dead) + ", but nothing in the pod listens there: every captured connection is refused",
		Fix: "kubectl logs " + in.Target + " -c " + istio.ProxyContainer + " --previous   # why the proxy is down; then re-create the pod"}}
}

// socketsRead says the report's listeners were read (an empty list is a
// read with none).
func socketsRead(r *capture.CaptureReport) bool { return r.Listeners != nil }

func localhostListener(in *Input) []Finding {
	r := in.Capture
	if r == nil || !socketsRead(r) || !in.injected() {
		return nil
	}
	var hits []string
	seen := map[int32]bool{}
	for _, sp := range servicePorts(in) {
		if sp.target == 0 || seen[sp.target] || !tcp(sp.port) || slices.Contains(istio.ReservedPorts, sp.target) {
			continue
		}
		seen[sp.target] = true
		addrs := capture.ListeningOn(r.Listeners, uint16(sp.target))
		if len(addrs) == 0 {
			continue
		}
		loopback := true
		for _, a := range addrs {
			loopback = loopback && a.IsLoopback()
		}
		if loopback {
			var as []string
			for _, a := range addrs {
				as = append(as, a.String())
			}
			hits = append(hits, fmt.Sprintf("port %d (Service %s) listens on %s only", sp.target, sp.svc, strings.Join(as, ", ")))
		}
	}
	if len(hits) == 0 {
		return nil
	}
	return []Finding{{Evidence: strings.Join(hits, "; ") + ": the proxy forwards inbound traffic to the pod's address, where nothing listens",
		Fix: "make the app listen on 0.0.0.0 (or ::) instead of localhost"}}
}
