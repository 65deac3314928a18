package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// portsPrivileged: a StatefulSet's pod whose sysctl makes ports below
// 16000 privileged; its proxy crash-loops on "bind: permission denied"
// (red team round 21's 01).
func portsPrivileged(p *corev1.Pod) {
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "api", Controller: &yes}}
	p.Name = "api-0"
	p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "16000"}}}
	crashing(0)(p)
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeProxyPortsPrivileged, pod: portsPrivileged, status: Fail,
		evidence: `the pod's securityContext sets net.ipv4.ip_unprivileged_port_start=16000`,
		fix:      `kubectl patch statefulset/api -n shop --type=strategic -p '{"spec":{"template":{"spec":{"securityContext":{"sysctls":null}}}}}'`})
}

// Above 15000 fails, whatever the proxy's state; 1024, or a proxy allowed
// to bind low ports, or no sidecar, pass; other sysctls are kept.
func TestProxyPortsPrivileged(t *testing.T) {
	checks := 0
	sysctl := func(value string, more ...corev1.Sysctl) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			portsPrivileged(p)
			p.Status = pod(nil).Status
			p.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: append([]corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: value}}, more...)}
		}
	}
	for _, tc := range []struct {
		name   string
		pod    func(p *corev1.Pod)
		status string
		fix    string
	}{
		{"16000, crash-looping", portsPrivileged, Fail, `"sysctls":null`},
		{"16000, another sysctl kept", sysctl("16000", corev1.Sysctl{Name: "net.ipv4.ping_group_range", Value: "0 1000"}), Fail, `"sysctls":[{"name":"net.ipv4.ping_group_range","value":"0 1000"}]`},
		{"1024", sysctl("1024"), "", ""},
		{"0", sysctl("0"), "", ""},
		{"the proxy may bind low ports", func(p *corev1.Pod) {
			sysctl("16000")(p)
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}}
		}, "", ""},
		{"no sidecar", func(p *corev1.Pod) { sysctl("16000")(p); notInjected(p) }, "", ""},
	} {
		d := Diagnose(checkCase{pod: tc.pod}.facts())
		got := ""
		for _, f := range d.Findings {
			if f.Code == CodeProxyPortsPrivileged {
				got = f.Status
				checks++
				if !strings.Contains(f.Fix, tc.fix) {
					t.Errorf("%s: fix %q, want %q in it", tc.name, f.Fix, tc.fix)
				}
			}
		}
		checks++
		if got != tc.status {
			t.Errorf("%s: status %q, want %q", tc.name, got, tc.status)
		}
		if tc.name == "16000, crash-looping" {
			checks++
			if !strings.Contains(d.Verdict, "the likely cause: the pod's securityContext sets net.ipv4.ip_unprivileged_port_start=16000") || !strings.Contains(d.Fix, `"sysctls":null`) {
				t.Errorf("%s: first %s %q fix %q: the crash loop does not carry the sysctl and its fix", tc.name, d.Code, d.Verdict, d.Fix)
			}
		}
	}
	t.Logf("%d checks", checks)
}
