package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// istio-init cannot be created: the pod's Localhost seccomp profile, which
// it inherits, is not on the node (red team round 20's 02). KM-INIT-009
// says where the profile is set, and its fix sets the runtime's default in
// the template; a profile of the app's own container is patched there.
func TestSeccompProfileMissing(t *testing.T) {
	yes := true
	name := "profiles/checkout-audit.json"
	const msg = `failed to create containerd container: cannot load seccomp profile "/var/lib/kubelet/seccomp/profiles/checkout-audit.json": open /var/lib/kubelet/seccomp/profiles/checkout-audit.json: no such file or directory`
	stuck := func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "checkout", Controller: &yes}}
		p.Name = "checkout-0"
		p.Status.Phase = corev1.PodPending
		p.Status.InitContainerStatuses[0] = corev1.ContainerStatus{Name: "istio-init", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: msg}}}
		p.Status.ContainerStatuses = nil
	}
	checks := 0
	for _, tc := range []struct {
		name, want, why string
		pod             func(p *corev1.Pod)
	}{
		{"the pod's profile", `kubectl patch statefulset/checkout -n shop --type=strategic -p '{"spec":{"template":{"spec":{"securityContext":{"seccompProfile":{"localhostProfile":null,"type":"RuntimeDefault"}}}}}}'   # a choice`,
			`the pod's securityContext.seccompProfile is Localhost "profiles/checkout-audit.json", which istio-init inherits`,
			func(p *corev1.Pod) {
				stuck(p)
				p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &name}}
			}},
		{"istio-init's own profile", `kubectl patch statefulset/checkout -n shop --type=strategic -p '{"spec":{"template":{"spec":{"initContainers":[{"name":"istio-init","securityContext":{"seccompProfile":{"localhostProfile":null,"type":"RuntimeDefault"}}}]}}}}'`,
			`container istio-init's own securityContext.seccompProfile is Localhost`,
			func(p *corev1.Pod) {
				stuck(p)
				p.Spec.InitContainers[0].SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &name}}
			}},
	} {
		d := Diagnose(checkCase{pod: tc.pod}.facts())
		checks += 3
		if d.Code != CodeCannotStart {
			t.Errorf("%s: first %s %s", tc.name, d.Code, d.Verdict)
		}
		if !strings.Contains(d.Verdict, tc.why) {
			t.Errorf("%s: verdict %q does not say %q", tc.name, d.Verdict, tc.why)
		}
		if !strings.HasPrefix(d.Fix, tc.want) {
			t.Errorf("%s: fix %q, want %q", tc.name, d.Fix, tc.want)
		}
	}
	t.Logf("%d checks", checks)
}
