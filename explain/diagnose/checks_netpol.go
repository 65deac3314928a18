package diagnose

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Checks of the NetworkPolicies that select the pod: static, in every sweep.
const (
	CodePolicyBlocksHBONE  = "KM-CONN-008"
	CodePolicyBlocksIstiod = "KM-START-016"
)

// The ports the checks look for: ztunnel's HBONE tunnel into an ambient
// pod, istiod's xDS and CA port, and DNS.
const (
	portHBONE  = 15008
	portIstiod = 15012
	portDNS    = 53
)

func init() {
	reads := []Fact{FactPod, FactPolicies}
	register(&Spec{Code: CodePolicyBlocksHBONE, Title: "ambient: a NetworkPolicy drops HBONE (15008)", Stage: CheckConnections, Kind: Static, Status: Fail,
		Reads:   reads,
		Means:   "An ambient pod's mesh traffic arrives through ztunnel's HBONE tunnel, on TCP port 15008 of the pod; NetworkPolicy is enforced outside the pod, on that port. A policy selecting the pod that admits traffic on the app's ports but not on 15008 drops every connection the mesh carries to it.",
		Detects: "The NetworkPolicies whose podSelector matches the pod's labels, in its namespace, on a pod in ambient mode without a sidecar: when some restrict its ingress and admit some traffic, whether any of their rules admits TCP 15008 (a rule with no ports, the port, a range over it). A pod that every policy isolates entirely (no ingress rule at all) is left alone: that is meant.",
		Fixes:   "A kubectl patch of each policy: TCP 15008 added to the ports of each of its ingress rules, beside the app's ports, as Istio's docs show (the rule's peers stay as they are).",
		Source:  "Istio docs, Ambient and Kubernetes NetworkPolicy (ambient traffic overlay)",
		Planted: "an ambient pod and a NetworkPolicy selecting it that admits ingress on TCP 8080 only",
		run:     policyBlocksHBONE})
	register(&Spec{Code: CodePolicyBlocksIstiod, Title: "a NetworkPolicy keeps the proxy from istiod", Stage: CheckStart, Kind: Static, Status: Fail,
		Reads:   reads,
		Means:   "A NetworkPolicy selecting a pod with a sidecar restricts its egress and admits nothing to TCP 15012, the port the proxy gets its configuration (xDS) and certificate from istiod on: the proxy never becomes ready. It fails when the proxy is not ready; when it is (the network plugin does not enforce the policy, or istiod is reached otherwise), it warns.",
		Detects: "The NetworkPolicies whose podSelector matches the pod's labels, in its namespace, with policy type Egress: whether any egress rule admits TCP to istiod's port (the proxy's discoveryAddress, 15012 by default): a rule with no ports, the port, or a range over it; and whether DNS (UDP 53), which the agent resolves istiod with, is admitted.",
		Fixes:   "A kubectl patch of the policy that adds an egress rule for TCP 15012, and one for DNS (UDP and TCP 53) when that is not admitted either.",
		Source:  "Istio docs, ports used by Istio (15012: xDS and CA); Kubernetes NetworkPolicy semantics (policyTypes Egress isolates the pod's egress)",
		Planted: "a sidecar pod and a NetworkPolicy selecting it with policyTypes Egress that admits DNS only",
		run:     policyBlocksIstiod})
}

// policiesUnread is the finding of a check of the NetworkPolicies that
// could not be read: unknown, with the permission that reads them.
func policiesUnread(in *Input) []Finding {
	return []Finding{{Status: Unknown, Evidence: "the NetworkPolicies that select the pod could not be read: " + in.NetworkPoliciesUnknown,
		Needs: []string{"list networkpolicies (namespace " + in.Pod.Namespace + ")"}}}
}

// restricts says the policy restricts the pod's traffic of that direction
// (its policyTypes; without them, Ingress always, Egress when it has
// egress rules).
func restricts(np networkingv1.NetworkPolicy, t networkingv1.PolicyType) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return t == networkingv1.PolicyTypeIngress || len(np.Spec.Egress) > 0
	}
	return slices.Contains(np.Spec.PolicyTypes, t)
}

