package diagnose

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeTargetPortMissing: a Service that selects the pod targets a port the
// pod does not declare.
const CodeTargetPortMissing = "KM-CONN-007"

func init() {
	register(&Spec{Code: CodeTargetPortMissing, Title: "a Service targets a port the pod does not declare", Stage: CheckConnections, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactServices},
		Means:   "A Service that selects the pod has a targetPort name that no container of the pod declares (with the port's protocol): Kubernetes puts the pod in the Service's endpoints without that port, so the Service sends nothing to the pod on it. A targetPort number that none of the pod's declared ports has is a warning: the app may listen there undeclared, or the number is a typo and connections are refused.",
		Detects: "The ports of the Services whose selector matches the pod's labels, in its namespace: a named targetPort resolved as the endpoints controller does (the containers', then the native sidecars', name and protocol); a numbered one against the ports the app containers declare, only when they declare some.",
		Fixes:   "A kubectl patch of the Service port's targetPort: the name (or number) of the container port with the Service port's number, else the port the app declares; where the choice is not plain, a comment says which to take.",
		Source:  "Kubernetes' endpoint slice controller (a named targetPort not found on a pod leaves the pod's endpoint without that port); kubectl's own Services and EndpointSlices",
		Planted: "a Service selecting the pod whose port targets the name web, while the container declares http (8080)",
		run:     targetPortMissing})
}

// declaredPort is a port a container of the pod declares.
type declaredPort struct {
	container string
	port      corev1.ContainerPort
	app       bool
}

// declaredPorts are the ports the pod's containers declare with protocol
// proto, as the endpoints controller looks them up: the containers, then
// the native sidecars (init containers that keep running).
func declaredPorts(p *corev1.Pod, proto corev1.Protocol) []declaredPort {
	var out []declaredPort
	add := func(c corev1.Container) {
		for _, cp := range c.Ports {
			if protocolOrTCP(cp.Protocol) == proto {
				out = append(out, declaredPort{container: c.Name, port: cp, app: !istio.IsIstioContainer(c.Name)})
			}
		}
	}
	for _, c := range p.Spec.Containers {
		add(c)
	}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	return out
}

func protocolOrTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

func targetPortMissing(in *Input) []Finding {
	p := in.Pod
	if p == nil || p.Spec.HostNetwork {
		return nil
	}
	if in.ServicesUnknown != "" {
		if in.injected() {
			return servicesUnread(in)
		}
		return nil
	}
	var out []Finding
	for _, s := range in.Services {
		for i, sp := range s.Spec.Ports {
			proto := protocolOrTCP(sp.Protocol)
			declared := declaredPorts(p, proto)
			var app []declaredPort
			for _, d := range declared {
				if d.app {
					app = append(app, d)
				}
			}
			where := fmt.Sprintf("Service %s port %d", s.Name, sp.Port)
			if sp.Name != "" {
				where = fmt.Sprintf("Service %s port %d (%s)", s.Name, sp.Port, sp.Name)
			}
			switch {
			case sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal != "":
				name := sp.TargetPort.StrVal
				if slices.ContainsFunc(declared, func(d declaredPort) bool { return d.port.Name == name }) {
					continue
				}
				out = append(out, Finding{Status: Fail,
					Evidence: fmt.Sprintf("%s targets the port name %q, which no container of the pod declares (%s): the Service's endpoints for this pod lack that port, so it sends the pod nothing on it; %s",
						where, name, proto, declaredSaid(app)),
					Fix: targetPortFix(s, i, sp, app)})
			default:
				target := sp.TargetPort.IntVal
				if target == 0 {
					target = sp.Port
				}
				if len(app) == 0 || slices.Contains(istio.ReservedPorts, target) ||
					slices.ContainsFunc(declared, func(d declaredPort) bool { return d.port.ContainerPort == target }) {
					continue
				}
				out = append(out, Finding{Status: Warning,
					Evidence: fmt.Sprintf("%s targets port %d, which no container of the pod declares (%s), while %s: unless the app listens on %d undeclared, connections through the Service are refused",
						where, target, proto, declaredSaid(app), target),
					Fix: targetPortFix(s, i, sp, app)})
			}
		}
	}
	return out
}

// declaredSaid names the ports the app containers declare.
func declaredSaid(app []declaredPort) string {
	if len(app) == 0 {
		return "the app containers declare no port"
	}
	var ports []string
	for _, d := range app {
		n := strconv.Itoa(int(d.port.ContainerPort))
		if d.port.Name != "" {
			n = d.port.Name + " (" + n + ")"
		}
		ports = append(ports, n)
	}
	return "the app containers declare " + quoteList(ports)
}

// targetPortFix replaces the Service port's targetPort: with the declared
// port of the Service port's number, else the one port the app declares;
// a comment says when the choice is the user's.
func targetPortFix(s corev1.Service, i int, sp corev1.ServicePort, app []declaredPort) string {
	value := func(d declaredPort) string {
		if d.port.Name != "" {
			return strconv.Quote(d.port.Name)
		}
		return strconv.Itoa(int(d.port.ContainerPort))
	}
	v, note := strconv.Itoa(int(sp.Port)), "   # no container declares a port: the number the app listens on (or declare it on the container)"
	switch {
	case len(app) == 0:
	case slices.ContainsFunc(app, func(d declaredPort) bool { return d.port.ContainerPort == sp.Port }):
		k := slices.IndexFunc(app, func(d declaredPort) bool { return d.port.ContainerPort == sp.Port })
		v, note = value(app[k]), ""
	case len(app) == 1:
		v, note = value(app[0]), "   # the one port the app declares"
	default:
		var others []string
		for _, d := range app[1:] {
			others = append(others, value(d))
		}
		v, note = value(app[0]), "   # or "+strings.Join(others, " or ")+": the port this Service port is meant to reach"
	}
	return fmt.Sprintf(`kubectl patch service %s -n %s --type=json -p '[{"op":"replace","path":"/spec/ports/%d/targetPort","value":%s}]'`, s.Name, s.Namespace, i, v) + note
}
