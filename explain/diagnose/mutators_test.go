package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

const (
	rt1       = "MutatingWebhookConfiguration rt1-hardening (webhook drop-caps.rt1-hardening.example.com)"
	rt1Exempt = `kubectl patch mutatingwebhookconfiguration rt1-hardening --type=json -p '[{"op":"add","path":"/webhooks/0/namespaceSelector/matchExpressions","value":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["shop"]}]}]'`
	rt2       = "MutatingAdmissionPolicyBinding rt2-mirror (policy rt2-images)"
	rt2Exempt = `kubectl patch mutatingadmissionpolicybinding rt2-mirror --type=json -p '[{"op":"add","path":"/spec/matchResources","value":{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["shop"]}]}}}]'`
	proxyv2   = "docker.io/istio/proxyv2:1.28.0"
	mirrored  = "mirror.rt2.example/istio/proxyv2:1.28.0"
)

// mutators: the injection report names these other mutators and the
// injector's image.
func mutators(ms ...injection.Mutator) func(r *injection.InjectionReport) {
	return func(r *injection.InjectionReport) { r.OtherMutators, r.InjectorImage = ms, proxyv2 }
}

// ofDeployment: a pod of Deployment web, injected by the injector, with
// istio-init's capabilities as given (nil: none).
func ofDeployment(caps ...corev1.Capability) func(p *corev1.Pod) {
	return func(p *corev1.Pod) {
		yes := true
		p.Labels = map[string]string{"app": "web", "pod-template-hash": "5d9f"}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d9f", Controller: &yes}}
		p.Annotations = map[string]string{"sidecar.istio.io/status": `{"initContainers":["istio-init"],"containers":["istio-proxy"]}`, "sidecar.istio.io/proxyCPU": "100m"}
		if caps != nil {
			p.Spec.InitContainers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps, Drop: []corev1.Capability{"ALL"}}}
		}
		p.Spec.InitContainers[0].Image, p.Spec.Containers[0].Image = proxyv2, proxyv2
	}
}

// initUID: istio-init runs as uid.
func initUID(uid int64) func(p *corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers[0].SecurityContext.RunAsUser = &uid
	}
}

func ptrInt64(v int64) *int64 { return &v }

func then(fs ...func(p *corev1.Pod)) func(p *corev1.Pod) {
	return func(p *corev1.Pod) {
		for _, f := range fs {
			f(p)
		}
	}
}

// istio-init without NET_ADMIN/NET_RAW: put down to the mutator that
// matches the pod, with its exemption and a restart; several are all
// named, with no single patch; none, the pod's own istio-init or a
// mutator; the capabilities there, nothing is added.
func TestNoNetAdminMutator(t *testing.T) {
	denied := initFailed("could not fetch rule set generation id: Permission denied (you must be root)")
	hardening := injection.Mutator{By: rt1, Exempt: rt1Exempt}
	for _, tc := range []struct {
		name         string
		tc           checkCase
		has, hasNot  []string // in the evidence
		fix, fixNot  []string
		none         bool // no KM-INIT-001 finding at all
		fixUnchanged bool
	}{
		{name: "healthy", tc: checkCase{pod: ofDeployment("NET_ADMIN", "NET_RAW"), inj: mutators()}, none: true},
		{name: "healthy, a mutator that leaves them", tc: checkCase{pod: ofDeployment("NET_ADMIN", "NET_RAW"), inj: mutators(hardening)}, none: true},
		{name: "removed by one webhook", tc: checkCase{pod: then(ofDeployment(), denied), inj: mutators(hardening)},
			has:    []string{"its spec has no NET_ADMIN and NET_RAW: Istio's injector added them, and an admission mutator called after it removed them: removed by " + rt1},
			hasNot: []string{"PodSecurity", "PSP", "SCC"},
			fix:    []string{rt1Exempt + "   # exempts namespace shop from " + rt1 + "\nkubectl rollout restart deployment/web -n shop\n# or, on the mesh's side: a revision with Istio's CNI plugin (no istio-init)"}},
		{name: "one of two", tc: checkCase{pod: then(ofDeployment("NET_RAW"), denied), inj: mutators(hardening, injection.Mutator{By: rt2, Exempt: rt2Exempt})},
			has:    []string{"its spec has no NET_ADMIN: Istio's injector added it,", "removed it: one of " + rt1 + " or " + rt2},
			fix:    []string{"# exempt namespace shop from the one of " + rt1 + " or " + rt2 + " that removes it", "kubectl rollout restart deployment/web -n shop", "CNI plugin"},
			fixNot: []string{"kubectl patch"}},
		{name: "no mutator matches", tc: checkCase{pod: then(ofDeployment(), denied), inj: mutators()},
			has: []string{"the pod's own istio-init (which the injector merges over its own) or an admission mutator", "no other mutating webhook or MutatingAdmissionPolicyBinding matches the pod now"}, hasNot: []string{"PodSecurity"}, fixUnchanged: true},
		{name: "the template's own istio-init", tc: checkCase{pod: then(ofDeployment(), denied), inj: mutators(hardening),
			owner: &WorkloadState{Kind: "Deployment", Name: "web", Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "istio-init", Image: "auto"}}}}}},
			has: []string{"the pod template's own istio-init"}, hasNot: []string{rt1}, fixUnchanged: true},
		{name: "capabilities there, run as non-root by a mutator", tc: checkCase{pod: then(ofDeployment("NET_ADMIN", "NET_RAW"), denied, initUID(65532)), inj: mutators(hardening)},
			has:    []string{"istio-init's iptables calls are denied", "runs as uid 65532 (its securityContext.runAsUser), not root", "changed at admission by " + rt1},
			hasNot: []string{"lacks the NET_ADMIN"},
			fix:    []string{rt1Exempt + "   # exempts namespace shop from " + rt1 + "\nkubectl rollout restart deployment/web -n shop"}},
		{name: "capabilities there, non-root by the template's own istio-init", tc: checkCase{pod: then(ofDeployment("NET_ADMIN", "NET_RAW"), denied, initUID(1000)), inj: mutators(hardening),
			owner: &WorkloadState{Kind: "Deployment", Name: "web", Template: &corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "istio-init", SecurityContext: &corev1.SecurityContext{RunAsUser: ptrInt64(1000)}}}}}}},
			has: []string{"runs as uid 1000", "the pod template's own istio-init"}, hasNot: []string{rt1}, fixUnchanged: true},
		{name: "capabilities there, still denied", tc: checkCase{pod: then(ofDeployment("NET_ADMIN", "NET_RAW"), denied), inj: mutators(hardening)},
			hasNot: []string{"its spec has no", rt1}, fixUnchanged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Diagnose(tc.tc.facts())
			fs := only(d.Findings, CodeInitNoNetAdmin)
			if tc.none {
				if len(fs) != 0 {
					t.Fatalf("findings %+v", fs)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("%d KM-INIT-001 findings; all: %+v", len(fs), d.Findings)
			}
			f := fs[0]
			for _, s := range tc.has {
				if !strings.Contains(f.Evidence, s) {
					t.Errorf("evidence %q lacks %q", f.Evidence, s)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(f.Evidence, s) {
					t.Errorf("evidence %q has %q", f.Evidence, s)
				}
			}
			for _, s := range tc.fix {
				if !strings.Contains(f.Fix, s) {
					t.Errorf("fix %q lacks %q", f.Fix, s)
				}
			}
			for _, s := range tc.fixNot {
				if strings.Contains(f.Fix, s) {
					t.Errorf("fix %q has %q", f.Fix, s)
				}
			}
			if tc.fixUnchanged && !strings.HasPrefix(f.Fix, "kubectl get pod web-1 -n shop -o jsonpath=") {
				t.Errorf("fix %q, want the jsonpath that shows the capabilities", f.Fix)
			}
			for _, c := range d.Checks {
				if c.Name == CheckInit && (c.Evidence != f.Evidence || c.Fix != f.Fix) {
					t.Errorf("init row %q / %q, not the finding's", c.Evidence, c.Fix)
				}
			}
		})
	}
}

