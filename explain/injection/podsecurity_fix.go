package injection

import (
	"regexp"
	"strings"
)

// podSecurityRefusal is what a PodSecurity refusal lists after its level:
// the checks the pod fails, each with its reason in parentheses.
var podSecurityRefusal = regexp.MustCompile(`violates PodSecurity "([^"]*)": (.*)`)

// parenthesised matches one check's reason (no nesting in the apiserver's
// words).
var parenthesised = regexp.MustCompile(`\([^()]*\)`)

// podSecurityChecks are the checks a PodSecurity refusal (msg) names, in
// its order ("seccompProfile", "unrestricted capabilities", …); none when
// msg is not one.
func podSecurityChecks(msg string) []string {
	m := podSecurityRefusal.FindStringSubmatch(strings.Join(strings.Fields(msg), " "))
	if m == nil {
		return nil
	}
	var out []string
	for _, c := range strings.Split(parenthesised.ReplaceAllString(m[2], ""), ",") {
		if c = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(c), ".")); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// podSecurityFix lets the injected containers into a namespace whose
// PodSecurity level refuses them. When a seccomp profile is all the
// refusal asks for (the restricted level, with Istio's CNI plugin: no
// istio-init and its capabilities), the template gets a pod-level
// RuntimeDefault profile, which every container inherits, the level kept.
// Otherwise (istio-init's NET_ADMIN and NET_RAW), the namespace's level,
// or Istio's CNI plugin.
func podSecurityFix(w *Workload, msg string) string {
	checks := podSecurityChecks(msg)
	onlySeccomp := len(checks) > 0
	for _, c := range checks {
		onlySeccomp = onlySeccomp && strings.HasPrefix(c, "seccompProfile")
	}
	if kind, name := templateOwnerOf(w); onlySeccomp && kind != "Pod" && kind != "Job" {
		return TemplatePatch(strings.ToLower(kind), name, w.Namespace, SeccompRuntimeDefault) +
			"   # a pod-level seccomp profile, which the injected containers (and the app's) inherit: all PodSecurity asks for here; the namespace keeps its level"
	}
	return "kubectl label namespace " + w.Namespace + " pod-security.kubernetes.io/enforce=privileged --overwrite   # istio-init needs NET_ADMIN and NET_RAW; or install Istio with its CNI plugin, which needs no istio-init"
}
