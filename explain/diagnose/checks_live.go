package diagnose

import (
	"fmt"
	"net/netip"
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
	CodeDNSResolverMissed = "KM-CAP-007"
)

func init() {
	register(&Spec{Code: CodeDNSResolverMissed, Title: "DNS capture misses the pod's resolver", Stage: CheckCapture, Kind: Live, Status: Warning,
		Reads:   []Fact{FactPod, FactRules},
		Means:   "DNS capture is on (the rules redirect DNS to the agent's port 15053), but the DNS server the pod's resolv.conf names now is not among those the rules were written for: its queries go around the agent (no DNS proxying, no ServiceEntry resolution).",
		Detects: "A DNS query from the app to each server of the pod's live resolv.conf, traced through its rules.",
		Fixes:   "Re-create the pod, so that istio-init writes its rules for the resolver it has now (or capture all DNS: ISTIO_META_DNS_CAPTURE with capture-all-dns).",
		Source:  "Istio docs, DNS proxying; istio-iptables' own rules (only the resolvers of resolv.conf at init are redirected)",
		Planted: "a pod with DNS capture on whose resolv.conf is changed to another server after istio-init ran",
		run:     dnsResolverMissed})
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
		Means:   "The app listens on 127.0.0.1 (or ::1) only, on a port meant to receive traffic (a container declares it, or a Service sends to it): the proxy forwards inbound traffic to the pod's address, where nothing listens, and every request is refused.",
		Detects: "The pod's listening sockets on each port an app container declares (containerPort) and each Service target port, with or without a Service.",
		Fixes:   "Make the app listen on 0.0.0.0 (or ::).",
		Source:  "istioctl's LocalhostListener message (IST0143); Istio 1.10's change of inbound forwarding",
		Planted: "busybox httpd -p 127.0.0.1:8080 with containerPort 8080 and no Service",
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
		for p := range redirectPorts(d) {
			ports[p] = true
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
	for _, ip := range inboundPorts(in) {
		if slices.Contains(istio.ReservedPorts, ip.port) {
			continue
		}
		addrs := capture.ListeningOn(r.Listeners, uint16(ip.port))
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
			hits = append(hits, fmt.Sprintf("port %d (%s) listens on %s only", ip.port, strings.Join(ip.by, ", "), strings.Join(as, ", ")))
		}
	}
	if len(hits) == 0 {
		return nil
	}
	return []Finding{{Evidence: strings.Join(hits, "; ") + ": the proxy forwards inbound traffic to the pod's address, where nothing listens",
		Fix: "make the app listen on 0.0.0.0 (or ::) instead of localhost"}}
}

func dnsResolverMissed(in *Input) []Finding {
	r := in.Capture
	if r == nil || len(r.Nameservers) == 0 || !in.injected() {
		return nil
	}
	var missed []string
	for _, d := range r.Dumps {
		if d.Ambient || !redirectPorts(d)[istio.PortDNS] {
			continue
		}
		for _, ns := range r.Nameservers {
			a, err := netip.ParseAddr(ns)
			if err != nil || a.Is4() != (d.Family != "ipv6") {
				continue
			}
			pkt, err := capture.ParseTraceSpec("out:"+netip.AddrPortFrom(a, 53).String()+"/udp", nil)
			if err != nil {
				continue
			}
			if tr := d.Trace(pkt); tr.Verdict != "redirect" || tr.Port != istio.PortDNS {
				missed = append(missed, ns)
			}
		}
	}
	if len(missed) == 0 {
		return nil
	}
	return []Finding{{Evidence: "DNS capture is on, but a query to " + quoteList(missed) + " (the pod's resolv.conf now) is not redirected to the agent (15053): its rules were written for other resolvers",
		Fix: "kubectl delete pod " + in.Target + "   # re-created, istio-init writes its rules for the resolvers it has then"}}
}

// redirectPorts are the ports the dump's REDIRECT rules send to.
func redirectPorts(d *capture.Ruleset) map[uint16]bool {
	out := map[uint16]bool{}
	for _, t := range d.Tables {
		for _, c := range t.Chains {
			for _, rule := range c.Rules {
				if rule.Target != "REDIRECT" {
					continue
				}
				if p, err := strconv.Atoi(rule.TargetArg("--to-ports")); err == nil {
					out[uint16(p)] = true
				}
			}
		}
	}
	return out
}
