package diagnose

// The ConfigMaps istiod writes into the namespaces it serves: a pod that
// cannot mount one waits on istiod, not on its own manifest. What keeps
// istiod from writing it (a full ResourceQuota of the namespace) is named,
// with the change that lets it.

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// meshConfigMaps are the ConfigMaps istiod's namespace controller writes
// into every namespace it serves, and what each holds.
var meshConfigMaps = map[string]string{
	"istio-ca-root-cert": "the mesh's root certificate",
}

// NeedsQuotas says a pod's facts call for its namespace's ResourceQuotas:
// the kubelet cannot mount a ConfigMap istiod writes.
func NeedsQuotas(f *Facts) bool {
	if f.Startup == nil {
		return false
	}
	for _, e := range f.Startup.Events {
		if m := missingConfigMap.FindStringSubmatch(e.Message); m != nil && meshConfigMaps[m[1]] != "" {
			return true
		}
	}
	return false
}

// meshConfigMapFinding puts a pod's missing ConfigMap down to istiod, which
// writes it, and to the quota that stops istiod when one does.
func meshConfigMapFinding(in *Input, f *Finding, msg string) {
	m := missingConfigMap.FindStringSubmatch(msg)
	if m == nil || meshConfigMaps[m[1]] == "" {
		return
	}
	name, ns := m[1], in.Namespace()
	f.Mesh = "ConfigMap " + name + " (" + meshConfigMaps[name] + "), which istiod writes into every namespace it serves"
	f.Evidence += "; " + f.Mesh + ": it is not the app's to create"
	touch := "sleep 3; kubectl annotate namespace " + ns + " kubectl-mesh/resync=\"$(date +%s)\" --overwrite   # once the quota is updated, has istiod's namespace controller write it now"
	for _, q := range in.Quotas {
		for _, key := range []corev1.ResourceName{"count/configmaps", "configmaps"} {
			hard, ok := q.Status.Hard[key]
			if !ok {
				hard, ok = q.Spec.Hard[key]
			}
			used := q.Status.Used[key]
			if !ok || used.Cmp(hard) < 0 {
				continue
			}
			// Room for one more than is used now (more may be used than
			// the quota allows: it was lowered, or counted late).
			more := used.DeepCopy()
			more.Add(resource.MustParse("1"))
			f.Evidence += fmt.Sprintf("; ResourceQuota %s allows %s=%s and %s are used: istiod's create of %s is refused", q.Name, key, hard.String(), used.String(), name)
			f.Mesh += ", refused by ResourceQuota " + q.Name
			f.Fix = fmt.Sprintf(`kubectl patch resourcequota %s -n %s --type=merge -p '{"spec":{"hard":{%q:%q}}}'   # room for istiod's ConfigMap (or free one)`, q.Name, ns, key, more.String()) + "\n" + touch
			return
		}
	}
	switch {
	case in.QuotasUnknown != "":
		f.Evidence += "; whether a ResourceQuota stops istiod is unknown: " + in.QuotasUnknown
		f.Needs = append(f.Needs, "list resourcequotas (namespace "+ns+")")
	default:
		f.Evidence += "; no ResourceQuota of the namespace is full: istiod is not writing it (not running, or its discoverySelectors leave namespace " + ns + " out)"
	}
	f.Fix = touch + "\n# if it is still missing: istiod's log (kubectl logs deployment/istiod -n istio-system) says why it cannot write it"
}