// admits says a rule's ports admit port/proto on the pod: a rule with no
// ports admits every port (from its peers), a port with no number every
// port of its protocol; a named port is the pod's declared one.
func admits(ports []networkingv1.NetworkPolicyPort, port int32, proto corev1.Protocol, p *corev1.Pod) bool {
	if len(ports) == 0 {
		return true
	}
	for _, np := range ports {
		pr := corev1.ProtocolTCP
		if np.Protocol != nil {
			pr = *np.Protocol
		}
		if pr != proto {
			continue
		}
		switch {
		case np.Port == nil:
			return true
		case np.Port.Type == intstr.String:
			for _, d := range declaredPorts(p, proto) {
				if d.port.Name == np.Port.StrVal && d.port.ContainerPort == port {
					return true
				}
			}
		case np.EndPort != nil:
			if np.Port.IntVal <= port && port <= *np.EndPort {
				return true
			}
		case np.Port.IntVal == port:
			return true
		}
	}
	return false
}

// portsSaid names what a rule's ports admit ("TCP 8080, UDP 53").
func portsSaid(ports []networkingv1.NetworkPolicyPort) string {
	var out []string
	for _, np := range ports {
		pr := "TCP"
		if np.Protocol != nil {
			pr = string(*np.Protocol)
		}
		switch {
		case np.Port == nil:
			out = append(out, pr+" (every port)")
		case np.EndPort != nil:
			out = append(out, fmt.Sprintf("%s %s-%d", pr, np.Port.String(), *np.EndPort))
		default:
			out = append(out, pr+" "+np.Port.String())
		}
	}
	return strings.Join(out, ", ")
}

// selectorSaid is a policy's podSelector as kubectl shows it.
func selectorSaid(np networkingv1.NetworkPolicy) string {
	if len(np.Spec.PodSelector.MatchLabels) == 0 && len(np.Spec.PodSelector.MatchExpressions) == 0 {
		return "an empty podSelector (every pod of its namespace)"
	}
	return "podSelector " + metav1.FormatLabelSelector(&np.Spec.PodSelector)
}

// ambientOnly is the pod when it is in ambient mode without a sidecar.
func ambientOnly(in *Input) *corev1.Pod {
	p := in.Pod
	if p == nil || in.injected() || p.Spec.HostNetwork {
		return nil
	}
	if in.Injection != nil && in.Injection.Ambient || p.Labels[istio.LabelDataplaneMode] == "ambient" {
		return p
	}
	return nil
}

func policyBlocksHBONE(in *Input) []Finding {
	p := ambientOnly(in)
	if p == nil {
		return nil
	}
	if in.NetworkPoliciesUnknown != "" {
		return policiesUnread(in)
	}
	var restricting []networkingv1.NetworkPolicy
	anyRule := false
	for _, np := range in.NetworkPolicies {
		if !restricts(np, networkingv1.PolicyTypeIngress) {
			continue
		}
		restricting = append(restricting, np)
		for _, r := range np.Spec.Ingress {
			anyRule = true
			if admits(r.Ports, portHBONE, corev1.ProtocolTCP, p) {
				return nil
			}
		}
	}
	if !anyRule {
		return nil // isolated on purpose, or not at all
	}
	var said, fixes []string
	for _, np := range restricting {
		if len(np.Spec.Ingress) == 0 {
			said = append(said, "NetworkPolicy "+np.Name+" ("+selectorSaid(np)+", no ingress rule)")
			continue
		}
		var rules, ops []string
		for j, r := range np.Spec.Ingress {
			rules = append(rules, portsSaid(r.Ports))
			ops = append(ops, fmt.Sprintf(`{"op":"add","path":"/spec/ingress/%d/ports/-","value":{"port":%d,"protocol":"TCP"}}`, j, portHBONE))
		}
		said = append(said, "NetworkPolicy "+np.Name+" ("+selectorSaid(np)+") admits ingress on "+strings.Join(rules, "; "))
		fixes = append(fixes, fmt.Sprintf("kubectl patch networkpolicy %s -n %s --type=json -p '[%s]'", np.Name, np.Namespace, strings.Join(ops, ",")))
	}
	ev := strings.Join(said, "; ") + fmt.Sprintf(", and none admits TCP %d: in ambient mode the mesh's traffic reaches the pod through ztunnel's HBONE tunnel on port %d, which the network plugin drops, so no connection through the mesh reaches the app", portHBONE, portHBONE)
	return []Finding{{Evidence: ev, Fix: strings.Join(fixes, "\n") + "   # the rules' peers stay as they are"}}
}

