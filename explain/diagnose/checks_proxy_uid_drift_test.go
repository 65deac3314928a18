package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// uidAssigned: a Deployment's pod whose istio-proxy a mutator gave another
// uid after the injector wrote istio-init's -u 1337.
func uidAssigned(p *corev1.Pod) {
	deploymentPod(p)
	assigned := int64(1000680000)
	for i := range p.Spec.InitContainers {
		if p.Spec.InitContainers[i].Name == "istio-init" {
			p.Spec.InitContainers[i].Args = []string{"istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT"}
		}
	}
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == "istio-proxy" {
			p.Spec.Containers[i].SecurityContext = &corev1.SecurityContext{RunAsUser: &assigned, RunAsGroup: &assigned}
		}
	}
}

func uidMutator(r *injection.InjectionReport) {
	r.OtherMutators = []injection.Mutator{{By: "MutatingAdmissionPolicyBinding assign-uid (policy assign-uid)", Exempt: "kubectl patch mutatingadmissionpolicybinding assign-uid --type=json -p '[]'"}}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeProxyUIDDrift, pod: uidAssigned, inj: uidMutator,
		status: Fail, evidence: "istio-proxy runs as uid 1000680000, but istio-init's rules exempt uid 1337",
		fix: "kubectl patch mutatingadmissionpolicybinding assign-uid"})
}

// The proxy's uid against the one capture exempts: the same, unset, or
// set by the template's own istio-proxy (KM-CAP-010's), or another uid in
// the group the rules exempt too: no finding; another uid set after
// injection: a failure, put down to the mutators.
func TestProxyUIDDrift(t *testing.T) {
	same := int64(1337)
	for _, tc := range []struct {
		name   string
		change func(p *corev1.Pod)
		inj    func(r *injection.InjectionReport)
		want   string
	}{
		{name: "assigned by a mutator", change: uidAssigned, inj: uidMutator, want: "MutatingAdmissionPolicyBinding assign-uid"},
		{name: "assigned, no mutator known", change: uidAssigned, want: "kubectl mesh why-injected"},
		{name: "the injector's uid", change: func(p *corev1.Pod) {
			uidAssigned(p)
			for i := range p.Spec.Containers {
				if p.Spec.Containers[i].Name == "istio-proxy" {
					p.Spec.Containers[i].SecurityContext.RunAsUser = &same
				}
			}
		}},
		{name: "root in the proxy's group (TPROXY, capNetBindService, trace logging)", change: func(p *corev1.Pod) {
			uidAssigned(p)
			root, group := int64(0), int64(1337)
			for i := range p.Spec.Containers {
				if p.Spec.Containers[i].Name == "istio-proxy" {
					p.Spec.Containers[i].SecurityContext.RunAsUser, p.Spec.Containers[i].SecurityContext.RunAsGroup = &root, &group
				}
			}
		}},
		{name: "root in another group than -g exempts", change: func(p *corev1.Pod) {
			uidAssigned(p)
			p.Spec.InitContainers[0].Args = append(p.Spec.InitContainers[0].Args, "-g", "2000")
			root, group := int64(0), int64(1337)
			for i := range p.Spec.Containers {
				if p.Spec.Containers[i].Name == "istio-proxy" {
					p.Spec.Containers[i].SecurityContext.RunAsUser, p.Spec.Containers[i].SecurityContext.RunAsGroup = &root, &group
				}
			}
		}, want: "kubectl mesh why-injected"},
		{name: "istio-init without -u", change: func(p *corev1.Pod) {
			uidAssigned(p)
			p.Spec.InitContainers[0].Args = nil
		}},
	} {
		p := pod(tc.change)
		fs := proxyUIDDrift(&Input{Facts: Facts{Pod: p, Injection: injected(tc.inj)}, Target: "web-1 -n shop"})
		if tc.want == "" {
			if len(fs) != 0 {
				t.Errorf("%s: %+v", tc.name, fs)
			}
			continue
		}
		if len(fs) != 1 || !strings.Contains(fs[0].Evidence+fs[0].Fix, tc.want) {
			t.Errorf("%s: %+v, want %q", tc.name, fs, tc.want)
		}
	}
}
