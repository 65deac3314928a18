package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Two injection templates that each add istio-proxy: the refusal is put
// down to the annotation, and the fix keeps the sidecar template alone;
// one template, or another refusal, is left to the other rules.
func TestTemplatesClash(t *testing.T) {
	refusal := `Error creating: Pod "web-847b6cbcdc-x99qk" is invalid: spec.initContainers[1].name: Duplicate value: "istio-proxy"`
	w := func(templates string) *WorkloadState {
		return &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "web",
			Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{istio.AnnotationTemplates: templates}}}}
	}
	checks := 0
	for _, tc := range []struct {
		templates, text string
		fix             string // "" for no answer
	}{
		{"sidecar,gateway", refusal, `kubectl patch deployment/web -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"inject.istio.io/templates":"sidecar"}}}}}'   # one template: sidecar`},
		{"gateway, sidecar", refusal, `"inject.istio.io/templates":"sidecar"`},
		{"gateway,grpc-agent", refusal, `"inject.istio.io/templates":"gateway"`},
		{"sidecar", refusal, ""},
		{"sidecar,gateway", `Pod "x" is invalid: spec.containers[0].image: Required value`, ""},
	} {
		checks++
		ev, _, fix, ok := RefusalCause(w(tc.templates), tc.text)
		switch {
		case tc.fix == "" && ok && strings.Contains(ev, istio.AnnotationTemplates):
			t.Errorf("%q / %q: put down to the templates: %s", tc.templates, tc.text, ev)
		case tc.fix != "" && (!ok || !strings.Contains(fix, tc.fix) || !strings.Contains(ev, "each adds its own istio-proxy")):
			t.Errorf("%q: ev %q fix %q, want the templates named and %q", tc.templates, ev, fix, tc.fix)
		}
	}
	t.Logf("%d checks", checks)
}

// An app given the gateway's injection template: its proxy starts with no
// hold, as that template's always does; the finding is the template (no
// capture: KM-CAP-011), not a hold to add. The sidecar's template keeps
// the start-order warning.
func TestGatewayTemplateIsNotAHoldProblem(t *testing.T) {
	early := func(templates string) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Annotations = map[string]string{istio.AnnotationTemplates: templates, "sidecar.istio.io/status": `{"initContainers":null,"containers":["istio-proxy"]}`}
			p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
			p.Spec.Containers[0].Lifecycle = nil
			p.Status.ContainerStatuses[0].State.Running.StartedAt = at(3)
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at(30)}}
		}
	}
	events := []corev1.Event{{Reason: "Unhealthy", Count: 5, LastTimestamp: at(20), Message: "Readiness probe failed", InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{istio-proxy}"}}}
	checks := 0
	for _, tc := range []struct {
		templates string
		first     string
	}{{"gateway", "KM-CAP-011"}, {"sidecar", CodeAppBeforeProxy}} {
		d := Diagnose(checkCase{pod: early(tc.templates), events: events}.facts())
		checks++
		if len(d.Findings) == 0 || d.Findings[0].Code != tc.first {
			t.Errorf("templates %q: findings %+v, want %s first", tc.templates, d.Findings, tc.first)
		}
		// The stage's row says the same as its findings: the headline.
		for _, c := range d.Checks {
			checks++
			if c.Name == CheckStart && (c.Code == CodeAppBeforeProxy) != (tc.first == CodeAppBeforeProxy) {
				t.Errorf("templates %q: the start row is %s %s", tc.templates, c.Status, c.Code)
			}
		}
	}
	t.Logf("%d checks", checks)
}
