package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

func init() {
	checkCases = append(checkCases, checkCase{code: CodeProxyGID, pod: func(p *corev1.Pod) {
		gid := int64(1337)
		deploymentPod(p)
		p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsGroup: &gid}
	}, status: Warning, evidence: "container app (its own securityContext.runAsGroup) runs as gid 1337", fix: `"runAsGroup":null`})
}

// deploymentPod is a pod of Deployment web's ReplicaSet.
func deploymentPod(p *corev1.Pod) {
	yes := true
	p.Labels = map[string]string{"pod-template-hash": "5d8f9", "app": "web"}
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d8f9", Controller: &yes}}
}

// The app's gid 1337, set on the container or inherited from the pod,
// fires, with a patch of the Deployment; the proxy's own 1337, another
// gid, a container that overrides the pod's, an init container, a pod not
// in the mesh and a pod without capture do not.
func TestProxyGID(t *testing.T) {
	g := func(v int64) *int64 { return &v }
	cases := []struct {
		name     string
		pod      func(p *corev1.Pod)
		inj      func(r *injection.InjectionReport)
		evidence string // "" for no finding
		fix      string
	}{
		{name: "healthy"},
		{name: "the proxy runs as 1337", pod: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: g(1337), RunAsGroup: g(1337)}
			p.Spec.InitContainers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: g(0), RunAsGroup: g(1337)}
		}},
		{name: "another gid", pod: func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsGroup: g(1000)}
			p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsGroup: g(2000)}
		}},
		{name: "the app overrides the pod's 1337", pod: func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsGroup: g(1337)}
			p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsGroup: g(1000)}
		}},
		{name: "an init container as 1337 (Istio's workaround)", pod: func(p *corev1.Pod) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "fetch", SecurityContext: &corev1.SecurityContext{RunAsUser: g(1337), RunAsGroup: g(1337)}})
		}},
		{name: "not in the mesh", pod: func(p *corev1.Pod) {
			p.Spec.InitContainers, p.Spec.Containers = nil, p.Spec.Containers[1:]
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsGroup: g(1337)}
		}, inj: func(r *injection.InjectionReport) {
			no := false
			r.Injected, r.Expected = &no, &no
		}},
		{name: "capture off", pod: func(p *corev1.Pod) {
			p.Annotations = map[string]string{"sidecar.istio.io/interceptionMode": "NONE"}
			p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsGroup: g(1337)}
		}},
		{name: "on the container, a Deployment's pod", pod: func(p *corev1.Pod) {
			deploymentPod(p)
			p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsGroup: g(1337)}
		}, evidence: "container app (its own securityContext.runAsGroup) runs as gid 1337, the proxy's",
			fix: `kubectl patch deployment/web -n shop -p '{"spec":{"template":{"spec":{"containers":[{"name":"app","securityContext":{"runAsGroup":null}}]}}}}'`},
		{name: "inherited from the pod", pod: func(p *corev1.Pod) {
			deploymentPod(p)
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: g(1000), RunAsGroup: g(1337)}
		}, evidence: "container app (the pod's securityContext.runAsGroup, which it inherits) runs as gid 1337",
			fix: `kubectl patch deployment/web -n shop -p '{"spec":{"template":{"spec":{"securityContext":{"runAsGroup":null}}}}}'`},
		{name: "both, two containers", pod: func(p *corev1.Pod) {
			deploymentPod(p)
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsGroup: g(1337)}
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "worker", SecurityContext: &corev1.SecurityContext{RunAsGroup: g(1337)}})
		}, evidence: "container app (the pod's securityContext.runAsGroup, which it inherits) and container worker (its own securityContext.runAsGroup)",
			fix: `{"securityContext":{"runAsGroup":null},"containers":[{"name":"worker","securityContext":{"runAsGroup":null}}]}`},
		{name: "a pod no controller makes", pod: func(p *corev1.Pod) {
			p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsGroup: g(1337)}
		}, evidence: "runs as gid 1337", fix: "in the pod's manifest, remove securityContext.runAsGroup of container app"},
		{name: "expected, not injected yet", pod: func(p *corev1.Pod) {
			p.Spec.InitContainers, p.Spec.Containers = nil, p.Spec.Containers[1:]
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsGroup: g(1337)}
		}, inj: func(r *injection.InjectionReport) {
			no := false
			r.Injected = &no
		}, evidence: "runs as gid 1337"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := only(Diagnose(checkCase{pod: tc.pod, inj: tc.inj}.facts()).Findings, CodeProxyGID)
			if tc.evidence == "" {
				if len(fs) != 0 {
					t.Fatalf("fired: %+v", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Status != Warning || !strings.Contains(fs[0].Evidence, tc.evidence) || !strings.Contains(fs[0].Fix, tc.fix) {
				t.Fatalf("got %+v\nwant evidence with %q, fix with %q", fs, tc.evidence, tc.fix)
			}
		})
	}
}
