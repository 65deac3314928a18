package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func init() {
	checkCases = append(checkCases, checkCase{code: CodeInitWaitsClassicProxy, pod: func(p *corev1.Pod) {
		deploymentPod(p)
		waitsForHealth(p)
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: "wait-for-mesh", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(3)}}})
		p.Status.Phase, p.Status.ContainerStatuses = corev1.PodPending, nil
	}, now: 20 * time.Second, status: Fail, evidence: "init container wait-for-mesh's command waits on port 15021, the proxy's", fix: `"sidecar.istio.io/nativeSidecar":"true"`})
}

// waitsForHealth gives p an app init container that loops until the
// proxy's health port answers.
func waitsForHealth(p *corev1.Pod) {
	p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "wait-for-mesh",
		Command: []string{"/bin/sh", "-c", "until nc -z 127.0.0.1 15021; do sleep 1; done"}})
}

// An app init container waiting on a proxy port fails a classic-sidecar
// pod at once, also on a pod not created yet (upgrade-plan, -f); a native
// sidecar, an init container that completed, or a number that only
// contains a port do not.
func TestInitWaitsClassicProxy(t *testing.T) {
	native := func(p *corev1.Pod) {
		always := corev1.ContainerRestartPolicyAlways
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "istio-proxy", RestartPolicy: &always})
		p.Spec.Containers = p.Spec.Containers[1:]
	}
	cases := []struct {
		name   string
		change func(p *corev1.Pod)
		fires  bool
	}{
		{"classic, waiting", func(p *corev1.Pod) { deploymentPod(p); waitsForHealth(p) }, true},
		{"classic, agent port in args", func(p *corev1.Pod) {
			deploymentPod(p)
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "probe", Command: []string{"/check"}, Args: []string{"--url=http://localhost:15020/healthz/ready"}})
		}, true},
		{"native", func(p *corev1.Pod) { deploymentPod(p); native(p); waitsForHealth(p) }, false},
		{"completed", func(p *corev1.Pod) {
			deploymentPod(p)
			waitsForHealth(p)
			p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: "wait-for-mesh",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed"}}})
		}, false},
		{"only a number containing one", func(p *corev1.Pod) {
			deploymentPod(p)
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "seed", Command: []string{"seed", "--count=150210"}})
		}, false},
	}
	checks := 0
	for _, tc := range cases {
		fs := initWaitsClassicProxy(&Input{Facts: Facts{Pod: pod(tc.change)}})
		checks++
		if got := len(fs) == 1; got != tc.fires {
			t.Errorf("%s: fires %v, want %v: %+v", tc.name, got, tc.fires, fs)
		}
	}
	// A pod not created yet (what upgrade-plan and -f check): its spec
	// alone.
	p := pod(func(p *corev1.Pod) { deploymentPod(p); waitsForHealth(p) })
	p.Status = corev1.PodStatus{}
	fs := only(Hazards(p, "Deployment"), CodeInitWaitsClassicProxy)
	checks++
	if len(fs) != 1 || fs[0].Status != Fail || !strings.Contains(fs[0].Fix, "nativeSidecar") {
		t.Errorf("not created yet: %+v", fs)
	}
	t.Logf("%d checks", checks)
}
