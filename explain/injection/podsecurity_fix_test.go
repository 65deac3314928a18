package injection

import (
	"strings"
	"testing"
)

// PodSecurity's refusal of what the injector adds: a seccomp profile alone
// (restricted, with the CNI plugin) is given on the template, the level
// kept; istio-init's capabilities keep the namespace's way out.
func TestPodSecurityFix(t *testing.T) {
	const seccomp = `pods "kyc-54966bfdd7-8pv56" is forbidden: violates PodSecurity "restricted:latest": seccompProfile (pod or containers "istio-validation", "istio-proxy" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
	const caps = `pods "web-1" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (containers "istio-init", "istio-proxy" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "istio-init" must not include "NET_ADMIN", "NET_RAW" in securityContext.capabilities.add), seccompProfile (pod or containers "istio-init", "istio-proxy" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`
	rs := &Workload{Kind: "ReplicaSet", Name: "kyc-54966bfdd7", Namespace: "ns", Labels: map[string]string{"pod-template-hash": "54966bfdd7"}}
	cron := &Workload{Kind: "CronJob", Name: "nightly", Namespace: "ns"}
	job := &Workload{Kind: "Job", Name: "once", Namespace: "ns"}
	checks := 0
	for _, tc := range []struct {
		name   string
		w      *Workload
		msg    string
		starts string
	}{
		{"seccomp only, a Deployment's", rs, seccomp, `kubectl patch deployment/kyc -n ns --type=merge -p '{"spec":{"template":{"spec":{"securityContext":{"seccompProfile":{"type":"RuntimeDefault"}}}}}}'   # a pod-level seccomp profile`},
		{"seccomp only, a CronJob's", cron, seccomp, `kubectl patch cronjob/nightly -n ns --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"spec":{"securityContext":{"seccompProfile":{"type":"RuntimeDefault"}}}}}}}}'`},
		{"seccomp only, a Job's (its template cannot be patched)", job, seccomp, "kubectl label namespace ns pod-security.kubernetes.io/enforce=privileged"},
		{"istio-init's capabilities", rs, caps, "kubectl label namespace ns pod-security.kubernetes.io/enforce=privileged --overwrite   # istio-init needs NET_ADMIN"},
	} {
		checks++
		if got := podSecurityFix(tc.w, tc.msg); !strings.HasPrefix(got, tc.starts) {
			t.Errorf("%s: fix\n%s\nwant it to start\n%s", tc.name, got, tc.starts)
		}
	}
	checks++
	if got := strings.Join(podSecurityChecks(caps), "|"); got != "allowPrivilegeEscalation != false|unrestricted capabilities|seccompProfile" {
		t.Errorf("podSecurityChecks = %q", got)
	}
	t.Logf("%d checks", checks)
}
