package render

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
)

// A native nftables ruleset is shown with nft's own names: its table
// (inet istio-proxy-nat), its chains (prerouting, istio-inbound) and its
// policies (accept), in the rules, what they mean and the traces; never
// the iptables-shaped names the model reads it into.
func TestNativeRulesetKeepsNftNames(t *testing.T) {
	data, err := os.ReadFile("../explain/capture/testdata/istio-native.nft")
	if err != nil {
		t.Fatal(err)
	}
	v4, _, ok, err := capture.ParseNftRuleset(data)
	if err != nil || !ok {
		t.Fatalf("parse: %v %v", ok, err)
	}
	rep, err := capture.ExplainCapture(capture.CaptureInput{Dumps: []*capture.Ruleset{v4}, Traces: []string{"out:10.1.2.3:80"}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	Capture(&Printer{Out: &out}, rep)
	s := out.String()
	for _, want := range []string{"table inet istio-proxy-nat", "prerouting (policy accept)", "jump to istio-inbound", "      istio-inbound\n", "inet istio-proxy-nat/istio-output"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q:\n%s", want, s)
		}
	}
	for _, not := range []string{"ISTIO_INBOUND", "ISTIO_OUTPUT", "PREROUTING", "table nat"} {
		if strings.Contains(s, not) {
			t.Errorf("iptables' name %q shown for a native ruleset:\n%s", not, s)
		}
	}
}
