package diagnose

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// A pod's own label istio.io/rev naming no revision or tag, in a namespace
// with no injection label: injection asked for and not done (KM-INJ-010),
// the revisions that exist named, the label set to one of them on what
// makes the pod; the why-injected row of the label says it matches nothing.
func TestPodRevisionNotFoundFinding(t *testing.T) {
	fail := admissionv1.Fail
	hook := func(rev string) admissionv1.MutatingWebhookConfiguration {
		return admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "istio-sidecar-injector-" + rev, Labels: map[string]string{"istio.io/rev": rev}},
			Webhooks: []admissionv1.MutatingWebhook{{Name: "rev.namespace.sidecar-injector.istio.io", FailurePolicy: &fail,
				ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "istio-system", Name: "istiod-" + rev}},
				Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
				NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "istio.io/rev", Operator: metav1.LabelSelectorOpIn, Values: []string{rev}},
					{Key: "istio-injection", Operator: metav1.LabelSelectorOpDoesNotExist}}},
				ObjectSelector: &metav1.LabelSelector{}}}}
	}
	cases := []struct {
		name  string
		owner *injection.Owner
		fix   string
	}{
		{name: "a bare pod: re-created with the label", fix: `set the label istio.io/rev="1-28" in the pod's manifest and re-create it`},
		{name: "a Deployment's pod: its template patched", owner: &injection.Owner{Kind: "Deployment", Name: "web"},
			fix: `kubectl patch deployment web -n hd3 --type merge -p '{"spec": {"template": {"metadata": {"labels": {"istio.io/rev": "1-28"}}}}}'`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hd3", Labels: map[string]string{"kubernetes.io/metadata.name": "hd3"}}}
			f := &injection.ClusterFacts{Webhooks: []admissionv1.MutatingWebhookConfiguration{hook("1-28")}, Namespaces: map[string]*corev1.Namespace{"hd3": ns},
				ConfigMaps: map[string]*corev1.ConfigMap{}, Services: map[string]*corev1.Service{}, EndpointSlices: map[string][]discoveryv1.EndpointSlice{},
				KubeletVersions: map[string]string{}, Unknown: map[string]string{}}
			p := pod(func(p *corev1.Pod) {
				p.Namespace, p.Labels = "hd3", map[string]string{"istio.io/rev": "1-99-gone"}
				p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
				p.Spec.Containers, p.Status.ContainerStatuses = p.Spec.Containers[1:], p.Status.ContainerStatuses[1:]
			})
			w := &injection.Workload{Kind: "Pod", Namespace: "hd3", Name: p.Name, Labels: p.Labels, Spec: p.Spec, Pod: p,
				NamespaceSource: injection.NamespaceFromCluster, Owner: tc.owner}
			r := injection.Istio{}.Explain(f, w)
			if want := `the pod's label istio.io/rev="1-99-gone" matches no active revision or tag; the cluster has revisions 1-28`; !strings.Contains(r.Verdict, want) {
				t.Errorf("verdict %q lacks %q", r.Verdict, want)
			}
			if strings.Contains(r.Verdict, "the pod no sidecar.istio.io/inject=true or istio.io/rev label") {
				t.Errorf("verdict %q says the pod has no istio.io/rev label", r.Verdict)
			}
			row := false
			for _, fac := range r.Factors {
				if fac.Factor == "pod label istio.io/rev" {
					row = fac.Effect == injection.EffectWarning && strings.Contains(fac.Source, "matches no active revision or tag")
				}
			}
			if !row {
				t.Errorf("the pod label's row does not say it matches nothing: %+v", r.Factors)
			}
			fs := only(Diagnose(Facts{Injection: r, Pod: p}).Findings, CodeAskedNotDone)
			if len(fs) != 1 || fs[0].Status != Fail {
				t.Fatalf("no %s failure: %+v (verdict %q)", CodeAskedNotDone, fs, r.Verdict)
			}
			if !strings.Contains(fs[0].Evidence, `istio.io/rev="1-99-gone" matches no active revision or tag`) || !strings.Contains(fs[0].Fix, tc.fix) {
				t.Errorf("evidence %q\nfix %q, want %q", fs[0].Evidence, fs[0].Fix, tc.fix)
			}
		})
	}
}
