package diagnose

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
)

// A bypassing flow let through by the pod's own exclusions gets the patch
// that takes its port (or the range holding its address) out of them; one
// the exclusions do not name gets none.
func TestBypassFixTakesTheFlowOutOfTheExclusions(t *testing.T) {
	flow := func(dst string) capture.Connection {
		return capture.Connection{Flow: capture.Flow{Proto: "tcp", Dst: netip.MustParseAddrPort(dst)}, Class: capture.Bypassing}
	}
	for _, tc := range []struct {
		name string
		ann  map[string]string
		dst  string
		want string
	}{
		{"a port among others", map[string]string{annExcludeOutPorts: "5432,8080"}, "10.1.2.3:8080",
			`kubectl patch deployment/web -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"traffic.sidecar.istio.io/excludeOutboundPorts":"5432"}}}}}'   # takes port 8080 out`},
		{"the only port", map[string]string{annExcludeOutPorts: "8080"}, "10.1.2.3:8080", `"traffic.sidecar.istio.io/excludeOutboundPorts":null`},
		{"a range", map[string]string{annExcludeOutIPs: "10.0.0.0/8,192.168.0.0/16"}, "10.1.2.3:80", `"traffic.sidecar.istio.io/excludeOutboundIPRanges":"192.168.0.0/16"`},
		{"not excluded", map[string]string{annExcludeOutPorts: "5432"}, "10.1.2.3:8080", ""},
	} {
		p := pod(func(p *corev1.Pod) {
			deploymentPod(p)
			p.Annotations = tc.ann
		})
		got := bypassFix(p, []capture.Connection{flow(tc.dst)})
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// A flow let out by the rule for the proxy's own user (or group): no
// annotation brings it back, and the fix says so: the app's process must
// run as another uid.
func TestBypassByTheProxysOwner(t *testing.T) {
	checks := 0
	for _, rule := range []string{"-A ISTIO_OUTPUT -m owner --uid-owner 1337 -j RETURN", "-A ISTIO_OUTPUT -m owner --gid-owner 1337 -j RETURN", "meta skuid 1337 counter return"} {
		f := Facts{Connections: true, Capture: &capture.CaptureReport{Expected: "x", Drift: &capture.Drift{}, ConnectionsSummary: "1 flow",
			Connections: []capture.Connection{{Flow: capture.Flow{Proto: "tcp", Dst: netip.MustParseAddrPort("10.1.2.3:9000")}, Class: capture.Bypassing, Rule: rule}}}}
		c := connectionsCheck(f, "pod/web-1 -n shop")
		checks++
		if c.Status != Fail || !strings.HasPrefix(c.Fix, "a choice, in the app: its connection's socket belongs to ") || !strings.Contains(c.Fix, " 1337, the proxy's own") || strings.Contains(c.Fix, "exclude*") {
			t.Errorf("%s: %+v", rule, c)
		}
	}
	t.Logf("%d checks", checks)
}
