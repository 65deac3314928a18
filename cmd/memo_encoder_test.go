package cmd

import (
	"bytes"
	"fmt"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// The JSON list of a sweep whose answers the memo shares, encoded once per
// answer with the names put in, is byte for byte the list of every report
// encoded on its own: pods with and without owners, injected or not, in
// namespaces that inject and that do not, names that JSON escapes.
func TestMemoEncoderEncodesAsJSON(t *testing.T) {
	facts := memoFacts()
	reports, memo := memoReports(facts)
	if memo.Hits == 0 {
		t.Fatal("no answer was shared")
	}
	var plain, fast bytes.Buffer
	if err := render.List(&plain, render.JSON, "InjectionReportList", len(reports), func(i int) any { return reports[i] }); err != nil {
		t.Fatal(err)
	}
	enc := &render.MemoEncoder{}
	if err := render.List(&fast, render.JSON, "InjectionReportList", len(reports), func(i int) any {
		it, err := enc.Item(reports[i])
		if err != nil {
			t.Fatal(err)
		}
		return it
	}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(plain.Bytes(), fast.Bytes()) {
		t.Fatalf("the memo encoder's list differs:\n%s\n--- every report encoded:\n%s", fast.String(), plain.String())
	}
	if !bytes.Contains(plain.Bytes(), []byte(`kubectl rollout restart deployment/web-\u003c1\u003e -n shop`)) || !bytes.Contains(plain.Bytes(), []byte(`odd\u003cname\u003e\u0026\"0\"`)) {
		t.Errorf("the names were not put into the fixes:\n%s", plain.String())
	}
	t.Logf("%d reports from %d shared answers, %d bytes alike", len(reports), enc.Len(), plain.Len())
}

// memoFacts is a mesh that injects namespace shop and not namespace plain.
func memoFacts() *injection.ClusterFacts {
	fail := admissionregistrationv1.Fail
	return &injection.ClusterFacts{
		Webhooks: []admissionregistrationv1.MutatingWebhookConfiguration{{
			ObjectMeta: metav1.ObjectMeta{Name: "istio-sidecar-injector", Labels: map[string]string{"istio.io/rev": "default"}},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name:          "namespace.sidecar-injector.istio.io",
				ClientConfig:  admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "istio-system", Name: "istiod"}},
				FailurePolicy: &fail,
				Rules: []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"istio-injection": "enabled"}},
				ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "sidecar.istio.io/inject", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"false"}}}},
			}},
		}},
		Namespaces: map[string]*corev1.Namespace{
			"shop":  {ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"istio-injection": "enabled", "kubernetes.io/metadata.name": "shop"}}},
			"plain": {ObjectMeta: metav1.ObjectMeta{Name: "plain", Labels: map[string]string{"kubernetes.io/metadata.name": "plain"}}},
		},
		ConfigMaps:      map[string]*corev1.ConfigMap{},
		Services:        map[string]*corev1.Service{"istio-system/istiod": {ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istiod"}}},
		EndpointSlices:  map[string][]discoveryv1.EndpointSlice{"istio-system/istiod": {{Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}}}}}},
		KubeletVersions: map[string]string{"node-1": "v1.34.4"},
		Unknown:         map[string]string{},
	}
}

// memoReports explains, through one memo, 60 pods in each of plain and shop
// (in the apiserver's order): with and without owners, injected or not (half
// of them mismatched), some with names that JSON escapes.
func memoReports(facts *injection.ClusterFacts) ([]*injection.InjectionReport, *injection.Memo) {
	memo := injection.NewMemo(injection.Istio{}, facts, true)
	var reports []*injection.InjectionReport
	for _, ns := range []string{"plain", "shop"} {
		for i := 0; i < 60; i++ {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web"},
				Annotations: map[string]string{}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
			if i%7 == 0 {
				p.Name = fmt.Sprintf("odd<name>&\"%d\"", i)
			}
			if i%2 == 0 {
				p.Annotations["sidecar.istio.io/status"] = `{"revision":"default"}`
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.28.1"})
			}
			w := &injection.Workload{Kind: "Pod", Namespace: ns, Name: p.Name, Labels: p.Labels, Annotations: p.Annotations, Spec: p.Spec, Pod: p,
				NamespaceSource: injection.NamespaceFromCluster}
			if i%3 != 0 {
				w.Owner = &injection.Owner{Kind: "Deployment", Name: fmt.Sprintf("web-<%d>", i%5)}
			}
			reports = append(reports, memo.Explain(w))
		}
	}
	return reports, memo
}
