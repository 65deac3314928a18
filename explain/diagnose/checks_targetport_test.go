package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// namedPort is a Service port whose targetPort is a name.
func namedPort(name string, port int32, target string) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: intstr.FromString(target), Protocol: corev1.ProtocolTCP}
}

func declares(ports ...corev1.ContainerPort) func(p *corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.Containers[1].Ports = ports }
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeTargetPortMissing, pod: declares(corev1.ContainerPort{Name: "http", ContainerPort: 8080}),
		services: []corev1.Service{svc("web", namedPort("http", 8080, "web"))}, status: Fail,
		evidence: `Service web port 8080 (http) targets the port name "web", which no container of the pod declares (TCP)`,
		fix:      `kubectl patch service web -n shop --type=json -p '[{"op":"replace","path":"/spec/ports/0/targetPort","value":"http"}]'`})
}

// A named targetPort the pod does not declare fails, naming what it does
// declare, with the patch that points the port at it; a number no
// container declares warns only when the app declares other ports; what
// resolves (a container's name, a native sidecar's, the number declared,
// a pod that declares nothing) has no finding.
func TestTargetPortMissing(t *testing.T) {
	http := corev1.ContainerPort{Name: "http", ContainerPort: 8080}
	always := corev1.ContainerRestartPolicyAlways
	cases := []struct {
		name     string
		pod      func(p *corev1.Pod)
		services []corev1.Service
		unknown  string
		status   string // "" for no finding
		evidence string
		fix      string
	}{
		{name: "healthy: the name declared", pod: declares(http), services: []corev1.Service{svc("web", namedPort("http", 80, "http"))}},
		{name: "healthy: the number declared", pod: declares(http), services: []corev1.Service{svc("web", sport("http", 80, 8080))}},
		{name: "healthy: nothing declared, a number", services: []corev1.Service{svc("web", sport("http", 80, 8080))}},
		{name: "healthy: the targetPort left to the port", pod: declares(http), services: []corev1.Service{svc("web", corev1.ServicePort{Name: "http", Port: 8080})}},
		{name: "healthy: the name on a native sidecar", pod: func(p *corev1.Pod) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "metrics-agent", RestartPolicy: &always,
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9100}}})
		}, services: []corev1.Service{svc("web", namedPort("metrics", 9100, "metrics"))}},
		{name: "healthy: the proxy's own port", pod: declares(http), services: []corev1.Service{svc("web", sport("status", 15021, 15021))}},
		{name: "healthy: a UDP name declared UDP", pod: declares(corev1.ContainerPort{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP}),
			services: []corev1.Service{svc("dns", corev1.ServicePort{Name: "dns", Port: 53, TargetPort: intstr.FromString("dns"), Protocol: corev1.ProtocolUDP})}},
		{name: "a name declared with another protocol", pod: declares(corev1.ContainerPort{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolUDP}),
			services: []corev1.Service{svc("dns", namedPort("dns-tcp", 53, "dns"))}, status: Fail,
			evidence: `targets the port name "dns", which no container of the pod declares (TCP): the Service's endpoints for this pod lack that port, so it sends the pod nothing on it; the app containers declare no port`,
			fix:      `"value":53}]'   # no container declares a port`},
		{name: "a name, the port of the Service's number", pod: declares(corev1.ContainerPort{Name: "admin", ContainerPort: 9000}, http),
			services: []corev1.Service{svc("web", sport("admin", 9000, 9000), namedPort("http", 8080, "web"))}, status: Fail,
			evidence: "the app containers declare admin (9000) and http (8080)",
			fix:      `kubectl patch service web -n shop --type=json -p '[{"op":"replace","path":"/spec/ports/1/targetPort","value":"http"}]'`},
		{name: "a name, one port declared unnamed", pod: declares(corev1.ContainerPort{ContainerPort: 8080}),
			services: []corev1.Service{svc("web", namedPort("http", 80, "http"))}, status: Fail,
			evidence: "the app containers declare 8080", fix: `"value":8080}]'   # the one port the app declares`},
		{name: "a name, two ports declared: the choice said", pod: declares(corev1.ContainerPort{Name: "a", ContainerPort: 1}, corev1.ContainerPort{Name: "b", ContainerPort: 2}),
			services: []corev1.Service{svc("web", namedPort("http", 80, "http"))}, status: Fail,
			evidence: "the app containers declare a (1) and b (2)", fix: `"value":"a"}]'   # or "b": the port this Service port is meant to reach`},
		{name: "a number not declared", pod: declares(http), services: []corev1.Service{svc("web", sport("http", 8080, 8081))}, status: Warning,
			evidence: "Service web port 8080 (http) targets port 8081, which no container of the pod declares (TCP), while the app containers declare http (8080)",
			fix:      `kubectl patch service web -n shop --type=json -p '[{"op":"replace","path":"/spec/ports/0/targetPort","value":"http"}]'`},
		{name: "Services forbidden, a sidecar pod: unknown", unknown: "forbidden: list services (namespace shop)", status: Unknown, evidence: "could not be read"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := checkCase{pod: tc.pod, services: tc.services}.facts()
			f.ServicesUnknown = tc.unknown
			fs := only(Diagnose(f).Findings, CodeTargetPortMissing)
			if tc.status == "" {
				if len(fs) != 0 {
					t.Fatalf("fired: %+v", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Status != tc.status || !strings.Contains(fs[0].Evidence, tc.evidence) || !strings.Contains(fs[0].Fix, tc.fix) {
				t.Fatalf("got %+v\nwant %s, evidence with %q, fix with %q", fs, tc.status, tc.evidence, tc.fix)
			}
			if tc.status == Unknown && len(fs[0].Needs) == 0 {
				t.Errorf("unknown without the permission: %+v", fs[0])
			}
		})
	}
}