// An injected container that cannot pull an image the injector did not set,
// with a mutator matching the pod: that mutator rewrote it, not the pod's
// annotations.
func TestImageRewrittenByMutator(t *testing.T) {
	pull := func(name string, init bool) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			st := corev1.ContainerStatus{Name: name, Image: mirrored,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: `failed to pull image "` + mirrored + `": not found`}}}
			if init {
				p.Spec.InitContainers[0].Image = mirrored
				p.Status.InitContainerStatuses[0] = st
				p.Status.Phase, p.Status.ContainerStatuses = corev1.PodPending, nil
			} else {
				p.Spec.Containers[0].Image = mirrored
				p.Status.ContainerStatuses[0] = st
			}
		}
	}
	policy := injection.Mutator{By: rt2, Exempt: rt2Exempt}
	for _, tc := range []struct {
		name     string
		code     string
		tc       checkCase
		evidence []string
		fix      []string
		not      []string
	}{
		{name: "istio-init, one policy", code: CodeCannotStart, tc: checkCase{pod: then(ofDeployment("NET_ADMIN", "NET_RAW"), pull("istio-init", true)), inj: mutators(policy), now: 3 * time.Minute},
			evidence: []string{"istio-init was added by Istio's injector with image " + proxyv2 + "; its image is " + mirrored + ": rewritten at admission by " + rt2},
			fix:      []string{rt2Exempt + "   # exempts namespace shop from " + rt2 + "\nsleep 3; kubectl rollout restart deployment/web -n shop"},
			not:      []string{"proxyCPU"}},
		{name: "istio-proxy, two mutators", code: CodeProxyFailing, tc: checkCase{pod: then(ofDeployment("NET_ADMIN", "NET_RAW"), pull("istio-proxy", false)), inj: mutators(injection.Mutator{By: rt1, Exempt: rt1Exempt}, policy), now: 3 * time.Minute},
			evidence: []string{"rewritten at admission by one of " + rt1 + " or " + rt2},
			fix:      []string{"# exempt namespace shop from the one of " + rt1 + " or " + rt2 + " that rewrites it", "kubectl rollout restart deployment/web -n shop"},
			not:      []string{"proxyCPU", "kubectl patch"}},
		{name: "the injector's own image, no mutator named", code: CodeCannotStart, tc: checkCase{pod: then(ofDeployment("NET_ADMIN", "NET_RAW"), pull("istio-init", true)), inj: func(r *injection.InjectionReport) {
			r.OtherMutators, r.InjectorImage = []injection.Mutator{policy}, mirrored
		}, now: 3 * time.Minute},
			evidence: []string{"istio-init was added by Istio's injector"}, fix: []string{"global.hub"}, not: []string{rt2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := only(Diagnose(tc.tc.facts()).Findings, tc.code)
			if len(fs) != 1 {
				t.Fatalf("%d %s findings: %+v", len(fs), tc.code, fs)
			}
			f := fs[0]
			for _, s := range tc.evidence {
				if !strings.Contains(f.Evidence, s) {
					t.Errorf("evidence %q lacks %q", f.Evidence, s)
				}
			}
			for _, s := range tc.fix {
				if !strings.Contains(f.Fix, s) {
					t.Errorf("fix %q lacks %q", f.Fix, s)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(f.Evidence+f.Fix, s) {
					t.Errorf("finding %q / %q has %q", f.Evidence, f.Fix, s)
				}
			}
		})
	}
}
