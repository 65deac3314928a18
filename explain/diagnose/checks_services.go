package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Checks of the Services that select the pod: static, in every sweep.
const (
	CodeInboundExcluded    = "KM-CAP-003"
	CodeProtocolUndeclared = "KM-CONN-003"
	CodeServerFirst        = "KM-CONN-006"
)

func init() {
	reads := []Fact{FactPod, FactServices}
	register(&Spec{Code: CodeInboundExcluded, Title: "a port the app serves is not captured inbound", Stage: CheckCapture, Kind: Static, Status: Warning,
		Reads:   reads,
		Means:   "A port meant to receive traffic (a container declares it, or a Service sends to it) is excluded from inbound capture (excludeInboundPorts, or an includeInboundPorts list without it, or the proxy's status port set to it by status.sidecar.istio.io/port, which the injector adds to istio-init's -d): that traffic skips the proxy, so no mTLS, authorization or telemetry. A status port on an app port also has the proxy's agent listen on the app's port: a failure.",
		Detects: "The app containers' declared ports (containerPort) and the target ports of the Services selecting the pod, resolved through the containers' port names, against the pod's capture annotations and its status port annotation; with or without a Service.",
		Fixes:   "Take the port out of excludeInboundPorts (or add it to includeInboundPorts) in the pod template, or remove the status port annotation; then re-create the pods.",
		Source:  "Istio docs, traffic redirection annotations; the security best practices (not all traffic is captured)",
		Planted: "traffic.sidecar.istio.io/excludeInboundPorts naming a port the app's container declares",
		run:     inboundExcluded})
	register(&Spec{Code: CodeProtocolUndeclared, Title: "Service port protocol not declared", Stage: CheckConnections, Kind: Static, Status: Info,
		Istioctl: []string{"IST0118"}, Reads: reads,
		Means:   "A Service port that sends to the pod names no protocol (no appProtocol, no protocol prefix in its name): the proxy sniffs it, and a server-first protocol (MySQL, SMTP, …) waits for the client and stalls.",
		Detects: "The Service ports selecting the pod: appProtocol, or the name's prefix, against the protocols Istio knows; UDP is exempt, and so are the server-first ports KM-CONN-006 warns of (25, 53 and 3306 and 27017 as istioctl's are, and 21, 22, 110, 143, 587 and 4222).",
		Fixes:   "Set the port's appProtocol (or name it PROTOCOL-SUFFIX).",
		Source:  "istioctl analyze IST0118; Istio docs, application requirements (server first protocols, named service ports)",
		Planted: "a Service port named db on the pod",
		run:     protocolUndeclared})
	register(&Spec{Code: CodeServerFirst, Title: "server-first port not declared as TCP", Stage: CheckConnections, Kind: Static, Status: Warning,
		Reads:   reads,
		Means:   "A port that usually carries a server-first protocol (the server speaks first: SMTP, MySQL, NATS, SSH, …) declares no protocol: the proxy's protocol detection, and under PERMISSIVE mTLS its detection of TLS, wait for the client's first bytes, which a server-first client never sends first; connections stall until detection gives up, or fail.",
		Detects: "The Service ports selecting the pod, their target ports and the app containers' declared ports, against well-known server-first ports (21, 22, 25, 53, 110, 143, 587, 3306, 4222, 27017): a port with no appProtocol and no protocol prefix in its name, or one declared as HTTP, HTTP/2 or gRPC, which the proxy would parse.",
		Fixes:   "Declare the protocol on the Service port (appProtocol: tcp, or a name tcp-SUFFIX), a kubectl patch of that port; a port no Service targets is declared on a Service (or a Sidecar's ingress listener) for it.",
		Source:  "Istio docs, protocol selection (protocols incompatible with automatic selection) and application requirements (server first protocols); istio/istio issues on NATS and SSH behind sidecars",
		Planted: "a Service port named db (3306 → 3306) on the pod, no appProtocol",
		run:     serverFirst})
}

// svcPort is one port of a Service that selects the pod, with the pod's
// port it sends to (0 when a named port does not resolve).
type svcPort struct {
	svc    string
	port   corev1.ServicePort
	target int32
}

