package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// agentOnly is a Deployment's pod injected with the grpc-agent template:
// istio-proxy, no istio-init.
func agentOnly(p *corev1.Pod) {
	deploymentPod(p)
	p.Annotations = map[string]string{"sidecar.istio.io/status": `{"initContainers":null,"containers":["istio-proxy","app"]}`, "inject.istio.io/templates": "grpc-agent"}
	p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeSidecarNoCapture, pod: agentOnly,
		status: Warning, evidence: `inject.istio.io/templates="grpc-agent", which add the proxy without istio-init`,
		fix: `kubectl patch deployment/web -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/inject.istio.io~1templates"}]'`})
}

// Only an injected pod with neither istio-init nor istio-validation, and
// interception not NONE, has no capture; the sidecar template among its
// templates, CNI's validation container, NONE, or no sidecar: nothing.
func TestSidecarNoCapture(t *testing.T) {
	cases := []struct {
		name   string
		change func(p *corev1.Pod)
		want   string
	}{
		{name: "grpc-agent", change: agentOnly, want: "grpc-agent"},
		{name: "sidecar,extra: the sidecar's own", change: func(p *corev1.Pod) {
			agentOnly(p)
			p.Annotations["inject.istio.io/templates"] = "sidecar,extra"
		}},
		{name: "no templates annotation, no init", change: func(p *corev1.Pod) {
			agentOnly(p)
			delete(p.Annotations, "inject.istio.io/templates")
		}, want: "neither istio-init nor istio-validation"},
		{name: "CNI's istio-validation", change: func(p *corev1.Pod) {
			agentOnly(p)
			p.Spec.InitContainers = []corev1.Container{{Name: "istio-validation"}}
		}},
		{name: "interception NONE: KM-CAP-004's", change: func(p *corev1.Pod) {
			agentOnly(p)
			p.Annotations["sidecar.istio.io/interceptionMode"] = "NONE"
		}},
		{name: "healthy injected pod", change: func(p *corev1.Pod) {
			p.Annotations = map[string]string{"sidecar.istio.io/status": `{}`}
		}},
	}
	for _, tc := range cases {
		fs := sidecarNoCapture(&Input{Facts: Facts{Pod: pod(tc.change)}, Target: "web-1 -n shop"})
		if tc.want == "" {
			if len(fs) != 0 {
				t.Errorf("%s: %+v", tc.name, fs)
			}
			continue
		}
		if len(fs) != 1 || !strings.Contains(fs[0].Evidence, tc.want) {
			t.Errorf("%s: want one finding with %q, got %+v", tc.name, tc.want, fs)
		}
	}
	t.Logf("%d cases", len(cases))
}
