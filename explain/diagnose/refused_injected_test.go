package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// A refused workload whose refusal is about what the injector added gets
// the change that makes it admitted: a LimitRange's maximum per pod sizes
// the sidecar to the room left; istio-proxy's restartPolicy stripped by a
// later mutator names the mutator and falls back to a classic sidecar.
func TestRefusalsOfWhatTheInjectorAdded(t *testing.T) {
	tmpl := &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}}}}}
	job := func(event string) *WorkloadState {
		return &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "web", Desired: 1, Since: t0, Template: tmpl, Events: []string{"FailedCreate (3×): " + event}}
	}
	cases := []struct {
		name string
		w    *WorkloadState
		inj  func(r *injection.InjectionReport)
		want []string
		mesh bool
	}{
		{name: "LimitRange per pod", w: job(`Error creating: pods "web-x" is forbidden: maximum memory usage per Pod is 512Mi, but limit is 1280Mi`),
			want: []string{"with the injected sidecar's limits the pod does", `"sidecar.istio.io/proxyMemoryLimit":"256Mi"`}, mesh: true},
		{name: "restartPolicy stripped", w: job(`Error creating: Pod "web-x" is invalid: spec.initContainers[1].startupProbe: Forbidden: may not be set for init containers without restartPolicy=Always`),
			inj: func(r *injection.InjectionReport) {
				r.OtherMutators = []injection.Mutator{{By: "MutatingWebhookConfiguration legacy (webhook legacy.example.com)", Exempt: "kubectl patch mutatingwebhookconfiguration legacy --type=json -p '[]'"}}
			},
			want: []string{"removed it", "MutatingWebhookConfiguration legacy", `"sidecar.istio.io/nativeSidecar":"false"`, "# or, keeping native sidecars: kubectl patch mutatingwebhookconfiguration legacy"}, mesh: true},
	}
	for _, tc := range cases {
		c := checkCase{workload: tc.w, inj: tc.inj}
		fs := only(Diagnose(c.facts()).Findings, CodeWorkloadShort)
		if len(fs) != 1 {
			t.Fatalf("%s: %+v", tc.name, fs)
		}
		for _, want := range tc.want {
			if !strings.Contains(fs[0].Evidence+"\n"+fs[0].Fix, want) {
				t.Errorf("%s: lacks %q:\n%s\n%s", tc.name, want, fs[0].Evidence, fs[0].Fix)
			}
		}
		if (fs[0].Mesh != "") != tc.mesh {
			t.Errorf("%s: mesh %q", tc.name, fs[0].Mesh)
		}
	}
}

// A native sidecar of the app's own on a port the proxy listens on is a
// collision too.
func TestReservedPortOfAppNativeSidecar(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	p := pod(func(p *corev1.Pod) {
		p.Annotations = map[string]string{"sidecar.istio.io/status": "{}"}
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "health-agent", RestartPolicy: &always, Ports: []corev1.ContainerPort{{ContainerPort: 15021}}})
	})
	fs := only(Diagnose(Facts{Pod: p, Injection: injected(nil)}).Findings, CodeReservedPort)
	if len(fs) != 1 || !strings.Contains(fs[0].Evidence, "container health-agent port 15021") {
		t.Errorf("%+v", fs)
	}
}
