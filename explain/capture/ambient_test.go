package capture

import (
	"net/netip"
	"strings"
	"testing"
)

// saveText renders expected rules as iptables-save prints a dump.
func saveText(want map[string][]string) string {
	var b strings.Builder
	for _, table := range []string{"mangle", "raw", "nat"} {
		rules := want[table]
		if len(rules) == 0 {
			continue
		}
		b.WriteString("*" + table + "\n")
		chains := map[string]bool{}
		for _, r := range rules {
			chains[strings.Fields(r)[1]] = true
		}
		for c := range chains {
			policy := "-"
			if c == "PREROUTING" || c == "OUTPUT" {
				policy = "ACCEPT"
			}
			b.WriteString(":" + c + " " + policy + " [0:0]\n")
		}
		for _, r := range rules {
			b.WriteString("[0:0] " + r + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// The settings are read as istio-cni reads them: its ConfigMap, then the
// pod's annotations; a dump of ambient rules is recognised, explained,
// compared (a rule gone is named), and ztunnel's own traffic traces past
// capture while the app's goes to ztunnel.
func TestAmbientExplain(t *testing.T) {
	a := AmbientConfigFor(map[string]string{"AMBIENT_DNS_CAPTURE": "true", "AMBIENT_IPV6": "false"},
		map[string]string{"ambient.istio.io/dns-capture": "false", "ambient.istio.io/bypass-inbound-capture": "true", "istio.io/reroute-virtual-interfaces": "tap0, tap1"})
	if a.RedirectDNS || a.IPv6 || !a.BypassInbound || strings.Join(a.VirtualInterfaces, ",") != "tap0,tap1" || !strings.Contains(a.Source, "ambient.istio.io/dns-capture") {
		t.Errorf("settings %+v", a)
	}
	if d := AmbientConfigFor(nil, map[string]string{"ambient.istio.io/dns-capture": "maybe"}); !d.RedirectDNS || !d.IPv6 || strings.Contains(d.Source, "annotations") {
		t.Errorf("chart defaults, a non-boolean annotation ignored: %+v", d)
	}
	if len(ExpectedAmbientRules(a, true)) != 0 {
		t.Error("IPv6 rules expected with AMBIENT_IPV6 off")
	}

	def := AmbientConfigFor(map[string]string{"AMBIENT_DNS_CAPTURE": "true", "AMBIENT_IPV6": "true"}, nil)
	want := ExpectedAmbientRules(def, false)
	full := saveText(want)
	missing := want["nat"][len(want["nat"])-1]
	broken := strings.Replace(full, "[0:0] "+missing+"\n", "", 1)
	for _, tc := range []struct {
		name, dump string
		missing    []string
	}{{"as written", full, nil}, {"a rule gone", broken, []string{missing}}} {
		rs, err := ParseSave([]byte(tc.dump))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := ExplainCapture(CaptureInput{Dumps: []*Ruleset{rs}, Ambient: def, PodIPs: []netip.Addr{netip.MustParseAddr("10.244.0.7")},
			Traces: []string{"out:10.96.0.10:443", "out:10.96.0.10:443,mark=0x539", "in:8080", "in:15008", "out:10.96.0.10:53/udp"}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(rep.Drift.Missing, "|") != strings.Join(tc.missing, "|") || len(rep.Drift.Extra) != 0 {
			t.Errorf("%s: drift %+v", tc.name, rep.Drift)
		}
		if !strings.Contains(strings.Join(rep.Notes, " "), "ambient mode") || rep.Expected != def.Source {
			t.Errorf("%s: notes %q, expected from %q", tc.name, rep.Notes, rep.Expected)
		}
		if tc.missing != nil {
			continue
		}
		ports := []int{15001, 0, 15006, 0, 15053}
		for i, tr := range rep.Traces {
			if tr.Port != ports[i] {
				t.Errorf("trace %s: %s %d, want port %d", tr.Spec, tr.Verdict, tr.Port, ports[i])
			}
		}
		for _, tb := range rs.Tables {
			for _, c := range tb.Chains {
				for _, r := range c.Rules {
					if strings.HasPrefix(c.Name, "ISTIO_") && !strings.Contains(r.Annotation, " — ") {
						t.Errorf("%s: %q not explained: %q", tb.Name, r.Spec, r.Annotation)
					}
				}
			}
		}
	}
}