// servicePorts are the TCP ports of the Services that select the pod.
func servicePorts(in *Input) []svcPort {
	if in.Pod == nil {
		return nil
	}
	var out []svcPort
	for _, s := range in.Services {
		for _, sp := range s.Spec.Ports {
			out = append(out, svcPort{svc: s.Name, port: sp, target: targetOf(in.Pod, sp)})
		}
	}
	return out
}

// targetOf resolves a Service port's target on the pod.
func targetOf(p *corev1.Pod, sp corev1.ServicePort) int32 {
	switch {
	case sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal != "":
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == sp.TargetPort.StrVal {
					return cp.ContainerPort
				}
			}
		}
		return 0
	case sp.TargetPort.IntVal != 0:
		return sp.TargetPort.IntVal
	}
	return sp.Port
}

func tcp(sp corev1.ServicePort) bool { return sp.Protocol == "" || sp.Protocol == corev1.ProtocolTCP }

// portList reads a comma-separated port list ("*" is every port).
func portList(v string) (ports map[int32]bool, all bool) {
	ports = map[int32]bool{}
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "*" {
			return nil, true
		}
		if n, err := strconv.Atoi(f); err == nil {
			ports[int32(n)] = true
		}
	}
	return ports, false
}

// inboundPort is a port of the pod meant to receive traffic: one a
// container declares (containerPort), or one a Service targets.
type inboundPort struct {
	port int32
	// by says what makes it one ("Service web port 80", "declared by
	// container app").
	by []string
	// service: a Service targets it.
	service string
}

// inboundPorts are the pod's TCP ports meant to receive traffic, by port:
// the app containers' declared ports and the Services' target ports.
func inboundPorts(in *Input) []inboundPort {
	if in.Pod == nil {
		return nil
	}
	byPort := map[int32]*inboundPort{}
	get := func(port int32) *inboundPort {
		if byPort[port] == nil {
			byPort[port] = &inboundPort{port: port}
		}
		return byPort[port]
	}
	for _, c := range appContainers(in.Pod) {
		for _, cp := range c.Ports {
			if cp.ContainerPort == 0 || cp.Protocol != "" && cp.Protocol != corev1.ProtocolTCP {
				continue
			}
			ip := get(cp.ContainerPort)
			ip.by = append(ip.by, "declared by container "+c.Name)
		}
	}
	for _, sp := range servicePorts(in) {
		if sp.target == 0 || !tcp(sp.port) {
			continue
		}
		ip := get(sp.target)
		ip.by = append(ip.by, fmt.Sprintf("Service %s port %d", sp.svc, sp.port.Port))
		if ip.service == "" {
			ip.service = sp.svc
		}
	}
	out := make([]inboundPort, 0, len(byPort))
	for _, ip := range byPort {
		out = append(out, *ip)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].port < out[j].port })
	return out
}

// servicesUnread is the finding of a check of the Services that could not
// be read: unknown, with the permission that reads them.
func servicesUnread(in *Input) []Finding {
	return []Finding{{Status: Unknown, Evidence: "the Services that select the pod could not be read: " + in.ServicesUnknown,
		Needs: []string{"list services (namespace " + in.Pod.Namespace + ")"}}}
}

