package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// A hostNetwork pod that asks for a sidecar gets both ways out as
// commands (off the node's network; labelled as outside the mesh), never
// a pointer back at why-injected; its own label asking fails, its
// namespace's only warns.
func TestHostNetworkFix(t *testing.T) {
	skips := func(r *injection.InjectionReport) {
		no := false
		r.Injected, r.Expected = &no, &no
		r.Warn(injection.WarnInjectorSkips, "a sidecar is asked for, but istiod never injects this pod: it uses the node's network (hostNetwork)")
	}
	hostNet := func(label string) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			deploymentPod(p)
			p.Spec.HostNetwork = true
			if label != "" {
				p.Labels["sidecar.istio.io/inject"] = label
			}
			p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
			p.Spec.Containers, p.Status.ContainerStatuses = p.Spec.Containers[1:], p.Status.ContainerStatuses[1:]
		}
	}
	for _, tc := range []struct {
		label, status string
	}{{"true", Fail}, {"", Warning}} {
		fs := only(Diagnose(checkCase{pod: hostNet(tc.label), inj: skips}.facts()).Findings, CodeSkippedByInjector)
		if len(fs) != 1 || fs[0].Status != tc.status {
			t.Fatalf("label %q: want one %s, got %+v", tc.label, tc.status, fs)
		}
		for _, want := range []string{
			`kubectl patch deployment/web -n shop --type=json -p '[{"op":"remove","path":"/spec/template/spec/hostNetwork"}]'`,
			`kubectl patch deployment/web -n shop --type=merge -p '{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"false"}}}}}'`,
		} {
			if !strings.Contains(fs[0].Fix, want) || strings.Contains(fs[0].Fix, "why-injected") {
				t.Errorf("label %q: fix %q lacks %q", tc.label, fs[0].Fix, want)
			}
		}
	}
}
