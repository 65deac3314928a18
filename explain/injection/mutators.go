package injection

import (
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Admission runs every mutating webhook and every MutatingAdmissionPolicy
// whose rules and selectors match a pod, Istio's injector among them; with
// reinvocationPolicy IfNeeded, or simply called after it, another one can
// rewrite what the injector added (istio-init's capabilities, the
// containers' images). otherMutators names those that match a live pod:
// the candidates, not a proof that one of them changed it.

const (
	annotationProxyImage     = "sidecar.istio.io/proxyImage"
	annotationProxyImageType = "sidecar.istio.io/proxyImageType"
)

// otherMutators are the admission mutators other than Istio's webhooks
// whose rules cover pod CREATE and whose selectors match w, with the
// command that exempts w's namespace from each; unknown says what of them
// could not be read.
func otherMutators(f *ClusterFacts, w *Workload, nsLabels map[string]string) (out []Mutator, unknown string) {
	for _, c := range f.Webhooks {
		for i, h := range c.Webhooks {
			if isIstioWebhook(h.Name) || !rulesCoverPodCreate(h.Rules) || !selects(h.NamespaceSelector, nsLabels) || !selects(h.ObjectSelector, w.Labels) {
				continue
			}
			out = append(out, Mutator{
				By:     "MutatingWebhookConfiguration " + c.Name + " (webhook " + h.Name + ")",
				Exempt: exemptCommand("mutatingwebhookconfiguration "+c.Name, fmt.Sprintf("/webhooks/%d", i), false, h.NamespaceSelector, w.Namespace),
			})
		}
	}
	for _, b := range f.MutatingPolicyBindings {
		m := b.Spec.MatchResources
		var nsSel, objSel *metav1.LabelSelector
		if m != nil {
			nsSel, objSel = m.NamespaceSelector, m.ObjectSelector
			if len(m.ResourceRules) > 0 && !namedRulesCoverPodCreate(m.ResourceRules) {
				continue
			}
		}
		if !selects(nsSel, nsLabels) || !selects(objSel, w.Labels) {
			continue
		}
		out = append(out, Mutator{
			By:     "MutatingAdmissionPolicyBinding " + b.Name + " (policy " + b.Spec.PolicyName + ")",
			Exempt: exemptCommand("mutatingadmissionpolicybinding "+b.Name, "/spec/matchResources", m == nil, nsSel, w.Namespace),
		})
	}
	if why, ok := f.Unknown[FactWebhooks]; ok {
		unknown = "mutating webhooks: " + why
	}
	if f.MutatingPolicyBindingsUnknown != "" {
		if unknown != "" {
			unknown += "; "
		}
		unknown += f.MutatingPolicyBindingsUnknown
	}
	return out, unknown
}

func namedRulesCoverPodCreate(rules []admissionregistrationv1.NamedRuleWithOperations) bool {
	rs := make([]admissionregistrationv1.RuleWithOperations, 0, len(rules))
	for _, r := range rules {
		if len(r.ResourceNames) == 0 {
			rs = append(rs, r.RuleWithOperations)
		}
	}
	return rulesCoverPodCreate(rs)
}

// injectorImage is the image the injector gives istio-proxy and istio-init
// of a pod injected by rev: the pod's sidecar.istio.io/proxyImage when it
// names a whole image, else hub/image:tag[-variant] from the revision's
// values (the image, and the variant, may be set by the pod's
// annotations). "" when the values do not say.
func injectorImage(rev *istioRevision, annotations map[string]string) string {
	image := "proxyv2"
	if rev != nil && rev.values.Global.Proxy.Image != "" {
		image = rev.values.Global.Proxy.Image
	}
	if v := annotations[annotationProxyImage]; v != "" {
		image = v
	}
	if strings.Contains(image, "/") {
		return image
	}
	if rev == nil || rev.values.Global.Hub == "" || rev.values.Global.Tag == nil {
		return ""
	}
	tag := fmt.Sprint(rev.values.Global.Tag)
	variant := rev.values.Global.Variant
	if v, ok := annotations[annotationProxyImageType]; ok {
		variant = v
	}
	if variant != "" && variant != "default" && !strings.HasSuffix(tag, "-"+variant) {
		tag += "-" + variant
	}
	return rev.values.Global.Hub + "/" + image + ":" + tag
}

// ImageDiffers says a container's image is not the one the injector set
// (InjectorImage): another repository, or another tag (the tag's variant
// suffix, which the mesh's config may set, aside). False when want is
// not known.
func ImageDiffers(want, got string) bool {
	if want == "" || want == got {
		return false
	}
	split := func(image string) (repo, tag string) {
		if i := strings.Index(image, "@"); i >= 0 {
			return image[:i], image[i:]
		}
		if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
			return image[:i], image[i+1:]
		}
		return image, "latest"
	}
	wr, wt := split(want)
	gr, gt := split(got)
	return wr != gr || gt != wt && !strings.HasPrefix(gt, wt+"-")
}
