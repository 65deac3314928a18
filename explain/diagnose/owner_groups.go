package diagnose

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// ownerGroupVars are the variables of istio-init's environment that make
// istio-iptables write rules by the socket's group: only these groups'
// outbound traffic captured, or these groups' let out uncaptured. The
// injector passes proxyMetadata (the pod's proxy.istio.io/config, a
// ProxyConfig's environmentVariables, the mesh's) into that environment.
var ownerGroupVars = []string{"ISTIO_OUTBOUND_OWNER_GROUPS", "ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE"}

// ownerGroups says which of those istio-init's environment sets, and the
// fix that takes them away: from the pod's proxy.istio.io/config when it
// sets them there (a patch of the template, the rest kept), else advice on
// the ProxyConfig that does. "" when none is set.
func ownerGroups(p *corev1.Pod) (said, fix string) {
	if p == nil {
		return "", ""
	}
	var set []string
	for _, v := range ownerGroupVars {
		if value, ok := initEnv(p, v); ok && value != "" {
			set = append(set, v+"="+quoteValue(value))
		}
	}
	if len(set) == 0 {
		return "", ""
	}
	sort.Strings(set)
	said = "istio-init's environment sets " + strings.Join(set, ", ") + " (from proxyMetadata), so its rules capture or let out outbound traffic by the socket's group: the extra rules are those, and a group they let out bypasses the proxy"
	value, found := withoutProxyMetadata(p.Annotations[istio.AnnotationProxyConfig], ownerGroupVars)
	if found && p.Annotations[istio.AnnotationProxyConfig] != "" {
		if fix = setTemplateAnnotations(p, map[string]string{istio.AnnotationProxyConfig: value}); !strings.HasPrefix(fix, "in the pod's manifest") {
			return said, fix + "   # a choice: the pod's proxy.istio.io/config without the owner-group settings, so every group's traffic is captured again (the rollout re-creates the pods)"
		}
	}
	return said, "kubectl get proxyconfigs.networking.istio.io -n " + p.Namespace + " -o yaml   # a choice: the namespace's (or the mesh's, in istio-system) ProxyConfig sets them in environmentVariables: remove them there, then re-create the pod"
}
