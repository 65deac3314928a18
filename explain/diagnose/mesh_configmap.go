package diagnose

// The ConfigMaps istiod writes into the namespaces it serves: a pod that
// cannot mount one waits on istiod, not on its own manifest. What keeps
// istiod from writing it (a full ResourceQuota of the namespace) is named,
// with the change that lets it.

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// meshConfigMaps are the ConfigMaps istiod's namespace controller writes
// into every namespace it serves, and what each holds.
var meshConfigMaps = map[string]string{
	"istio-ca-root-cert": "the mesh's root certificate",
}

// clusterConfigMaps are the ConfigMaps the cluster writes into every
// namespace (istiod's, and kube-controller-manager's root CA that every
// pod's service account volume mounts), by who writes them.
var clusterConfigMaps = map[string]string{
	"istio-ca-root-cert": "istiod",
	"kube-root-ca.crt":   "kube-controller-manager",
}

// ConfigMapAdmission is what admission made of a dry-run create of a
// ConfigMap the cluster writes (as its writer makes it): Refusal is the
// refusal ("" admitted), Binding the ValidatingAdmissionPolicyBinding the
// refusal names when it could be read; Unknown says why it could not be
// asked.
type ConfigMapAdmission struct {
	Name    string                                                    `json:"name"`
	Refusal string                                                    `json:"refusal,omitempty"`
	Binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding `json:"-"`
	Unknown string                                                    `json:"unknown,omitempty"`
}

// NeedsQuotas says a pod's facts call for its namespace's ResourceQuotas:
// the kubelet cannot mount a ConfigMap istiod writes.
func NeedsQuotas(f *Facts) bool {
	return len(MissingClusterConfigMaps(f)) > 0
}

// MissingClusterConfigMaps are the ConfigMaps the cluster writes that the
// pod's events say it cannot mount (FactQuotas reads, with the quotas,
// what admission makes of each).
func MissingClusterConfigMaps(f *Facts) []string {
	if f.Startup == nil {
		return nil
	}
	var out []string
	for _, e := range f.Startup.Events {
		for _, m := range missingConfigMap.FindAllStringSubmatch(e.Message, -1) {
			if clusterConfigMaps[m[1]] != "" && !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	sort.Strings(out)
	return out
}

// refusedConfigMaps names what refuses the cluster's ConfigMaps the pod
// lacks, with the fix that lets their writers in (and has them write now);
// ok is false when admission admits them (or was not asked).
func (in *Input) refusedConfigMaps(f *Finding) bool {
	var names []string
	var refusal string
	var binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, a := range in.ConfigMapAdmissions {
		if a.Refusal != "" {
			names = append(names, a.Name)
			refusal, binding = a.Refusal, a.Binding
		}
	}
	if len(names) == 0 {
		return false
	}
	ns := in.Namespace()
	var writers []string
	for _, n := range names {
		writers = append(writers, "ConfigMap "+n+" ("+clusterConfigMaps[n]+"'s)")
	}
	f.Evidence += "; a dry-run create of " + quoteList(writers) + " in namespace " + ns + ", as the cluster writes it, is refused: " + oneLine(refusal, 300)
	them := map[bool]string{true: "it", false: "them"}[len(names) == 1]
	touch := "sleep 3; kubectl annotate namespace " + ns + " kubectl-mesh/resync=\"$(date +%s)\" --overwrite   # has " + quoteList(uniqueWriters(names)) + " write " + them + " now"
	if binding != nil {
		f.Mesh = "admission refuses " + quoteList(writers) + ": ValidatingAdmissionPolicyBinding " + binding.Name
		f.Fix = excludeConfigMaps(binding, names) + "   # the policy no longer applies to " + strings.Join(names, ", ") + " (and only to them)\n" + touch
		return true
	}
	f.Mesh = "admission refuses " + quoteList(writers)
	f.Fix = "# let " + strings.Join(names, " and ") + " through what refuses it (above), then:\n" + touch
	return true
}

// uniqueWriters are the writers of the ConfigMaps named.
func uniqueWriters(names []string) []string {
	var out []string
	for _, n := range names {
		if w := clusterConfigMaps[n]; !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// excludeConfigMaps is the JSON patch of a binding that leaves the
// ConfigMaps named out of it (an excludeResourceRules entry by name).
func excludeConfigMaps(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, names []string) string {
	rule := map[string]any{"apiGroups": []string{""}, "apiVersions": []string{"v1"}, "operations": []string{"CREATE", "UPDATE"},
		"resources": []string{"configmaps"}, "resourceNames": names}
	var op map[string]any
	switch mr := b.Spec.MatchResources; {
	case mr == nil:
		op = map[string]any{"op": "add", "path": "/spec/matchResources", "value": map[string]any{"excludeResourceRules": []any{rule}}}
	case mr.ExcludeResourceRules == nil:
		op = map[string]any{"op": "add", "path": "/spec/matchResources/excludeResourceRules", "value": []any{rule}}
	default:
		op = map[string]any{"op": "add", "path": "/spec/matchResources/excludeResourceRules/-", "value": rule}
	}
	return "kubectl patch validatingadmissionpolicybinding " + b.Name + " --type=json -p '" + sq(plainJSON([]any{op})) + "'"
}

// meshConfigMapFinding puts a pod's missing ConfigMap down to istiod, which
// writes it, and to the quota that stops istiod when one does.
func meshConfigMapFinding(in *Input, f *Finding, msg string) {
	m := missingConfigMap.FindStringSubmatch(msg)
	if m == nil || clusterConfigMaps[m[1]] == "" {
		return
	}
	name, ns := m[1], in.Namespace()
	if meshConfigMaps[name] == "" {
		// The cluster's own (kube-controller-manager's root CA).
		f.Evidence += "; ConfigMap " + name + " is written into every namespace by " + clusterConfigMaps[name] + ": it is not the app's to create"
		if !in.refusedConfigMaps(f) {
			f.Fix = "kubectl annotate namespace " + ns + " kubectl-mesh/resync=\"$(date +%s)\" --overwrite   # has " + clusterConfigMaps[name] + " write it now\n# if it is still missing: " + clusterConfigMaps[name] + "'s log says why it cannot write it"
		}
		return
	}
	f.Mesh = "ConfigMap " + name + " (" + meshConfigMaps[name] + "), which istiod writes into every namespace it serves"
	f.Evidence += "; " + f.Mesh + ": it is not the app's to create"
	if in.refusedConfigMaps(f) {
		return
	}
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
