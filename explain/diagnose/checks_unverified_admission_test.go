package diagnose

import (
	"strings"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// termPolicy: a manifest whose pods a ValidatingAdmissionPolicy binding
// takes in.
func termPolicy(r *injection.InjectionReport) {
	r.UnverifiedAdmission = []injection.Mutator{{By: "ValidatingAdmissionPolicyBinding rt-term (policy rt-term)"}}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeAdmissionUnverified, inj: termPolicy, files: []string{"web.yaml"},
		status: Unknown, evidence: "ValidatingAdmissionPolicyBinding rt-term (policy rt-term)",
		fix: "kubectl mesh diagnose -f web.yaml -n shop --verify"})
}

// A manifest meeting admission the model does not evaluate is unknown,
// never pass, until --verify answers; a live pod, a proof, a known refusal
// or nothing to meet: no finding.
func TestAdmissionUnverified(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name string
		inj  func(r *injection.InjectionReport)
		pod  bool
		want string
	}{
		{name: "a binding takes it in", inj: termPolicy, want: "only a server-side dry run shows"},
		{name: "not read", inj: func(r *injection.InjectionReport) {
			r.UnverifiedAdmissionUnknown = "forbidden: list validatingadmissionpolicies"
		}, want: "could not be read: forbidden"},
		{name: "--verify answered", inj: func(r *injection.InjectionReport) {
			termPolicy(r)
			r.Verified = &injection.Verification{}
		}},
		// A policy the file itself declares: no dry run sees it before it
		// is applied, --verify's admitted or not.
		{name: "the file's own policy", inj: func(r *injection.InjectionReport) {
			r.UnverifiedAdmission = []injection.Mutator{{By: "ValidatingAdmissionPolicyBinding no-host-ip (policy no-host-ip), declared in web.yaml and not applied yet"}}
		}, want: "a dry run only once the cluster has the policy"},
		{name: "the file's own policy, --verify admitted", inj: func(r *injection.InjectionReport) {
			r.UnverifiedAdmission = []injection.Mutator{{By: "ValidatingAdmissionPolicyBinding no-host-ip (policy no-host-ip), declared in web.yaml and not applied yet"}}
			r.Verified = &injection.Verification{}
		}, want: "declared in web.yaml"},
		{name: "--verify could not ask", inj: func(r *injection.InjectionReport) {
			termPolicy(r)
			r.NotVerified = "namespace shop does not exist yet"
		}, want: "--verify could not: namespace shop does not exist yet"},
		{name: "refused already", inj: func(r *injection.InjectionReport) {
			termPolicy(r)
			r.CreationBlocked = true
		}},
		{name: "nothing validates it", inj: func(r *injection.InjectionReport) {}},
		{name: "not injected, bindings not read", inj: func(r *injection.InjectionReport) {
			r.Expected = &no
			r.UnverifiedAdmissionUnknown = "forbidden"
		}},
		{name: "injected, a webhook", inj: func(r *injection.InjectionReport) {
			r.Expected = &yes
			r.UnverifiedAdmission = []injection.Mutator{{By: "ValidatingWebhookConfiguration kyverno (webhook validate.kyverno.svc)"}}
		}, want: "with what the injector adds"},
		{name: "a live pod", inj: termPolicy, pod: true},
	}
	for _, tc := range cases {
		r := injected(tc.inj)
		in := &Input{Facts: Facts{Injection: r, Files: []string{"web.yaml"}, NoPod: "a manifest"}, Target: "deployment/web -n shop"}
		if tc.pod {
			in.Pod, in.NoPod = pod(nil), ""
		}
		fs := admissionUnverified(in)
		if tc.want == "" {
			if len(fs) != 0 {
				t.Errorf("%s: %+v", tc.name, fs)
			}
			continue
		}
		if len(fs) != 1 || fs[0].Status != Unknown || !strings.Contains(fs[0].Evidence, tc.want) {
			t.Errorf("%s: %+v, want one unknown with %q", tc.name, fs, tc.want)
		}
	}
}