// discoveryPort is the port the proxy reaches istiod on: its
// discoveryAddress (PROXY_CONFIG), 15012 by default.
func discoveryPort(p *corev1.Pod) int32 {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name != istio.ProxyContainer {
				continue
			}
			for _, e := range c.Env {
				if e.Name != "PROXY_CONFIG" {
					continue
				}
				var pc struct {
					DiscoveryAddress string `json:"discoveryAddress"`
				}
				if json.Unmarshal([]byte(e.Value), &pc) != nil {
					continue
				}
				if _, port, err := net.SplitHostPort(pc.DiscoveryAddress); err == nil {
					if n, err := strconv.Atoi(port); err == nil && n > 0 && n < 65536 {
						return int32(n)
					}
				}
			}
		}
	}
	return portIstiod
}

// proxyReady says the pod's istio-proxy is ready.
func proxyReady(p *corev1.Pod) bool {
	for _, ss := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, s := range ss {
			if s.Name == istio.ProxyContainer {
				return s.Ready
			}
		}
	}
	return false
}

func policyBlocksIstiod(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil || p.Spec.HostNetwork {
		return nil
	}
	if in.NetworkPoliciesUnknown != "" {
		return policiesUnread(in)
	}
	port := discoveryPort(p)
	var restricting []networkingv1.NetworkPolicy
	dns, istiod := false, false
	for _, np := range in.NetworkPolicies {
		if !restricts(np, networkingv1.PolicyTypeEgress) {
			continue
		}
		restricting = append(restricting, np)
		for _, r := range np.Spec.Egress {
			istiod = istiod || admits(r.Ports, port, corev1.ProtocolTCP, p)
			dns = dns || admits(r.Ports, portDNS, corev1.ProtocolUDP, p)
		}
	}
	if len(restricting) == 0 || istiod && dns {
		return nil
	}
	var said []string
	for _, np := range restricting {
		s := "NetworkPolicy " + np.Name + " (" + selectorSaid(np) + ") restricts the pod's egress"
		var rules []string
		for _, r := range np.Spec.Egress {
			rules = append(rules, portsSaid(r.Ports))
		}
		if len(rules) > 0 {
			s += " to " + strings.Join(rules, "; ")
		} else {
			s += ", with no egress rule"
		}
		said = append(said, s)
	}
	ev := strings.Join(said, "; ")
	switch {
	case !istiod:
		ev += fmt.Sprintf(", and none admits TCP %d, istiod's port for the proxy's configuration (xDS) and certificate", port)
		if !dns {
			ev += "; nor DNS (UDP 53), which the agent resolves istiod's name with"
		}
	default:
		ev += fmt.Sprintf(": TCP %d to istiod is admitted, but not DNS (UDP 53), which the agent resolves istiod's name with (and the app every name)", port)
	}
	f := Finding{Status: Fail}
	if proxyReady(p) {
		f.Status = Warning
		ev += ": the proxy is ready all the same (the network plugin may not enforce NetworkPolicy, or istiod is reached otherwise); once enforced, the proxy gets no configuration"
	} else {
		ev += ": the proxy gets no configuration and is not ready"
	}
	f.Evidence = ev
	var rules []string
	if !istiod {
		rules = append(rules, fmt.Sprintf(`{"ports":[{"port":%d,"protocol":"TCP"}]}`, port))
	}
	if !dns {
		rules = append(rules, fmt.Sprintf(`{"ports":[{"port":%d,"protocol":"UDP"},{"port":%d,"protocol":"TCP"}]}`, portDNS, portDNS))
	}
	np := restricting[0]
	var ops []string
	if len(np.Spec.Egress) == 0 {
		ops = []string{`{"op":"add","path":"/spec/egress","value":[` + strings.Join(rules, ",") + `]}`}
	} else {
		for _, r := range rules {
			ops = append(ops, `{"op":"add","path":"/spec/egress/-","value":`+r+`}`)
		}
	}
	f.Fix = fmt.Sprintf("kubectl patch networkpolicy %s -n %s --type=json -p '[%s]'", np.Name, np.Namespace, strings.Join(ops, ",")) +
		`   # narrow the rules with "to" (istiod's namespace, the cluster's DNS) if wanted`
	return []Finding{f}
}
