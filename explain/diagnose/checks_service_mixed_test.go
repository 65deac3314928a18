package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// strayPod is a bare pod with the app's labels, opted out of the mesh.
func strayPod(p *corev1.Pod) {
	p.Name = "web-debug"
	p.Spec.InitContainers, p.Spec.Containers = nil, p.Spec.Containers[1:]
	p.Status.InitContainerStatuses, p.Status.ContainerStatuses = nil, p.Status.ContainerStatuses[1:]
	p.Labels = map[string]string{"app": "web", InjectLabel: "false"}
}

func optedOut(r *injection.InjectionReport) {
	no := false
	r.Name, r.Injected, r.Expected, r.Mismatch = "web-debug", &no, &no, &no
	r.Verdict, r.Reason = "Not injected: pod label sidecar.istio.io/inject=\"false\"", `pod label sidecar.istio.io/inject="false"`
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeServiceMixed, pod: strayPod, inj: optedOut,
		services: []corev1.Service{svc("web", sport("http", 80, 8080))}, meshed: ServiceMembers{"web": {"web-7d9f-abcde"}},
		status: Warning, evidence: "Service web (selector app=web) sends to it and to 1 pod(s) in the mesh (web-7d9f-abcde)",
		fix: "kubectl label pod web-debug -n shop app-   # takes it out of Service web"})
}

// The stray pod is named with the Service and its meshed peers, and the
// fix takes it out (a bare pod) or brings its workload in (its opt-out
// removed); a pod in the mesh, one that would be injected on re-creation,
// one not running, one whose Service selects no meshed pod, has no finding.
func TestServiceMixed(t *testing.T) {
	owned := func(p *corev1.Pod) {
		strayPod(p)
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "debug-5d8f9", Controller: &yes}}
		p.Labels["pod-template-hash"] = "5d8f9"
	}
	annotated := func(p *corev1.Pod) {
		owned(p)
		delete(p.Labels, InjectLabel)
		p.Annotations = map[string]string{InjectLabel: "false"}
	}
	web := []corev1.Service{svc("web", sport("http", 80, 8080))}
	peers := ServiceMembers{"web": {"web-b", "web-a", "web-c", "web-d"}}
	cases := []struct {
		name     string
		pod      func(p *corev1.Pod)
		inj      func(r *injection.InjectionReport)
		meshed   ServiceMembers
		unknown  string
		status   string
		evidence string
		fix      string
	}{
		{name: "bare pod: its labels", pod: strayPod, inj: optedOut, meshed: peers, status: Warning,
			evidence: "4 pod(s) in the mesh (web-a, web-b, web-c, 1 more)", fix: "kubectl label pod web-debug -n shop app-"},
		{name: "a Deployment's pod, opted out by label: the label removed from the template", pod: owned, inj: optedOut, meshed: peers, status: Warning,
			fix: `kubectl patch deployment/debug -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/labels/sidecar.istio.io~1inject"}]'`},
		{name: "opted out by annotation", pod: annotated, inj: optedOut, meshed: peers, status: Warning,
			fix: `"path":"/spec/template/metadata/annotations/sidecar.istio.io~1inject"`},
		{name: "peers unread: unknown", pod: strayPod, inj: optedOut, unknown: "forbidden: list pods", status: Unknown, evidence: "could not be read"},
		{name: "healthy: no meshed peer", pod: strayPod, inj: optedOut, meshed: ServiceMembers{}},
		{name: "healthy: the pod is in the mesh", meshed: peers},
		{name: "healthy: injected on re-creation (another check's)", pod: strayPod, inj: func(r *injection.InjectionReport) {
			optedOut(r)
			yes := true
			r.Expected = &yes
		}, meshed: peers},
		{name: "healthy: not running", pod: func(p *corev1.Pod) { strayPod(p); p.Status.Phase = corev1.PodSucceeded }, inj: optedOut, meshed: peers},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := checkCase{pod: tc.pod, inj: tc.inj, services: web, meshed: tc.meshed}.facts()
			f.ServiceMeshedUnknown = tc.unknown
			fs := only(Diagnose(f).Findings, CodeServiceMixed)
			if tc.status == "" {
				if len(fs) != 0 {
					t.Fatalf("fired: %+v", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Status != tc.status || !strings.Contains(fs[0].Evidence, tc.evidence) || !strings.Contains(fs[0].Fix, tc.fix) {
				t.Fatalf("got %+v\nwant %s, evidence with %q, fix with %q", fs, tc.status, tc.evidence, tc.fix)
			}
		})
	}
}
