package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A StatefulSet's pod held by an app init container that runs after
// istio-init's capture under a classic sidecar: the stuck finding says
// why (the proxy starts after it; its traffic goes to 15001) and its fix
// is a native sidecar with the stuck pod deleted. One that completed is
// only the warning; a pod not stuck has no such finding.
func TestCapturedWait(t *testing.T) {
	yes := true
	stuck := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "ledger", Controller: &yes}}
		p.Name = "ledger-0"
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "wait-for-mesh"})
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: "wait-for-mesh",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(3)}}})
		p.Status.Phase = corev1.PodPending
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i] = corev1.ContainerStatus{Name: p.Status.ContainerStatuses[i].Name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}
		}
	}
	checks := 0
	f := checkCase{pod: stuck, now: 3 * time.Minute}.facts()
	d := Diagnose(f)
	fs := only(d.Findings, CodeStuckInInit)
	checks++
	if len(fs) != 1 {
		t.Fatalf("KM-INIT-005 findings: %+v", d.Findings)
	}
	checks++
	if !strings.Contains(fs[0].Evidence, "istio-proxy starts only once every init container has completed") || fs[0].Mesh == "" {
		t.Errorf("the evidence does not say the classic order holds it: %s", fs[0].Evidence)
	}
	lines := strings.Split(fs[0].Fix, "\n")
	checks++
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `kubectl patch statefulset/ledger -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/nativeSidecar":"true"}}}}}'`) ||
		!strings.HasPrefix(lines[1], "kubectl delete pod ledger-0 -n shop") {
		t.Errorf("the fix: %s", fs[0].Fix)
	}
	checks++
	if len(d.Findings) == 0 || d.Findings[0].Code != CodeStuckInInit {
		t.Errorf("first finding %+v, want the stuck one", d.Findings)
	}
	// Before istio-init (no capture), waiting on the proxy's port: the
	// same deadlock; waiting on something else: only the symptom.
	for cmd, named := range map[string]bool{"until nc -z 127.0.0.1 15021; do sleep 2; done": true, "until nc -z db 5432; do sleep 2; done": false} {
		f := checkCase{pod: func(p *corev1.Pod) {
			stuck(p)
			n := len(p.Spec.InitContainers) - 1
			p.Spec.InitContainers[n].Command = []string{"/bin/sh", "-c", cmd}
			p.Spec.InitContainers[0], p.Spec.InitContainers[n] = p.Spec.InitContainers[n], p.Spec.InitContainers[0]
			p.Status.InitContainerStatuses[0], p.Status.InitContainerStatuses[n] = p.Status.InitContainerStatuses[n], p.Status.InitContainerStatuses[0]
			p.Status.InitContainerStatuses[n].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
		}, now: 3 * time.Minute}.facts()
		fs := only(Diagnose(f).Findings, CodeStuckInInit)
		checks++
		if len(fs) != 1 || strings.Contains(fs[0].Evidence, "waits for ever") != named || strings.HasPrefix(fs[0].Fix, "kubectl patch statefulset/ledger") != named {
			t.Errorf("%q: named %v: %+v", cmd, named, fs)
		}
	}
	t.Logf("%d checks", checks)
}

// A shell that traps SIGTERM goes on working after the kubelet asks it to
// stop; other commands do not.
func TestTrapsTerm(t *testing.T) {
	for cmd, want := range map[string]bool{
		`trap 'deregister; exit 0' TERM; while true; do sleep 1; done`: true,
		`trap "echo bye" SIGTERM; exec sleep 100`:                      true,
		`trap cleanup INT 15; serve`:                                   true,
		`trap - TERM; exec httpd`:                                      true,
		`exec httpd -f -p 8080`:                                        false,
		`echo TERM; trapdoor`:                                          false,
	} {
		if got := trapsTerm(corev1.Container{Command: []string{"/bin/sh", "-c", cmd}}); got != want {
			t.Errorf("%q: %v, want %v", cmd, got, want)
		}
	}
}
