package inject

import (
	"context"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// sharedDryRuns says, for each namespace of a --verify sweep, what
// admission can tell of it: two namespaces with the same answer get the
// same outcome from a dry run of the same template, so one dry run serves
// both. A namespace whose answer is "" gets dry runs of its own. Only what
// is read decides, conservatively:
//   - the namespace's labels and annotations (webhook and Pod Security
//     selectors, node-selector plugins), all but its name label;
//   - no webhook of the cluster selects namespaces by name, and no
//     admission policy binding exists (either could tell them apart);
//   - no ResourceQuota or LimitRange in it (they count or change the pod);
//   - not a namespace istiod never injects.
//
// Anything that cannot be read turns sharing off.
func (e *Engine) sharedDryRuns(ctx context.Context, facts *injection.ClusterFacts, namespaces []string) map[string]string {
	if facts == nil || len(namespaces) < 2 {
		return nil
	}
	k := e.Client.Kube
	mwcs, err := k.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	vwcs, err := k.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var selectors []*metav1.LabelSelector
	for _, w := range mwcs.Items {
		for _, h := range w.Webhooks {
			selectors = append(selectors, h.NamespaceSelector)
		}
	}
	for _, w := range vwcs.Items {
		for _, h := range w.Webhooks {
			selectors = append(selectors, h.NamespaceSelector)
		}
	}
	for _, s := range selectors {
		if selectsByName(s) {
			return nil
		}
	}
	vapb, err := k.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil && !apierrors.IsNotFound(err) || err == nil && len(vapb.Items) > 0 {
		return nil
	}
	mapb, err := k.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil && !apierrors.IsNotFound(err) || err == nil && len(mapb.Items) > 0 {
		return nil
	}
	counted := map[string]bool{}
	quotas, err := k.CoreV1().ResourceQuotas("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	for _, q := range quotas.Items {
		counted[q.Namespace] = true
	}
	limits, err := k.CoreV1().LimitRanges("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	for _, l := range limits.Items {
		counted[l.Namespace] = true
	}
	out := map[string]string{}
	for _, ns := range namespaces {
		obj := facts.Namespaces[ns]
		if obj == nil || counted[ns] || istio.IgnoredNamespace(ns) {
			continue
		}
		var parts []string
		for key, v := range obj.Labels {
			if key != istio.LabelMetadataName {
				parts = append(parts, "l:"+key+"="+v)
			}
		}
		for key, v := range obj.Annotations {
			if key != "kubectl.kubernetes.io/last-applied-configuration" {
				parts = append(parts, "a:"+key+"="+v)
			}
		}
		sort.Strings(parts)
		out[ns] = "namespaces like " + strings.Join(parts, "\x00")
	}
	return out
}

// selectsByName: a namespace selector that reads the namespace's name label.
func selectsByName(s *metav1.LabelSelector) bool {
	if s == nil {
		return false
	}
	if _, ok := s.MatchLabels[istio.LabelMetadataName]; ok {
		return true
	}
	for _, e := range s.MatchExpressions {
		if e.Key == istio.LabelMetadataName {
			return true
		}
	}
	return false
}
