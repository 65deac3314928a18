package netns

import (
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// ambientCase is one configuration of istio-cni's in-pod rules: the flags
// of hack/tools/istio/inpod (the agent's settings and the pod's
// annotations) and the same as the annotations kubectl-mesh reads them from.
type ambientCase struct {
	name        string
	flags       []string
	cni         map[string]string // istio-cni's ConfigMap data
	annotations map[string]string
	dns         bool // DNS is captured
	inbound     bool // inbound is captured
	nftables    bool // native nftables (NATIVE_NFTABLES)
	legacy      bool // the iptables-legacy backend
}

// nftCase is c in native nftables mode.
func nftCase(c ambientCase) ambientCase {
	c.name, c.nftables = "nftables-"+c.name, true
	c.flags = append([]string{"-nftables"}, c.flags...)
	cni := map[string]string{"NATIVE_NFTABLES": "true"}
	for k, v := range c.cni {
		cni[k] = v
	}
	c.cni = cni
	return c
}

var ambientCases = []ambientCase{
	{name: "chart-defaults", cni: map[string]string{"AMBIENT_DNS_CAPTURE": "true", "AMBIENT_IPV6": "true"}, dns: true, inbound: true},
	{name: "dns-off", flags: []string{"-dns=false"}, cni: map[string]string{"AMBIENT_DNS_CAPTURE": "false", "AMBIENT_IPV6": "true"}, inbound: true},
	{name: "ipv6-off", flags: []string{"-ipv6=false"}, cni: map[string]string{"AMBIENT_DNS_CAPTURE": "true", "AMBIENT_IPV6": "false"}, dns: true, inbound: true},
	{name: "bypass-inbound", flags: []string{"-ingress"}, cni: map[string]string{"AMBIENT_DNS_CAPTURE": "true", "AMBIENT_IPV6": "true"},
		annotations: map[string]string{"ambient.istio.io/bypass-inbound-capture": "true"}, dns: true},
	{name: "pod-dns-on", flags: []string{"-dns=false", "-pod-dns=on"}, cni: map[string]string{"AMBIENT_DNS_CAPTURE": "false", "AMBIENT_IPV6": "true"},
		annotations: map[string]string{"ambient.istio.io/dns-capture": "true"}, dns: true, inbound: true},
	{name: "pod-dns-off", flags: []string{"-pod-dns=off"}, cni: map[string]string{"AMBIENT_DNS_CAPTURE": "true", "AMBIENT_IPV6": "true"},
		annotations: map[string]string{"ambient.istio.io/dns-capture": "false"}, inbound: true},
	{name: "virtual-interfaces", flags: []string{"-virtual-interfaces=tap0,tap1"}, cni: map[string]string{"AMBIENT_DNS_CAPTURE": "true", "AMBIENT_IPV6": "true"},
		annotations: map[string]string{"istio.io/reroute-virtual-interfaces": "tap0,tap1"}, dns: true, inbound: true},
	{name: "legacy-backend", flags: []string{"-iptables-binary=legacy"}, cni: map[string]string{"AMBIENT_DNS_CAPTURE": "true", "AMBIENT_IPV6": "true"},
		dns: true, inbound: true, legacy: true},
	{name: "legacy-bypass-inbound-dns-off", flags: []string{"-iptables-binary=legacy", "-ingress", "-dns=false"}, cni: map[string]string{"AMBIENT_DNS_CAPTURE": "false", "AMBIENT_IPV6": "true"},
		annotations: map[string]string{"ambient.istio.io/bypass-inbound-capture": "true"}, legacy: true},
}

// istioInpod is hack/tools/istio/inpod, built by build-istio.sh beside
// pilot-agent: istio-cni's own in-pod rule writer.
func istioInpod(t *testing.T) string {
	t.Helper()
	return filepath.Join(filepath.Dir(istioAgent(t)), "inpod")
}

// Ambient mode's in-pod rules, written by istio-cni's own code (the node
// agent's rule writer built from Istio's module) into a test-made pod
// namespace, for each configuration of the agent and the pod's annotations:
// the dump must be exactly what kubectl-mesh expects from the same settings
// (read as it reads them: istio-cni's ConfigMap and the pod's annotations),
// every in-pod rule must be explained, and real connections — the app's,
// ztunnel's own (marked 0x539), DNS, inbound, HBONE — must land where
// --trace says; a stand-in listens on ztunnel's ports (ztunnel is Rust).
func TestAmbientInPodRulesAgainstTheKernel(t *testing.T) {
	requireRoot(t)
	inpod := istioInpod(t)
	rules, conns := 0, 0
	cases := append([]ambientCase{}, ambientCases...)
	for _, c := range ambientCases {
		if !c.legacy {
			cases = append(cases, nftCase(c))
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t)
			run(t, append([]string{"ip", "netns", "exec", p.pod, inpod}, tc.flags...)...)
			p.listen(t, p.pod, "pod", 0, false, "15001", "15006", "15008", "15053", "8080")
			p.listen(t, p.world, "world", 0, false, "443", "8080", "53")

			a := capture.AmbientConfigFor(tc.cni, tc.annotations)
			if a.NativeNftables != tc.nftables {
				t.Fatalf("NATIVE_NFTABLES read as %v", a.NativeNftables)
			}
			dumps := map[bool]*capture.Ruleset{}
			var nft4, nft6 *capture.Ruleset
			if tc.nftables {
				raw := run(t, "ip", "netns", "exec", p.pod, "nft", "list", "ruleset")
				var ok bool
				var err error
				if nft4, nft6, ok, err = capture.ParseNftRuleset([]byte(raw)); err != nil || !ok {
					t.Fatalf("nft list ruleset: ok %v, %v\n%s", ok, err, raw)
				}
			}
			for _, v6 := range []bool{false, true} {
				backend := map[bool]string{false: "nft", true: "legacy"}[tc.legacy]
				save := "iptables-" + backend + "-save"
				if v6 {
					save = "ip6tables-" + backend + "-save"
				}
				raw := run(t, "ip", "netns", "exec", p.pod, save, "-c")
				var rs *capture.Ruleset
				var drift *capture.Drift
				var err error
				if tc.nftables {
					if strings.Contains(raw, "ISTIO_") {
						t.Errorf("%s: iptables rules beside the nftables ones:\n%s", save, raw)
					}
				} else if rs, err = capture.ParseSave([]byte(raw)); err != nil {
					t.Fatalf("parse %s: %v\n%s", save, err, raw)
				} else if rs.Backend != backend {
					t.Errorf("%s: backend %q", save, rs.Backend)
				}
				switch {
				case tc.nftables:
					save, rs = "nft list ruleset ("+map[bool]string{false: "ipv4", true: "ipv6"}[v6]+")", map[bool]*capture.Ruleset{false: nft4, true: nft6}[v6]
					want4, want6, err := capture.ExpectedAmbientNftRules(a)
					if err != nil {
						t.Fatal(err)
					}
					drift = capture.CompareNftRules(rs, map[bool]map[string][]*capture.Rule{false: want4, true: want6}[v6])
				default:
					if drift, err = capture.CompareRules(rs, capture.ExpectedAmbientRules(a, v6)); err != nil {
						t.Fatal(err)
					}
					if n := rs.RuleCount(); (n == 0) != (v6 && !a.IPv6) {
						t.Errorf("%s: %d rules", save, n)
					}
				}
				dumps[v6] = rs
				if len(drift.Missing)+len(drift.Extra)+len(drift.Reordered) > 0 {
					t.Errorf("%s: expected from %s, istio-cni wrote otherwise:\nmissing %q\nextra %q\nreordered %q\n%s", save, a.Source, drift.Missing, drift.Extra, drift.Reordered, raw)
				}
				rules += rs.RuleCount()
				if rs.RuleCount() > 0 && !capture.IsAmbientInPod(rs) {
					t.Errorf("%s: not recognised as ambient mode's in-pod rules", save)
				}
				rs.Annotate(&capture.PodContext{Ambient: true})
				for _, tb := range rs.Tables {
					for _, c := range tb.Chains {
						for _, r := range c.Rules {
							if strings.HasPrefix(c.Name, "ISTIO_") && !strings.Contains(r.Annotation, " — ") {
								t.Errorf("%s %s: %s is not explained: %q", save, tb.Name, r.Spec, r.Annotation)
							}
						}
					}
				}
			}

			podIPs := []netip.Addr{netip.MustParseAddr(podV4), netip.MustParseAddr(podV6)}
			type ambientConn struct {
				connection
				mark string
			}
			cs := []ambientConn{
				{connection: connection{out: true, proto: "tcp", dst: "10.99.0.5", port: 443}},
				{connection: connection{out: true, proto: "tcp", dst: "10.99.0.5", port: 443}, mark: "0x539"},
				{connection: connection{out: true, proto: "tcp", dst: podV4, port: 8080}},
				{connection: connection{out: true, proto: "udp", dst: "10.99.0.53", port: 53}},
				{connection: connection{out: true, proto: "tcp", dst: "10.99.0.53", port: 53}},
				{connection: connection{out: true, proto: "udp", dst: "10.99.0.53", port: 53}, mark: "0x539"},
				{connection: connection{out: false, proto: "tcp", dst: podV4, port: 8080}},
				{connection: connection{out: false, proto: "tcp", dst: podV4, port: 15008}},
			}
			if a.IPv6 {
				cs = append(cs, ambientConn{connection: connection{out: true, proto: "tcp", dst: "fd00:99::5", port: 443}},
					ambientConn{connection: connection{out: false, proto: "tcp", dst: podV6, port: 8080}})
			}
			for _, c := range cs {
				spec := c.spec()
				args := []string{"ip", "netns", "exec", p.world, filepath.Join(p.bin, "probe"), "connect", c.proto, c.dst, fmt.Sprint(c.port)}
				if c.out {
					args[3] = p.pod
				}
				if c.mark != "" {
					spec += ",mark=" + c.mark
					args = append(args, c.mark)
				}
				pkt, err := capture.ParseTraceSpec(spec, podIPs)
				if err != nil {
					t.Fatal(err)
				}
				tr := dumps[pkt.Dst.Is6()].Trace(pkt)
				out, _ := exec.Command(args[0], args[1:]...).CombinedOutput() // a connection that fails says so in its output
				reply := strings.TrimSpace(string(out))
				verdict, port := landed(reply, c.connection)
				if verdict != tr.Verdict || port != tr.Port {
					t.Errorf("%s: landed on %q (%s %d), --trace said %s %d", spec, reply, verdict, port, tr.Verdict, tr.Port)
				}
				// What each connection must do, whatever the trace says.
				wantPort := 0
				switch {
				case c.mark != "" || c.dst == podV4 && c.out || c.port == 15008:
				case c.port == 53 && c.out && tc.dns:
					wantPort = 15053
				case c.port == 53 && c.proto == "udp":
				case c.out:
					wantPort = 15001
				case tc.inbound:
					wantPort = 15006
				}
				if port != wantPort {
					t.Errorf("%s: landed on %q, want port %d", spec, reply, wantPort)
				}
				conns++
			}
		})
	}
	testreport.Count(t, "%d ambient configurations (iptables nft and legacy, native nftables) written by istio-cni's own rule writer (%d rules), equal to what kubectl-mesh expects; %d real connections landed where --trace said", len(cases), rules, conns)
}