func inboundExcluded(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil || p.Annotations[istio.AnnotationInterceptionMode] == "NONE" {
		return nil
	}
	excluded, _ := portList(p.Annotations[istio.AnnotationExcludeInboundPorts])
	incl, inclSet := p.Annotations[istio.AnnotationIncludeInboundPorts]
	included, all := portList(incl)
	var hits []string
	var out []Finding
	statusPort, _ := strconv.Atoi(p.Annotations[annotationStatusPort])
	for _, ip := range inboundPorts(in) {
		if slices.Contains(istio.ReservedPorts, ip.port) {
			continue
		}
		switch {
		case statusPort != 0 && ip.port == int32(statusPort):
			// The injector puts the status port in istio-init's -d (the
			// inbound ports not captured), and pilot-agent listens on it.
			out = append(out, Finding{Status: Fail,
				Evidence: fmt.Sprintf("port %d (%s) is the proxy's status port (%s=%q): Istio's injector adds the status port to istio-init's -d, the inbound ports left uncaptured, so traffic to it reaches the app without the proxy (no mTLS, no authorization, no telemetry), and the proxy's agent listens on the same port as the app",
					ip.port, strings.Join(ip.by, ", "), annotationStatusPort, p.Annotations[annotationStatusPort]),
				Mesh:     annotationStatusPort + "=" + p.Annotations[annotationStatusPort],
				Fix:      removeAnnotations(p, []string{annotationStatusPort}) + "   # the proxy's status port is then 15020, and port " + strconv.Itoa(statusPort) + " is captured; or set it to a port no container uses",
				explains: []string{CodeBypassing}})
			continue
		case excluded[ip.port]:
			hits = append(hits, fmt.Sprintf("port %d (%s) is in %s", ip.port, strings.Join(ip.by, ", "), istio.AnnotationExcludeInboundPorts))
		case inclSet && !all && !included[ip.port]:
			hits = append(hits, fmt.Sprintf("port %d (%s) is not in %s %q", ip.port, strings.Join(ip.by, ", "), istio.AnnotationIncludeInboundPorts, incl))
		}
	}
	if len(hits) == 0 {
		if len(out) == 0 && in.ServicesUnknown != "" && (len(excluded) > 0 || inclSet && !all) {
			return servicesUnread(in) // a Service's target port may be among them
		}
		return out
	}
	return append(out, Finding{Evidence: strings.Join(hits, "; ") + ": its traffic reaches the app without the proxy (no mTLS, no authorization, no telemetry)",
		Fix: inboundFix(p)})
}

// annotationStatusPort sets the port of the proxy's status server (15020
// by default).
const annotationStatusPort = "status.sidecar.istio.io/port"

// istioProtocols are the protocols Istio reads off a port's appProtocol or
// name prefix.
var istioProtocols = map[string]bool{"tcp": true, "udp": true, "grpc": true, "grpc-web": true, "http": true, "http_proxy": true, "http2": true,
	"https": true, "tls": true, "mongo": true, "redis": true, "mysql": true}

// protocolOf is the protocol Istio gives a Service port ("" when sniffed).
func protocolOf(sp corev1.ServicePort) string {
	if sp.AppProtocol != nil && *sp.AppProtocol != "" {
		return strings.ToLower(*sp.AppProtocol)
	}
	if !tcp(sp) {
		return strings.ToLower(string(sp.Protocol))
	}
	name := strings.ToLower(sp.Name)
	if istioProtocols[name] {
		return name
	}
	if i := strings.Index(name, "-"); i > 0 && istioProtocols[name[:i]] {
		return name[:i]
	}
	return ""
}

func protocolUndeclared(in *Input) []Finding {
	if in.Pod == nil || !in.injected() {
		return nil
	}
	var hits []string
	for _, sp := range servicePorts(in) {
		if serverFirstPorts[sp.port.Port] != "" || serverFirstPorts[sp.target] != "" {
			continue // KM-CONN-006's
		}
		if !tcp(sp.port) || protocolOf(sp.port) != "" {
			continue
		}
		name := sp.port.Name
		if name == "" {
			name = "(unnamed)"
		}
		hits = append(hits, fmt.Sprintf("Service %s port %d %s", sp.svc, sp.port.Port, name))
	}
	if len(hits) == 0 {
		return nil
	}
	return []Finding{{Evidence: strings.Join(hits, "; ") + ": no protocol declared, the proxy sniffs it (a server-first protocol stalls)",
		Fix: "set appProtocol on the port (tcp, http, grpc, …), or name it PROTOCOL-SUFFIX: kubectl edit service -n " + in.Pod.Namespace}}
}

// inboundFix takes the ports out of inbound capture's exclusions: the
// exclude annotation removed (or the include list to edit).
func inboundFix(p *corev1.Pod) string {
	if _, ok := p.Annotations[istio.AnnotationExcludeInboundPorts]; ok {
		return annotationPatch(p, istio.AnnotationExcludeInboundPorts, "") + "   # or keep it without the ports the app serves"
	}
	return annotationPatch(p, istio.AnnotationIncludeInboundPorts, "") + "   # or add the ports the app serves to it"
}

