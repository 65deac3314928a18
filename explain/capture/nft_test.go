package capture

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
)

// The native nftables tables Istio's own istio-iptables wrote
// (hack/testdata/iptables-dumps.sh), read as kubectl-mesh reads them.
func TestParseNftRuleset(t *testing.T) {
	b, err := os.ReadFile("testdata/istio-native-tproxy-dns.nft")
	if err != nil {
		t.Fatal(err)
	}
	v4, v6, ok, err := ParseNftRuleset(b)
	if err != nil || !ok {
		t.Fatalf("ok %v, %v", ok, err)
	}
	if v4.Backend != BackendNative || v4.Family != "ipv4" || v6.Family != "ipv6" {
		t.Errorf("backend %q families %q %q", v4.Backend, v4.Family, v6.Family)
	}
	for _, rs := range []*Ruleset{v4, v6} {
		rs.Annotate(&PodContext{ProxyUID: "1337"})
		for _, tb := range rs.Tables {
			for _, c := range tb.Chains {
				for _, r := range c.Rules {
					if len(r.Match.Unknown) > 0 || r.Annotation == "" || strings.Contains(r.Spec, "counter") {
						t.Errorf("%s %s/%s %q: unknown %v, annotation %q", rs.Family, tb.Name, c.Name, r.Spec, r.Match.Unknown, r.Annotation)
					}
					if rs.Family == "ipv4" && strings.Contains(r.Spec, "ip6 ") || rs.Family == "ipv6" && strings.Contains(r.Spec, "ip daddr") {
						t.Errorf("%s view holds %q", rs.Family, r.Spec)
					}
				}
			}
		}
	}
	tp := v4.Table("mangle").Chain("ISTIO_TPROXY")
	if tp == nil || len(tp.Rules) != 1 || tp.Rules[0].Target != "TPROXY" || tp.Rules[0].TargetArg("--on-port") != "15006" {
		t.Fatalf("mangle/ISTIO_TPROXY: %+v", tp)
	}
	if pre := v4.Table("nat").Chain("PREROUTING"); pre == nil || pre.Policy != "ACCEPT" {
		t.Errorf("nat PREROUTING (hook prerouting): %+v", pre)
	}
	ips := []netip.Addr{netip.MustParseAddr("10.250.0.2"), netip.MustParseAddr("fd00:250::2")}
	for spec, want := range map[string]string{
		"out:10.1.2.3:443":          "redirect 15001", // -i 10.0.0.0/8
		"out:10.96.0.1:443":         "direct 0",       // -x 10.96.0.0/12
		"out:192.168.1.1:443":       "direct 0",
		"out:192.168.1.1:3306":      "redirect 15001", // -q 3306
		"out:10.1.2.3:5432":         "direct 0",       // -o 5432
		"out:10.1.2.3:443,uid=1337": "direct 0",
		"out:8.8.8.8:53/udp":        "redirect 15053",
		"in:8080":                   "tproxy 15006",
		"in:7070":                   "direct 0",
	} {
		p, err := ParseTraceSpec(spec, ips)
		if err != nil {
			t.Fatal(err)
		}
		tr := v4.Trace(p)
		if got := fmt.Sprintf("%s %d", tr.Verdict, tr.Port); got != want {
			t.Errorf("%s: %s, want %s", spec, got, want)
		}
	}
	if _, _, ok, err := ParseNftRuleset([]byte("table ip filter {\n\tchain input {\n\t\ttype filter hook input priority filter; policy accept;\n\t}\n}\n")); ok || err != nil {
		t.Errorf("a ruleset without Istio's tables: ok %v, %v", ok, err)
	}
}

// Review findings, each with the case that showed it: the same rule text in
// two chains keeps its own counter delta; nft -a's handles are comments; a
// native mode asked for with nothing listed by nft is all missing, each rule
// once, with its table and chain.
func TestNftDeltasCommentsAndMissingTables(t *testing.T) {
	listing := func(a, b int) string {
		return fmt.Sprintf("table inet istio-proxy-nat { # handle 7\n\tchain istio-inbound { # handle 1\n\t\ttcp dport 15020 counter packets %d bytes 60 return # handle 3\n\t}\n\tchain istio-output {\n\t\ttcp dport 15020 counter packets %d bytes 60 return\n\t}\n}\n", a, b)
	}
	before, _, ok, err := ParseNftRuleset([]byte(listing(1, 5)))
	if err != nil || !ok {
		t.Fatalf("ok %v: %v", ok, err)
	}
	after, _, _, _ := ParseNftRuleset([]byte(listing(2, 9)))
	after.SetDeltas(before)
	in, out := after.Table("nat").Chain("ISTIO_INBOUND").Rules[0], after.Table("nat").Chain("ISTIO_OUTPUT").Rules[0]
	if *in.PacketsDelta != 1 || *out.PacketsDelta != 4 || len(in.Match.Unknown) > 0 {
		t.Errorf("deltas %d and %d, want 1 and 4; unknown %v", *in.PacketsDelta, *out.PacketsDelta, in.Match.Unknown)
	}

	b, err := os.ReadFile("testdata/istio-default.nft.save")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ParseSave(b)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ExplainCapture(CaptureInput{Dumps: []*Ruleset{rs}, Context: &PodContext{ProxyUID: "1337"},
		PodIPs:     []netip.Addr{netip.MustParseAddr("10.250.0.2")},
		ExpectArgs: []string{"-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT", "-i", "*", "-b", "*", "-d", "15090,15021,15020", "--native-nftables"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range rep.Drift.Missing {
		if seen[m] || !strings.HasPrefix(m, "nat/") {
			t.Errorf("missing %q: repeated or without its table and chain", m)
		}
		seen[m] = true
	}
	if len(rep.Drift.Missing) < 10 || len(rep.Drift.Extra) == 0 {
		t.Errorf("native mode asked for, iptables rules found: missing %q, extra %q", rep.Drift.Missing, rep.Drift.Extra)
	}
}
