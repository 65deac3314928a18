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
		status: Fail, evidence: `init container net-setup has NET_ADMIN (or is privileged), and its command runs "sh -c iptables -t nat -F"`,
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
		// Its command says it flushes the nat table: a failure, no rules
		// to read; its only call, so the container is removed.
		{name: "NET_ADMIN init flushing nat, rules not read", change: netSetup, status: Fail, want: "its command flushes or deletes the nat table's capture rules, after istio-init wrote them"},
		{name: "NET_ADMIN init, a command that says nothing: --rules", change: func(p *corev1.Pod) {
			netSetup(p)
			p.Spec.InitContainers[1].Command = []string{"/setup-network"}
		}, status: Warning, want: "--rules"},
		{name: "NET_ADMIN init before istio-init: its rules come first", change: func(p *corev1.Pod) {
			netSetup(p)
			p.Spec.InitContainers[0], p.Spec.InitContainers[1] = p.Spec.InitContainers[1], p.Spec.InitContainers[0]
		}, status: Warning, want: "--rules"},
		// An app that deletes the inbound jump, then serves: the call taken
		// out of its script, the app kept (red team round 13's 03).
		{name: "app deleting the inbound jump: the call taken out", change: func(p *corev1.Pod) {
			deploymentPod(p)
			p.Spec.Containers[1].Command = []string{"sh", "-c", "sleep 3; iptables -t nat -D PREROUTING -p tcp -j ISTIO_INBOUND; httpd -f -p 8080"}
			p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}}
		}, status: Fail, want: `kubectl patch deployment/web -n shop --type=json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/command/2","value":"sleep 3; httpd -f -p 8080"}]'`},
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

// What a netfilter call does to the capture rules, read from its words:
// deletes, flushes and ACCEPT/RETURN inserts in the nat table undo it;
// filter-table rules and new chains leave it; the script keeps the rest.
func TestDropRuleCalls(t *testing.T) {
	cases := []struct {
		script, kept, what string
	}{
		{"sleep 3; iptables -t nat -D PREROUTING -p tcp -j ISTIO_INBOUND; httpd -f -p 8080", "sleep 3; httpd -f -p 8080", "deletes a jump"},
		{"iptables -t nat -I PREROUTING -p tcp --dport 6379 -j ACCEPT && exec redis-server", "exec redis-server", "ACCEPT or RETURN"},
		{"iptables -t nat -F", "", "flushes"},
		{"nft flush table ip nat; run", "run", "nft"},
		{"iptables -I OUTPUT -p tcp --dport 25 -j DROP; run", "", ""},
		{"iptables -t nat -N APP_CHAIN; run", "", ""},
		{"echo iptables -t nat -F; run", "", ""},
	}
	for _, tc := range cases {
		kept, what, _ := dropRuleCalls(tc.script)
		if !strings.Contains(what, tc.what) || tc.what == "" && what != "" || tc.what != "" && kept != tc.kept {
			t.Errorf("%q: kept %q what %q; want %q, %q", tc.script, kept, what, tc.kept, tc.what)
		}
	}
}

// The fix takes the calls out and, when nothing left runs a netfilter
// tool, the container's NET_ADMIN too (NET_RAW kept).
func TestTamperFixDropsNetAdmin(t *testing.T) {
	tc := corev1.Container{Name: "cache", SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_RAW", "NET_ADMIN"}}}}
	in := &Input{Facts: Facts{Pod: pod(deploymentPod)}}
	got := tamperFix(in, "statefulset/cache", "containers", 0, tc, "command", 2, "httpd -f -p 6379")
	want := `kubectl patch statefulset/cache -n shop --type=json -p '[{"op":"replace","path":"/spec/template/spec/containers/0/command/2","value":"httpd -f -p 6379"},{"op":"remove","path":"/spec/template/spec/containers/0/securityContext/capabilities/add/1"}]'`
	if !strings.HasPrefix(got, want) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := tamperFix(in, "statefulset/cache", "containers", 0, tc, "command", 2, "iptables -t nat -L; run"); strings.Contains(got, "capabilities") {
		t.Errorf("a netfilter call is left, NET_ADMIN dropped: %s", got)
	}
}