// serverFirstPorts are well-known ports of server-first protocols (the
// server sends the first bytes), and what they carry. Istio's docs name
// SMTP, DNS, MySQL and MongoDB as protocols automatic selection cannot
// handle; istio/istio issues name NATS and SSH; FTP, POP3, IMAP and SMTP
// submission greet the client first by their RFCs. SMTPS (465) is not
// here: implicit TLS starts with the client's hello, which detection reads.
var serverFirstPorts = map[int32]string{21: "FTP", 22: "SSH", 25: "SMTP", 53: "DNS over TCP", 110: "POP3", 143: "IMAP",
	587: "SMTP submission", 3306: "MySQL", 4222: "NATS", 27017: "MongoDB"}

// httpLike are the declared protocols the proxy parses as HTTP: wrong for
// a server-first protocol.
var httpLike = map[string]bool{"http": true, "http2": true, "grpc": true, "grpc-web": true, "http_proxy": true}

// istioTCPByNumber are the Service ports Istio takes as TCP by their
// number alone when no protocol is declared.
var istioTCPByNumber = map[int32]bool{25: true, 53: true, 3306: true, 27017: true}

func serverFirst(in *Input) []Finding {
	p := in.Pod
	if p == nil || !in.injected() {
		return nil
	}
	const why = "the server speaks first, while the proxy's protocol detection (and, under PERMISSIVE mTLS, its TLS detection) reads the client's first bytes: where either runs, a connection stalls until detection gives up"
	var hits, fixes []string
	targeted := map[int32]bool{}
	for _, s := range in.Services {
		for i, sp := range s.Spec.Ports {
			if !tcp(sp) {
				continue
			}
			target := targetOf(p, sp)
			targeted[target] = true
			proto := serverFirstPorts[sp.Port]
			port := sp.Port
			if proto == "" {
				proto, port = serverFirstPorts[target], target
			}
			declared := protocolOf(sp)
			if proto == "" || declared != "" && !httpLike[declared] {
				continue
			}
			name := sp.Name
			if name == "" {
				name = "(unnamed)"
			}
			hit := fmt.Sprintf("Service %s port %d → %d (name %s) declares no protocol; port %d usually carries %s", s.Name, sp.Port, target, name, port, proto)
			if declared != "" {
				hit = fmt.Sprintf("Service %s port %d → %d (name %s) declares %s, but port %d usually carries %s, which is not %s: the proxy parses its bytes as %s and the connection hangs or fails", s.Name, sp.Port, target, name, strings.ToUpper(declared), port, proto, strings.ToUpper(declared), strings.ToUpper(declared))
			}
			if istioTCPByNumber[sp.Port] && declared == "" {
				hit += fmt.Sprintf(" (Istio falls back to TCP for Service port %d by its number, not by a declaration; its docs ask that server-first protocols be declared)", sp.Port)
			}
			hits = append(hits, hit)
			fixes = append(fixes, fmt.Sprintf(`kubectl patch service %s -n %s --type=json -p '[{"op":"add","path":"/spec/ports/%d/appProtocol","value":"tcp"}]'`, s.Name, s.Namespace, i))
		}
	}
	for _, c := range appContainers(p) {
		for _, cp := range c.Ports {
			proto := serverFirstPorts[cp.ContainerPort]
			if proto == "" || targeted[cp.ContainerPort] || cp.Protocol != "" && cp.Protocol != corev1.ProtocolTCP {
				continue
			}
			if in.ServicesUnknown != "" {
				continue // a Service may declare it
			}
			hits = append(hits, fmt.Sprintf("container %s declares port %d, which usually carries %s, and no Service declares its protocol", c.Name, cp.ContainerPort, proto))
			fixes = append(fixes, fmt.Sprintf("declare port %d as TCP: a Service selecting the pod with a port targeting %d and appProtocol: tcp (or named tcp-%s), or a Sidecar ingress listener for port %d with protocol TCP",
				cp.ContainerPort, cp.ContainerPort, strings.ToLower(strings.Fields(proto)[0]), cp.ContainerPort))
		}
	}
	if len(hits) == 0 {
		return nil
	}
	return []Finding{{Evidence: strings.Join(hits, "; ") + ": " + why, Fix: strings.Join(fixes, "\n")}}
}
