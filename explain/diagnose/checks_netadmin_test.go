package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
)

// netSetup is a Deployment's pod with an init container of its own, with
// NET_ADMIN, that flushes the nat table after istio-init.
func netSetup(p *corev1.Pod) {
	deploymentPod(p)
	p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "net-setup", Command: []string{"sh", "-c", "iptables -t nat -F"},
		SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}})
}

// webTemplate is Deployment web's template with the pod's own containers.
func webTemplate(init ...corev1.Container) *WorkloadState {
	return &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "web", Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: init, Containers: []corev1.Container{{Name: "app"}}}}}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeOtherNetAdmin, pod: netSetup,
		owner:  webTemplate(corev1.Container{Name: "net-setup"}),
		status: Warning, evidence: `init container net-setup has NET_ADMIN (or is privileged), and its command runs "sh -c iptables -t nat -F"`,
		fix: `kubectl patch deployment/web -n shop --type=json -p '[{"op":"remove","path":"/spec/template/spec/initContainers/0"}]'`})
}

// A container of the pod's own with NET_ADMIN warns, names itself, and
// with the rules read is the cause of their drift (fail, its removal the
// fix) or, rules intact, only info; privileged counts; Istio's own
// containers, a pod not captured, or no NET_ADMIN: nothing.
func TestOtherNetAdmin(t *testing.T) {
	yes := true
	drift := &capture.CaptureReport{Expected: "x", Drift: &capture.Drift{Missing: []string{"-A OUTPUT -p tcp -j ISTIO_OUTPUT"}, Extra: []string{}}}
	clean := &capture.CaptureReport{Expected: "x", Drift: &capture.Drift{Missing: []string{}, Extra: []string{}}}
	cases := []struct {
		name    string
		change  func(p *corev1.Pod)
		capture *capture.CaptureReport
		status  string
		want    string
	}{
		{name: "NET_ADMIN init, rules not read", change: netSetup, status: Warning, want: "--rules"},
		{name: "NET_ADMIN init, rules drift", change: netSetup, capture: drift, status: Fail, want: `"op":"remove","path":"/spec/template/spec/initContainers/0"`},
		{name: "NET_ADMIN init, rules intact", change: netSetup, capture: clean, status: Info, want: "those istio-init's arguments call for"},
		{name: "privileged sidecar", change: func(p *corev1.Pod) {
			deploymentPod(p)
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "vpn", SecurityContext: &corev1.SecurityContext{Privileged: &yes}})
		}, status: Warning, want: "container vpn has NET_ADMIN"},
		{name: "no NET_ADMIN", change: deploymentPod},
		{name: "not captured", change: func(p *corev1.Pod) {
			netSetup(p)
			p.Spec.InitContainers = p.Spec.InitContainers[1:]
		}},
	}
	for _, tc := range cases {
		d := Diagnose(checkCase{pod: tc.change, owner: webTemplate(corev1.Container{Name: "net-setup"}), capture: tc.capture}.facts())
		fs := only(d.Findings, CodeOtherNetAdmin)
		if tc.status == "" {
			if len(fs) != 0 {
				t.Errorf("%s: %+v", tc.name, fs)
			}
			continue
		}
		if len(fs) != 1 || fs[0].Status != tc.status || !strings.Contains(fs[0].Evidence+"\n"+fs[0].Fix, tc.want) {
			t.Errorf("%s: want one %s with %q, got %+v", tc.name, tc.status, tc.want, fs)
			continue
		}
		if tc.capture == drift {
			// The drift is put down to it: its fix is the removal.
			rows := only(d.Findings, CodeRulesDrift)
			if len(rows) != 1 || rows[0].Fix != fs[0].Fix || !strings.Contains(rows[0].Evidence, "the likely cause") {
				t.Errorf("%s: the drift is not put down to net-setup: %+v", tc.name, rows)
			}
		}
	}
	t.Logf("%d cases", len(cases))
}
