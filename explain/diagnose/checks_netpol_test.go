package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// netpol is a NetworkPolicy of shop selecting app=web, of the types given.
func netpol(name string, types []networkingv1.PolicyType, ingress []networkingv1.NetworkPolicyIngressRule, egress []networkingv1.NetworkPolicyEgressRule) networkingv1.NetworkPolicy {
	return networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: types, Ingress: ingress, Egress: egress}}
}

// npPorts are a rule's ports: "TCP" or "UDP" then numbers (0: no number).
func npPorts(proto corev1.Protocol, ports ...int32) []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for _, p := range ports {
		pr := proto
		np := networkingv1.NetworkPolicyPort{Protocol: &pr}
		if p != 0 {
			v := intstr.FromInt32(p)
			np.Port = &v
		}
		out = append(out, np)
	}
	return out
}

func ingressOn(ports ...int32) []networkingv1.NetworkPolicyIngressRule {
	return []networkingv1.NetworkPolicyIngressRule{{Ports: npPorts(corev1.ProtocolTCP, ports...),
		From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "frontend"}}}}}}
}

var (
	ingressOnly = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egressOnly  = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
)

// ambientWeb is an ambient pod labelled app=web.
func ambientWeb(p *corev1.Pod) {
	p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
	p.Spec.Containers, p.Status.ContainerStatuses = p.Spec.Containers[1:], p.Status.ContainerStatuses[1:]
	p.Labels = map[string]string{"app": "web", "istio.io/dataplane-mode": "ambient"}
	p.Annotations = map[string]string{"ambient.istio.io/redirection": "enabled"}
}

func ambientReport(r *injection.InjectionReport) {
	no := false
	r.Injected, r.Expected, r.Ambient = &no, &no, true
}

// dnsOnly is an egress rule for DNS alone.
var dnsOnly = []networkingv1.NetworkPolicyEgressRule{{Ports: append(npPorts(corev1.ProtocolUDP, 53), npPorts(corev1.ProtocolTCP, 53)...)}}

func init() {
	checkCases = append(checkCases,
		checkCase{code: CodePolicyBlocksHBONE, pod: ambientWeb, inj: ambientReport,
			policies: []networkingv1.NetworkPolicy{netpol("web-in", ingressOnly, ingressOn(8080), nil)}, status: Fail,
			evidence: "NetworkPolicy web-in (podSelector app=web) admits ingress on TCP 8080, and none admits TCP 15008",
			fix:      `kubectl patch networkpolicy web-in -n shop --type=json -p '[{"op":"add","path":"/spec/ingress/0/ports/-","value":{"port":15008,"protocol":"TCP"}}]'`},
		checkCase{code: CodePolicyBlocksIstiod, pod: func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": "web"}
			p.Status.ContainerStatuses[0].Ready = false
		}, policies: []networkingv1.NetworkPolicy{netpol("web-out", egressOnly, nil, dnsOnly)}, status: Fail,
			evidence: "NetworkPolicy web-out (podSelector app=web) restricts the pod's egress to UDP 53, TCP 53, and none admits TCP 15012",
			fix:      `kubectl patch networkpolicy web-out -n shop --type=json -p '[{"op":"add","path":"/spec/egress/-","value":{"ports":[{"port":15012,"protocol":"TCP"}]}}]'`},
	)
}

