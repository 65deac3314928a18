package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// reloaderProbesApp: a Deployment's pod whose native sidecar
// config-reloader has a startup probe on the app's port 8080 (red team
// round 22's 04).
func reloaderProbesApp(p *corev1.Pod) {
	yes := true
	always := corev1.ContainerRestartPolicyAlways
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "shop-web", Controller: &yes}}
	p.Name = "shop-web-0"
	p.Spec.Containers[1].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "config-reloader", RestartPolicy: &always,
		StartupProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}}}})
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeSidecarProbeCycle, pod: reloaderProbesApp, status: Fail,
		evidence: `native sidecar config-reloader's startup probe asks port 8080, which app container app serves`,
		fix:      `kubectl patch statefulset/shop-web -n shop --type=strategic -p '{"spec":{"template":{"spec":{"initContainers":[{"name":"config-reloader","startupProbe":null}]}}}}'`})
}

// The app's port, by number or name; the agent's port under a classic
// proxy (round 22's 09); a probe on the sidecar's own port, or the agent's
// under a native proxy, pass.
func TestSidecarProbeCycle(t *testing.T) {
	agent := func(p *corev1.Pod) {
		reloaderProbesApp(p)
		n := len(p.Spec.InitContainers) - 1
		p.Spec.InitContainers[n].StartupProbe.HTTPGet = &corev1.HTTPGetAction{Path: "/app-health/config-reloader/startupz", Port: intstr.FromInt32(15020)}
	}
	checks := 0
	for _, tc := range []struct {
		name, want string
		pod        func(p *corev1.Pod)
	}{
		{"the app's port", "which app container app serves", reloaderProbesApp},
		{"the app's port by its name", "which app container app serves", func(p *corev1.Pod) {
			reloaderProbesApp(p)
			n := len(p.Spec.InitContainers) - 1
			p.Spec.InitContainers[n].Ports = []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}}
			p.Spec.InitContainers[n].StartupProbe.HTTPGet.Port = intstr.FromString("web")
		}, // its own port: not a cycle
		},
		{"the agent under a classic proxy", "the agent runs in istio-proxy, a classic sidecar", agent},
		{"a bare pod made by the API (no manifest to re-create it from)", "which app container app serves", func(p *corev1.Pod) {
			reloaderProbesApp(p)
			p.OwnerReferences = nil
		}},
		{"its own port", "", func(p *corev1.Pod) {
			reloaderProbesApp(p)
			n := len(p.Spec.InitContainers) - 1
			p.Spec.InitContainers[n].StartupProbe.HTTPGet.Port = intstr.FromInt32(9102)
		}},
		{"the agent under a native proxy", "", func(p *corev1.Pod) {
			agent(p)
			always := corev1.ContainerRestartPolicyAlways
			proxy := p.Spec.Containers[0]
			proxy.RestartPolicy = &always
			p.Spec.InitContainers = append([]corev1.Container{p.Spec.InitContainers[0], proxy}, p.Spec.InitContainers[1:]...)
			p.Spec.Containers = p.Spec.Containers[1:]
		}},
	} {
		if tc.name == "the app's port by its name" {
			tc.want = "" // the sidecar declares 8080 itself: it serves it
		}
		d := Diagnose(checkCase{pod: tc.pod}.facts())
		got := ""
		for _, f := range d.Findings {
			if f.Code == CodeSidecarProbeCycle {
				got = f.Evidence
				checks++
				if !strings.Contains(f.Fix, "# a choice") && !strings.HasPrefix(f.Fix, "in the pod's manifest") {
					t.Errorf("%s: fix %q does not say the choice", tc.name, f.Fix)
				}
			}
		}
		checks++
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: evidence %q, want %q", tc.name, got, tc.want)
		}
	}
	t.Logf("%d checks", checks)
}
