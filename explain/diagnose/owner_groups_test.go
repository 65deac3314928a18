package diagnose

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
)

// istio-init's environment setting owner groups (from proxyMetadata):
// the drift and the bypass they make are put down to it, and the fix takes
// them out of the pod's config (the rest kept), or points at the
// ProxyConfig that sets them; a flow let out by another uid than the
// proxy's is not called the proxy's own.
func TestOwnerGroups(t *testing.T) {
	withEnv := func(cfg string) *corev1.Pod {
		return pod(func(p *corev1.Pod) {
			deploymentPod(p)
			p.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: "ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE", Value: "0"}}
			if cfg != "" {
				p.Annotations = map[string]string{"proxy.istio.io/config": cfg}
			}
		})
	}
	bypass := []capture.Connection{{Flow: capture.Flow{Proto: "tcp", Dst: netip.MustParseAddrPort("10.1.2.3:9000")}, Class: capture.Bypassing, Rule: "-A ISTIO_OUTPUT -m owner --gid-owner 0 -j RETURN"}}
	cases := []struct {
		name string
		p    *corev1.Pod
		fix  string
	}{
		{"in the pod's config", withEnv("proxyMetadata:\n  ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE: \"0\"\n  OTHER: x\n"),
			`kubectl patch deployment/web -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"proxy.istio.io/config":"{\"proxyMetadata\":{\"OTHER\":\"x\"}}"}}}}}'`},
		{"its only setting", withEnv(`{"proxyMetadata":{"ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE":"0"}}`), `"proxy.istio.io/config":null`},
		{"a ProxyConfig's", withEnv(""), "kubectl get proxyconfigs.networking.istio.io -n shop -o yaml"},
	}
	checks := 0
	for _, tc := range cases {
		f := Facts{Pod: tc.p, Connections: true, Capture: &capture.CaptureReport{Expected: "x", ConnectionsSummary: "1 flow", Connections: bypass,
			Drift: &capture.Drift{Extra: []string{"-A ISTIO_OUTPUT -m owner --gid-owner 0 -j RETURN"}}}}
		for _, c := range []Check{captureCheck(f, "web-1 -n shop"), connectionsCheck(f, "web-1 -n shop")} {
			checks++
			if c.Status != Fail || !strings.Contains(c.Evidence, "ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE=\"0\"") || !strings.Contains(c.Fix, tc.fix) {
				t.Errorf("%s, %s: %+v", tc.name, c.Name, c)
			}
		}
	}
	// Without the environment: the drift's fix is a command, the bypass by
	// another uid is not called the proxy's.
	f := Facts{Pod: pod(deploymentPod), Connections: true, Capture: &capture.CaptureReport{Expected: "x", ConnectionsSummary: "1 flow", Connections: bypass,
		Drift: &capture.Drift{Extra: []string{"x"}}}}
	checks += 2
	if c := captureCheck(f, "web-1 -n shop"); !strings.HasPrefix(c.Fix, "kubectl delete pod web-1 -n shop   # ") {
		t.Errorf("drift fix: %q", c.Fix)
	}
	if c := connectionsCheck(f, "web-1 -n shop"); strings.Contains(c.Fix, "the proxy's own") {
		t.Errorf("gid 0 called the proxy's: %q", c.Fix)
	}
	t.Logf("%d checks", checks)
}