// An ambient pod's policies: what admits 15008 (the port, a rule without
// ports, a range, another policy) or isolates the pod entirely, or only
// its egress, has no finding; what admits other ports only fails, each
// rule patched; unread policies are unknown.
func TestPolicyBlocksHBONE(t *testing.T) {
	end := int32(15010)
	rangeRule := ingressOn(15000)
	rangeRule[0].Ports[0].EndPort = &end
	cases := []struct {
		name     string
		pod      func(p *corev1.Pod)
		inj      func(r *injection.InjectionReport)
		policies []networkingv1.NetworkPolicy
		unknown  string
		status   string
		evidence string
		fix      string
	}{
		{name: "healthy: no policy"},
		{name: "healthy: 15008 admitted", policies: []networkingv1.NetworkPolicy{netpol("p", ingressOnly, ingressOn(8080, 15008), nil)}},
		{name: "healthy: a rule with no ports", policies: []networkingv1.NetworkPolicy{netpol("p", ingressOnly, []networkingv1.NetworkPolicyIngressRule{{}}, nil)}},
		{name: "healthy: a range over 15008", policies: []networkingv1.NetworkPolicy{netpol("p", ingressOnly, rangeRule, nil)}},
		{name: "healthy: TCP with no number", policies: []networkingv1.NetworkPolicy{netpol("p", ingressOnly, ingressOn(0), nil)}},
		{name: "healthy: another policy admits it", policies: []networkingv1.NetworkPolicy{
			netpol("a", ingressOnly, ingressOn(8080), nil), netpol("b", ingressOnly, ingressOn(15008), nil)}},
		{name: "healthy: isolated entirely, on purpose", policies: []networkingv1.NetworkPolicy{netpol("deny", ingressOnly, nil, nil)}},
		{name: "healthy: egress only", policies: []networkingv1.NetworkPolicy{netpol("out", egressOnly, nil, dnsOnly)}},
		{name: "healthy: a sidecar pod", pod: func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} }, inj: func(*injection.InjectionReport) {},
			policies: []networkingv1.NetworkPolicy{netpol("p", ingressOnly, ingressOn(8080), nil)}},
		{name: "8080 only, policyTypes implied", policies: []networkingv1.NetworkPolicy{netpol("p", nil, ingressOn(8080), nil)}, status: Fail,
			evidence: "NetworkPolicy p (podSelector app=web) admits ingress on TCP 8080, and none admits TCP 15008"},
		{name: "a deny-all beside an allow on 8080", policies: []networkingv1.NetworkPolicy{
			netpol("deny", ingressOnly, nil, nil), netpol("allow", ingressOnly, append(ingressOn(8080), ingressOn(9090)...), nil)}, status: Fail,
			evidence: "NetworkPolicy deny (podSelector app=web, no ingress rule); NetworkPolicy allow (podSelector app=web) admits ingress on TCP 8080; TCP 9090",
			fix:      `kubectl patch networkpolicy allow -n shop --type=json -p '[{"op":"add","path":"/spec/ingress/0/ports/-","value":{"port":15008,"protocol":"TCP"}},{"op":"add","path":"/spec/ingress/1/ports/-","value":{"port":15008,"protocol":"TCP"}}]'`},
		{name: "unread: unknown", unknown: "forbidden: list networkpolicies (namespace shop)", status: Unknown, evidence: "could not be read"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod, inj := tc.pod, tc.inj
			if pod == nil {
				pod = ambientWeb
			}
			if inj == nil {
				inj = ambientReport
			}
			f := checkCase{pod: pod, inj: inj, policies: tc.policies}.facts()
			f.NetworkPoliciesUnknown = tc.unknown
			checkFindings(t, only(Diagnose(f).Findings, CodePolicyBlocksHBONE), tc.status, tc.evidence, tc.fix)
		})
	}
}

