package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

var matrixNamespaces = []map[string]string{
	nil,
	{"istio-injection": "enabled"},
	{"istio-injection": "disabled"},
	{"istio.io/rev": "canary"},
	{"istio.io/rev": "prod"},
	{"istio.io/rev": "default"},
	{"istio-injection": "enabled", "istio.io/rev": "canary"},
	{"istio.io/rev": "nosuch"},
	{"istio.io/dataplane-mode": "ambient"},
}

type podVariant struct {
	name        string
	labels      map[string]string
	annotations map[string]string
	hostNetwork bool
}

var matrixPods = []podVariant{
	{name: "plain"},
	{name: "label-true", labels: map[string]string{"sidecar.istio.io/inject": "true"}},
	{name: "label-false", labels: map[string]string{"sidecar.istio.io/inject": "false"}},
	{name: "annotation-true", annotations: map[string]string{"sidecar.istio.io/inject": "true"}},
	{name: "annotation-false", annotations: map[string]string{"sidecar.istio.io/inject": "false"}},
	{name: "rev-canary", labels: map[string]string{"istio.io/rev": "canary"}},
	{name: "rev-prod", labels: map[string]string{"istio.io/rev": "prod"}},
	{name: "rev-default", labels: map[string]string{"istio.io/rev": "default"}},
	{name: "label-true-annotation-false", labels: map[string]string{"sidecar.istio.io/inject": "true"}, annotations: map[string]string{"sidecar.istio.io/inject": "false"}},
	{name: "label-enabled", labels: map[string]string{"sidecar.istio.io/inject": "enabled"}},
	{name: "never-inject", labels: map[string]string{"kmesh.demo/never-inject": "yes"}},
	{name: "host-network", hostNetwork: true},
}

// Ground truth from the real apiserver: for every namespace-label ×
// pod-label/annotation combination, why-injected's prediction (webhook,
// revision, verdict) must be what actually happens when the pod is created
// (server-side dry run: the apiserver calls the webhooks it selects, the
// stand-in injector decides and mutates, nothing is stored). Run under two
// control-plane layouts: default + canary + tag prod; and the default
// install deactivated with a "default" tag pointing at canary.
func TestWhyInjectedMatchesTheApiserver(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	namespaces := make([]string, len(matrixNamespaces))
	for i, l := range matrixNamespaces {
		namespaces[i] = c.Namespace(t, fmt.Sprintf("gt%d", i), l)
	}
	client, err := inspect.New(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T) int {
		facts, err := client.MeshFacts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for i, ns := range namespaces {
			for _, v := range matrixPods {
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: v.name, Namespace: ns, Labels: v.labels, Annotations: v.annotations},
					Spec: corev1.PodSpec{HostNetwork: v.hostNetwork, SchedulerName: "kmesh-unscheduled",
						Containers: []corev1.Container{{Name: "app", Image: testImage}}},
				}
				w := &injection.Workload{Kind: "Pod", Namespace: ns, Name: v.name, Labels: v.labels, Annotations: v.annotations,
					Spec: pod.Spec, NamespaceSource: injection.NamespaceFromCluster}
				predicted := injection.Istio{}.Explain(facts, w)
				created, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				combo := fmt.Sprintf("namespace %v, pod %s", matrixNamespaces[i], v.name)
				if err != nil {
					if !predicted.CreationBlocked {
						t.Errorf("%s: the apiserver refused the pod (%v); why-injected predicted %q", combo, err, predicted.Verdict)
					}
					continue
				}
				raw, injected := created.Annotations["sidecar.istio.io/status"]
				var st struct {
					Revision string `json:"revision"`
				}
				_ = json.Unmarshal([]byte(raw), &st)
				switch {
				case injected != predicted.Expected:
					t.Errorf("%s: injected=%v (revision %q), why-injected predicted expected=%v via %q: %s",
						combo, injected, st.Revision, predicted.Expected, predicted.Webhook, predicted.Verdict)
				case injected && st.Revision != predicted.Revision:
					t.Errorf("%s: injected by revision %q, predicted %q (webhook %s)", combo, st.Revision, predicted.Revision, predicted.Webhook)
				case injected && !strings.HasPrefix(predicted.Verdict, "Pods created from this template will be injected"):
					t.Errorf("%s: verdict %q", combo, predicted.Verdict)
				case !injected && predicted.Webhook != "" && !predicted.CreationBlocked:
					// A webhook was called but istiod skipped: the verdict must say so.
					if !strings.Contains(predicted.Verdict, "istiod skips it") {
						t.Errorf("%s: webhook %s called, not injected, verdict %q", combo, predicted.Webhook, predicted.Verdict)
					}
				}
				checked++
			}
		}
		return checked
	}

	total := 0
	t.Run("default-canary-tag-prod", func(t *testing.T) { total += run(t) })

	// Layout 2: `istioctl tag set default --revision canary` — the default
	// install's webhooks deactivated, a "default" tag pointing at canary.
	manifest, err := c.MeshManifest()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "istio-revision-tag-default", metav1.DeleteOptions{})
		if err := c.ApplyManifest(ctx, "", manifest); err != nil {
			t.Errorf("restore the mesh: %v", err)
		}
	})
	def, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "istio-sidecar-injector", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tag := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "istio-revision-tag-default",
		Labels: map[string]string{"istio.io/tag": "default", "istio.io/rev": "canary", "app": "sidecar-injector"}}}
	for _, w := range def.Webhooks {
		w := *w.DeepCopy()
		url := strings.Replace(*w.ClientConfig.URL, "/inject/default", "/inject/canary", 1)
		w.ClientConfig.URL = &url
		tag.Webhooks = append(tag.Webhooks, w)
	}
	never := &metav1.LabelSelector{MatchLabels: map[string]string{"istio.io/deactivated": "never-match"}}
	for i := range def.Webhooks {
		def.Webhooks[i].NamespaceSelector, def.Webhooks[i].ObjectSelector = never, never
	}
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, def, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, tag, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("default-deactivated-tag-default", func(t *testing.T) { total += run(t) })
	if total < 60 {
		t.Errorf("only %d combinations checked", total)
	}
	testreport.Count(t, "%d namespace × pod combinations checked against the apiserver", total)
}
