package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A DaemonSet's pod held in init by a log shipper declared as a regular
// init container (red team round 20's 03): KM-INIT-005 says it never ends
// and its fix makes it a native sidecar; a wait loop, a native sidecar, a
// young one and an Istio container are not called that.
func TestInitRunsOn(t *testing.T) {
	yes := true
	always := corev1.ContainerRestartPolicyAlways
	shipper := func(cmd string, change func(c *corev1.Container)) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "node-exporter", Controller: &yes}}
			// The proxy a native sidecar, started (as the default revision's).
			proxy := p.Spec.Containers[0]
			proxy.RestartPolicy = &always
			p.Spec.InitContainers = append(p.Spec.InitContainers, proxy)
			p.Spec.Containers = p.Spec.Containers[1:]
			p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses[0])
			p.Status.ContainerStatuses = p.Status.ContainerStatuses[1:]
			c := corev1.Container{Name: "log-shipper", Command: []string{"/bin/sh", "-c", cmd}}
			if change != nil {
				change(&c)
			}
			p.Spec.InitContainers = append(p.Spec.InitContainers, c)
			p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: "log-shipper",
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(3)}}})
			p.Status.Phase = corev1.PodPending
			for i := range p.Status.ContainerStatuses {
				p.Status.ContainerStatuses[i] = corev1.ContainerStatus{Name: p.Status.ContainerStatuses[i].Name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}
			}
		}
	}
	loop := "while true; do echo shipping; sleep 30; done"
	checks := 0
	for _, tc := range []struct {
		name  string
		pod   func(p *corev1.Pod)
		now   time.Duration
		named bool
	}{
		{"a shipper loop, 3 minutes", shipper(loop, nil), 3 * time.Minute, true},
		{"a shipper loop, 30 seconds", shipper(loop, nil), 30 * time.Second, false},
		{"a wait loop", shipper("until nc -z db 5432; do sleep 2; done", nil), 3 * time.Minute, false},
		{"already a native sidecar", shipper(loop, func(c *corev1.Container) { c.RestartPolicy = &always }), 3 * time.Minute, false},
	} {
		d := Diagnose(checkCase{pod: tc.pod, now: tc.now}.facts())
		named := false
		for _, f := range d.Findings {
			if f.Code == CodeStuckInInit && strings.Contains(f.Evidence, "log-shipper has run for") {
				named = true
				checks++
				want := `kubectl patch daemonset/node-exporter -n shop --type=strategic -p '{"spec":{"template":{"spec":{"initContainers":[{"name":"log-shipper","restartPolicy":"Always"}]}}}}'   # a choice: log-shipper as a native sidecar`
				if !strings.HasPrefix(f.Fix, want) {
					t.Errorf("%s: fix %q, want %q", tc.name, f.Fix, want)
				}
			}
		}
		checks++
		if named != tc.named {
			t.Errorf("%s: named %v, want %v: %+v", tc.name, named, tc.named, d.Findings)
		}
	}
	t.Logf("%d checks", checks)
}
