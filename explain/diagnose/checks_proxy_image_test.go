package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// appImageAsProxy: a Job's pod whose proxyImage annotation names the app's
// image; istio-init, run from it, failed.
func appImageAsProxy(p *corev1.Pod) {
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "migrate", Controller: &yes}}
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Annotations = map[string]string{annotationProxyImage: "shop/app:1"}
	p.Spec.InitContainers[0].Image = "shop/app:1"
	p.Spec.Containers[0].Image = "shop/app:1"
	p.Status.Phase = corev1.PodFailed
	p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", StartedAt: at(1), FinishedAt: at(2)}}
	p.Status.ContainerStatuses = nil
}

func proxyImageInjector(r *injection.InjectionReport) {
	r.InjectorImage = "docker.io/istio/proxyv2:1.31.0"
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeProxyImageFails, pod: appImageAsProxy, inj: proxyImageInjector, status: Fail,
		logs:     map[string]startup.LogTail{"istio-init": {Current: []string{"/bin/sh: can't open 'istio-iptables': No such file or directory"}}},
		evidence: `istio-init runs shop/app:1, the image the pod's sidecar.istio.io/proxyImage="shop/app:1" sets in place of the mesh's proxy image (docker.io/istio/proxyv2:1.31.0), and failed`,
		fix:      "kubectl get job migrate -n shop -o json | "})
}

// The annotation is named only when the failing container runs its image
// and failed for want of what it runs (not a proxy image failing for
// another reason).
func TestProxyImageFails(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		name  string
		pod   func(p *corev1.Pod)
		inj   func(r *injection.InjectionReport)
		found bool
	}{
		{"the app's image", appImageAsProxy, proxyImageInjector, true},
		{"a proxy image that fails for another reason", func(p *corev1.Pod) {
			appImageAsProxy(p)
			p.Annotations[annotationProxyImage] = "mirror.example/istio/proxyv2:1.31.0"
			p.Spec.InitContainers[0].Image = "mirror.example/istio/proxyv2:1.31.0"
			p.Status.InitContainerStatuses[0].State.Terminated.Message = "iptables-restore: permission denied"
		}, func(r *injection.InjectionReport) {}, false},
		{"no failure", func(p *corev1.Pod) {
			p.Annotations = map[string]string{annotationProxyImage: "shop/app:1"}
			p.Spec.InitContainers[0].Image = "shop/app:1"
		}, proxyImageInjector, false},
	} {
		log := "/bin/sh: can't open 'istio-iptables': No such file or directory"
		if !tc.found {
			log = "iptables-restore: permission denied"
		}
		logs := map[string]startup.LogTail{"istio-init": {Current: []string{log}}}
		d := Diagnose(checkCase{pod: tc.pod, inj: tc.inj, logs: logs}.facts())
		found := false
		for _, f := range d.Findings {
			found = found || f.Code == CodeProxyImageFails
		}
		checks++
		if found != tc.found {
			t.Errorf("%s: found %v, want %v (%+v)", tc.name, found, tc.found, d.Findings)
		}
		if tc.found && (len(d.Findings) == 0 || !strings.Contains(d.Findings[0].Fix, "sidecar.istio.io/proxyImage")) {
			t.Errorf("%s: the first finding's fix does not remove the annotation: %+v", tc.name, d.Findings)
		}
	}
	t.Logf("%d checks", checks)
}
