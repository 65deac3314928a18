package diagnose

import (
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
)

// dnsRules capture DNS to 10.96.0.10 only, as istio-iptables writes them
// for a pod whose resolv.conf named it at init.
func dnsRules() []*capture.Ruleset {
	rs, err := capture.ParseSave([]byte("*nat\n:OUTPUT ACCEPT [0:0]\n:ISTIO_OUTPUT - [0:0]\n:ISTIO_REDIRECT - [0:0]\n-A OUTPUT -j ISTIO_OUTPUT\n" +
		"-A ISTIO_OUTPUT -m owner --uid-owner 1337 -j RETURN\n-A ISTIO_OUTPUT -d 10.96.0.10/32 -p udp -m udp --dport 53 -j REDIRECT --to-ports 15053\n" +
		"-A ISTIO_OUTPUT -j ISTIO_REDIRECT\n-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001\nCOMMIT\n"))
	if err != nil {
		panic(err)
	}
	return []*capture.Ruleset{rs}
}

// The resolver the rules were written for is captured: no finding.
func TestDNSResolverCaptured(t *testing.T) {
	f := checkCase{capture: &capture.CaptureReport{Expected: "x", Drift: &capture.Drift{}, Dumps: dnsRules(), Nameservers: []string{"10.96.0.10"}}}.facts()
	if fs := only(Diagnose(f).Findings, CodeDNSResolverMissed); len(fs) != 0 {
		t.Errorf("the captured resolver: %+v", fs)
	}
}