// A sidecar pod's egress policies: what admits istiod's port (the port, no
// ports, a range, the proxy's own discoveryAddress) has no finding; what
// does not fails with the proxy not ready, warns with it ready, and adds
// DNS when that is not admitted either.
func TestPolicyBlocksIstiod(t *testing.T) {
	web := func(ready bool) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Labels = map[string]string{"app": "web"}
			p.Status.ContainerStatuses[0].Ready = ready
		}
	}
	tcpTo := func(ports ...int32) []networkingv1.NetworkPolicyEgressRule {
		return []networkingv1.NetworkPolicyEgressRule{{Ports: npPorts(corev1.ProtocolTCP, ports...)}}
	}
	cases := []struct {
		name     string
		pod      func(p *corev1.Pod)
		policies []networkingv1.NetworkPolicy
		unknown  string
		status   string
		evidence string
		fix      string
	}{
		{name: "healthy: no policy"},
		{name: "healthy: ingress only", policies: []networkingv1.NetworkPolicy{netpol("in", ingressOnly, ingressOn(8080), nil)}},
		{name: "healthy: 15012 admitted", policies: []networkingv1.NetworkPolicy{netpol("out", egressOnly, nil, append(dnsOnly, tcpTo(15012)...))}},
		{name: "healthy: a rule with no ports", policies: []networkingv1.NetworkPolicy{netpol("out", egressOnly, nil, []networkingv1.NetworkPolicyEgressRule{{}})}},
		{name: "healthy: the proxy's own discovery port", pod: func(p *corev1.Pod) {
			web(false)(p)
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "PROXY_CONFIG", Value: `{"discoveryAddress":"istiod-remote.example:443"}`}}
		}, policies: []networkingv1.NetworkPolicy{netpol("out", egressOnly, nil, append(dnsOnly, tcpTo(443)...))}},
		{name: "healthy: an ambient pod", pod: ambientWeb, policies: []networkingv1.NetworkPolicy{netpol("out", egressOnly, nil, dnsOnly)}},
		{name: "proxy ready: a warning", pod: web(true), policies: []networkingv1.NetworkPolicy{netpol("out", egressOnly, nil, dnsOnly)}, status: Warning,
			evidence: "the proxy is ready all the same"},
		{name: "deny all egress, proxy not ready: DNS too", pod: web(false), policies: []networkingv1.NetworkPolicy{netpol("deny", egressOnly, nil, nil)}, status: Fail,
			evidence: "NetworkPolicy deny (podSelector app=web) restricts the pod's egress, with no egress rule, and none admits TCP 15012, istiod's port for the proxy's configuration (xDS) and certificate; nor DNS (UDP 53)",
			fix:      `kubectl patch networkpolicy deny -n shop --type=json -p '[{"op":"add","path":"/spec/egress","value":[{"ports":[{"port":15012,"protocol":"TCP"}]},{"ports":[{"port":53,"protocol":"UDP"},{"port":53,"protocol":"TCP"}]}]}]'`},
		{name: "istiod admitted, DNS not", pod: web(false), policies: []networkingv1.NetworkPolicy{netpol("out", egressOnly, nil, tcpTo(15012))}, status: Fail,
			evidence: "TCP 15012 to istiod is admitted, but not DNS (UDP 53)",
			fix:      `kubectl patch networkpolicy out -n shop --type=json -p '[{"op":"add","path":"/spec/egress/-","value":{"ports":[{"port":53,"protocol":"UDP"},{"port":53,"protocol":"TCP"}]}}]'`},
		{name: "egress implied by its rules", pod: web(false), policies: []networkingv1.NetworkPolicy{netpol("out", nil, nil, tcpTo(443))}, status: Fail,
			evidence: "restricts the pod's egress to TCP 443", fix: `{"op":"add","path":"/spec/egress/-","value":{"ports":[{"port":53,"protocol":"UDP"},{"port":53,"protocol":"TCP"}]}}`},
		{name: "unread: unknown", pod: web(true), unknown: "forbidden: list networkpolicies (namespace shop)", status: Unknown, evidence: "could not be read"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := checkCase{pod: tc.pod, policies: tc.policies}.facts()
			f.NetworkPoliciesUnknown = tc.unknown
			checkFindings(t, only(Diagnose(f).Findings, CodePolicyBlocksIstiod), tc.status, tc.evidence, tc.fix)
		})
	}
}

// checkFindings: no finding when status is "", else one of that status
// whose evidence and fix hold what is given; an unknown names a permission.
func checkFindings(t *testing.T, fs []Finding, status, evidence, fix string) {
	t.Helper()
	if status == "" {
		if len(fs) != 0 {
			t.Fatalf("fired: %+v", fs)
		}
		return
	}
	if len(fs) != 1 || fs[0].Status != status || !strings.Contains(fs[0].Evidence, evidence) || !strings.Contains(fs[0].Fix, fix) {
		t.Fatalf("got %+v\nwant %s, evidence with %q, fix with %q", fs, status, evidence, fix)
	}
	if status == Unknown && len(fs[0].Needs) == 0 {
		t.Errorf("unknown without the permission: %+v", fs[0])
	}
}
