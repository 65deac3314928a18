package injection

import "testing"

// The values istiod refuses at admission, as the ground-truth e2e saw real
// istiod refuse or admit them.
func TestInvalidAnnotations(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		refused     bool
	}{
		{"traffic.sidecar.istio.io/excludeOutboundIPRanges", "10.0.0.0/33", true},
		{"traffic.sidecar.istio.io/excludeOutboundIPRanges", "10.0.0.0/8,fd00::/8", false},
		{"traffic.sidecar.istio.io/excludeOutboundIPRanges", "", false},
		{"traffic.sidecar.istio.io/excludeOutboundIPRanges", "10.0.0.1", true},
		{"traffic.sidecar.istio.io/includeOutboundIPRanges", "*", false},
		{"traffic.sidecar.istio.io/includeOutboundIPRanges", "10.0.0.0/8, 192.168.0.0/16", true},
		{"traffic.sidecar.istio.io/excludeOutboundIPRanges", "*", true},
		{"traffic.sidecar.istio.io/includeInboundPorts", "*", false},
		{"traffic.sidecar.istio.io/includeInboundPorts", "8080, 9090", false},
		{"traffic.sidecar.istio.io/excludeInboundPorts", "70000", true},
		{"traffic.sidecar.istio.io/excludeOutboundPorts", "http", true},
		{"traffic.sidecar.istio.io/excludeOutboundPorts", "*", true},
		{"traffic.sidecar.istio.io/includeOutboundPorts", "abc", false},
		{"sidecar.istio.io/interceptionMode", "TPROXY", false},
		{"sidecar.istio.io/interceptionMode", "redirect", true},
		{"status.sidecar.istio.io/port", " 15020 ", false},
		{"status.sidecar.istio.io/port", "-1", true},
		{"readiness.status.sidecar.istio.io/periodSeconds", "5s", true},
		{"traffic.sidecar.istio.io/excludeInterfaces", "eth1, net-2", false},
		{"traffic.sidecar.istio.io/excludeInterfaces", "1eth", true},
		{"traffic.sidecar.istio.io/excludeInterfaces", "averyveryverylongname", true},
		{"traffic.sidecar.istio.io/excludeInterfaces", "eth0,,eth1", true},
		{"prometheus.istio.io/merge-metrics", "yes", true},
		{"sidecar.istio.io/proxyCPU", "100m", false},
		{"sidecar.istio.io/proxyMemory", "lots", true},
	} {
		got := invalidAnnotations(map[string]string{tc.name: tc.value})
		if (len(got) > 0) != tc.refused {
			t.Errorf("%s=%q: refused %v, want %v (%v)", tc.name, tc.value, len(got) > 0, tc.refused, got)
		}
	}
}
