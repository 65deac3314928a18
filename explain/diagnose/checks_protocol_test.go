package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func init() {
	checkCases = append(checkCases,
		checkCase{code: CodeProtocolConflict, services: []corev1.Service{svc("a", sport("http-web", 8080, 8080)), svc("b", sport("tcp-raw", 8080, 8080))},
			status: Warning, evidence: "Service port 8080: a port 8080 (http) and b port 8080 (tcp)",
			fix: `kubectl patch service b -n shop --type=json -p '[{"op":"add","path":"/spec/ports/0/appProtocol","value":"http"}]'   # a choice`},
		checkCase{code: CodeTargetPortConflict, services: []corev1.Service{svc("a", sport("http", 80, 8080)), svc("b", sport("http-alt", 8080, 8080))},
			status: Warning, evidence: "target port 8080 from a port 80 and b port 8080",
			fix: `kubectl patch service b -n shop --type=json -p '[{"op":"replace","path":"/spec/ports/0/port","value":80}]'   # a choice`})
}

// Two Services that give one port (a Service port, or a target port on
// the pod) different protocols warn, naming both and patching the odd
// one's appProtocol with the other way in the comment; ports that agree,
// or differ only in name, have no finding.
func TestProtocolConflict(t *testing.T) {
	udp := sport("udp-raw", 8080, 8080)
	udp.Protocol = corev1.ProtocolUDP
	app := "http"
	withApp := sport("raw", 8080, 8080)
	withApp.AppProtocol = &app
	cases := []struct {
		name     string
		services []corev1.Service
		evidence string // "" for no finding
		fix      string
	}{
		{name: "healthy: one Service", services: []corev1.Service{svc("a", sport("http-web", 80, 8080), sport("tcp-admin", 9000, 9000))}},
		{name: "healthy: two Services agree", services: []corev1.Service{svc("a", sport("http-web", 80, 8080)), svc("b", sport("http-alt", 8080, 8080))}},
		{name: "healthy: appProtocol agrees with a name", services: []corev1.Service{svc("a", sport("http-web", 8080, 8080)), svc("b", withApp)}},
		{name: "same Service port", services: []corev1.Service{svc("a", sport("http-web", 8080, 8080)), svc("b", sport("tcp-raw", 8080, 8080))},
			evidence: "Service port 8080: a port 8080 (http) and b port 8080 (tcp)",
			fix:      `kubectl patch service a -n shop --type=json -p '[{"op":"add","path":"/spec/ports/0/appProtocol","value":"tcp"}]'`},
		{name: "same target port through two Service ports (istio/istio#31885)",
			services: []corev1.Service{svc("catalog", sport("http-web", 80, 8080)), svc("catalog-raw", sport("tcp-raw", 8080, 8080))},
			evidence: "target port 8080 on the pod: catalog port 80 (http) and catalog-raw port 8080 (tcp)",
			fix:      `kubectl patch service catalog-raw -n shop --type=json -p '[{"op":"add","path":"/spec/ports/0/appProtocol","value":"http"}]'   # a choice: the protocol the app speaks on target port 8080 on the pod is http`},
		{name: "TCP and UDP on one number: no patch, the other port", services: []corev1.Service{svc("a", sport("http-web", 8080, 8080)), svc("b", udp)},
			evidence: "Service port 8080: a port 8080 (http) and b port 8080 (udp)", fix: "give one of the Services another port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := only(Diagnose(checkCase{services: tc.services}.facts()).Findings, CodeProtocolConflict)
			if tc.evidence == "" {
				if len(fs) != 0 {
					t.Fatalf("fired: %+v", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Status != Warning || !strings.Contains(fs[0].Evidence, tc.evidence) || !strings.Contains(fs[0].Fix, tc.fix) {
				t.Fatalf("got %+v\nwant evidence with %q, fix with %q", fs, tc.evidence, tc.fix)
			}
		})
	}
}

// Two ports of one Service on one target port: the fix removes one (two
// ports of a Service cannot share a number); across Services it renumbers.
func TestTargetPortConflictOneService(t *testing.T) {
	f := checkCase{services: []corev1.Service{svc("web", sport("http", 80, 8080), sport("tcp-legacy", 9090, 8080))}}.facts()
	fs := only(Diagnose(f).Findings, CodeTargetPortConflict)
	if len(fs) != 1 || !strings.Contains(fs[0].Fix, `[{"op":"remove","path":"/spec/ports/1"}]`) || strings.Contains(fs[0].Fix, `"replace"`) {
		t.Fatalf("one Service: %+v", fs)
	}
}
