package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

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
	{name: "always-inject", labels: map[string]string{"kmesh.demo/always-inject": "yes"}},
	// istiod checks these when it injects, and refuses the pod.
	{name: "bad-cidr", annotations: map[string]string{"traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.0.0.0/33"}},
	{name: "cidr-list-spaces", annotations: map[string]string{"traffic.sidecar.istio.io/includeOutboundIPRanges": "10.0.0.0/8, 192.168.0.0/16"}},
	{name: "bad-mode", annotations: map[string]string{"sidecar.istio.io/interceptionMode": "redirect"}},
	// It does not check this one: the pod is admitted and injected.
	{name: "bad-outbound-port", annotations: map[string]string{"traffic.sidecar.istio.io/includeOutboundPorts": "abc"}},
}

// Ground truth from the real apiserver and real istiod: for every
// namespace-label × pod-label/annotation combination, why-injected's
// prediction (webhook, revision, native or classic, verdict, refusal) must be
// what actually happens when the pod is created (server-side dry run: the
// apiserver calls the webhooks it selects, istiod decides and mutates or
// refuses, nothing is stored). Run under four control-plane layouts: default
// + canary + tag prod as rendered from Istio's charts; the default revision's
// injector policy disabled with an alwaysInjectSelector; its policy missing;
// and `istioctl tag set default --revision canary`. Then the namespaces
// istiod ignores, labelled for injection.
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
	verified := 0 // combinations whose --verify proof was compared

	total, layouts := 0, 0
	layout := func(name string) {
		layouts++
		t.Run(name, func(t *testing.T) { total += gtCombinations(t, c, client, namespaces, &verified) })
	}
	layout("default-canary-tag-prod")

	// Layouts 2 and 3: the default revision's injector ConfigMap changed as
	// a user would; istiod follows the ConfigMap. Each waits until istiod
	// acts on the change (a plain pod in an istio-injection=enabled
	// namespace is no longer injected), and until it acts on the restore.
	enabledNS := namespaces[1]
	plainInjected := func(ctx context.Context) (bool, error) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: enabledNS},
			Spec: corev1.PodSpec{SchedulerName: "kmesh-unscheduled", Containers: []corev1.Container{{Name: "app", Image: testImage}}}}
		created, err := c.Client.CoreV1().Pods(enabledNS).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		_, injected := created.Annotations["sidecar.istio.io/status"]
		return injected, nil
	}
	waitInjects := func(t *testing.T, want bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := plainInjected(ctx)
			return err == nil && got == want, nil
		}); err != nil {
			t.Fatalf("istiod did not act on its ConfigMap (a plain pod injected should be %v): %v", want, err)
		}
	}
	injectorConfig := func(t *testing.T, edit func(string) string) {
		t.Helper()
		cm, err := c.Client.CoreV1().ConfigMaps("istio-system").Get(ctx, "istio-sidecar-injector", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before := cm.Data["config"]
		cm.Data["config"] = edit(before)
		if cm.Data["config"] == before {
			t.Fatalf("the edit changed nothing in the injector config:\n%s", before)
		}
		if _, err := c.Client.CoreV1().ConfigMaps("istio-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitInjects(t, false)
	}
	restore := func(t *testing.T) {
		if err := c.ApplyMesh(ctx); err != nil {
			t.Fatalf("restore the mesh: %v", err)
		}
		waitInjects(t, true)
	}
	injectorConfig(t, func(s string) string {
		s = strings.Replace(s, "policy: enabled", "policy: disabled", 1)
		return strings.Replace(s, "alwaysInjectSelector:\n      []", "alwaysInjectSelector:\n      - matchLabels: {kmesh.demo/always-inject: \"yes\"}", 1)
	})
	layout("policy-disabled-always-inject-selector")
	restore(t)
	injectorConfig(t, func(s string) string { return strings.Replace(s, "policy: enabled\n", "", 1) })
	layout("policy-missing")
	restore(t)

	// Layout 2: Istio's own `istioctl tag set default --revision canary`: the
	// default install's webhooks deactivated, a "default" tag pointing at
	// canary (and a validating webhook for the default tag).
	if c.IstioctlPath == "" {
		t.Fatal("istioctl not found (hack/cluster/build-istio.sh builds it)")
	}
	t.Cleanup(func() {
		_ = c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "istio-revision-tag-default", metav1.DeleteOptions{})
		_ = c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "istiod-default-validator", metav1.DeleteOptions{})
		if err := c.ApplyMesh(ctx); err != nil {
			t.Errorf("restore the mesh: %v", err)
		}
	})
	out, err := exec.Command(c.IstioctlPath, "--kubeconfig", c.Kubeconfig, "tag", "set", "default", "--revision", "canary",
		"--skip-confirmation", "--overwrite").CombinedOutput()
	if err != nil {
		t.Fatalf("istioctl tag set default --revision canary: %v\n%s", err, out)
	}
	if err := c.WaitWebhooksPatched(ctx); err != nil {
		t.Fatal(err)
	}
	layout("default-deactivated-tag-default")
	if want := layouts * len(matrixNamespaces) * len(matrixPods); total != want {
		t.Errorf("%d combinations checked, want every one of %d (%d layouts × %d namespaces × %d pods)", total, want, layouts, len(matrixNamespaces), len(matrixPods))
	}

	ignored := gtIgnoredNamespaces(t, c, client)
	total += ignored
	if verified != total-ignored {
		t.Errorf("--verify's proof compared for %d combinations, want %d", verified, total-ignored)
	}
	testreport.Count(t, "%d namespace × pod × layout combinations checked against the apiserver and real istiod; --verify's proof agreed on %d", total, verified)
}

// gtCombinations checks every namespace × pod combination of the matrix
// against a dry-run create, and --verify's reading of it; it counts the
// proofs compared into verified.
func gtCombinations(t *testing.T, c *testcluster.Cluster, client *inspect.Client, namespaces []string, verified *int) int {
	ctx := context.Background()
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
			// --verify's reading of the same dry run must agree with the prediction.
			proof := injection.RefusedPod(fmt.Sprint(err))
			if err == nil {
				proof = injection.AdmittedPod(created)
			}
			proof.Compare(predicted)
			if proof.Agrees == nil || !*proof.Agrees {
				t.Errorf("%s: --verify's proof %q does not agree with the prediction: %s", combo, proof.Summary(), proof.Disagreement)
			}
			*verified++
			if err != nil {
				if !predicted.CreationBlocked {
					t.Errorf("%s: the apiserver refused the pod (%v); why-injected predicted %q", combo, err, predicted.Verdict)
				}
				checked++
				continue
			}
			if predicted.CreationBlocked {
				t.Errorf("%s: the apiserver admitted the pod; why-injected predicted a refusal: %s", combo, predicted.Verdict)
			}
			raw, injected := created.Annotations["sidecar.istio.io/status"]
			var st struct {
				Revision       string   `json:"revision"`
				InitContainers []string `json:"initContainers"`
			}
			_ = json.Unmarshal([]byte(raw), &st)
			if proof.Injected != injected || proof.Revision != st.Revision || injected && proof.Sidecar != kindOfStatus(st.InitContainers) {
				t.Errorf("%s: --verify read the admitted pod as %+v; it has status %q, init containers %v", combo, proof, raw, st.InitContainers)
			}
			switch {
			case predicted.Expected == nil || injected != *predicted.Expected:
				t.Errorf("%s: injected=%v (revision %q), why-injected predicted expected=%v via %q: %s",
					combo, injected, st.Revision, fmtBool(predicted.Expected), predicted.Webhook, predicted.Verdict)
			case injected && st.Revision != predicted.Revision:
				t.Errorf("%s: injected by revision %q, predicted %q (webhook %s)", combo, st.Revision, predicted.Revision, predicted.Webhook)
			case injected && kindOfStatus(st.InitContainers) != predicted.Sidecar:
				t.Errorf("%s: istiod added a %s sidecar (init containers %v), predicted %q", combo, kindOfStatus(st.InitContainers), st.InitContainers, predicted.Sidecar)
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

// gtIgnoredNamespaces: namespaces istiod never injects, even when
// labelled for injection (the pods are dry runs: nothing is created
// there).
func gtIgnoredNamespaces(t *testing.T, c *testcluster.Cluster, client *inspect.Client) int {
	ctx := context.Background()
	ignored := 0
	for _, name := range []string{"kube-public", "kube-node-lease"} {
		nsObj, err := c.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before := nsObj.DeepCopy()
		if nsObj.Labels == nil {
			nsObj.Labels = map[string]string{}
		}
		nsObj.Labels["istio-injection"] = "enabled"
		if _, err := c.Client.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		facts, err := client.MeshFacts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range matrixPods[:3] { // plain, label-true, label-false
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: v.name, Namespace: name, Labels: v.labels, Annotations: v.annotations},
				Spec: corev1.PodSpec{SchedulerName: "kmesh-unscheduled", Containers: []corev1.Container{{Name: "app", Image: testImage}}}}
			w := &injection.Workload{Kind: "Pod", Namespace: name, Name: v.name, Labels: v.labels, Annotations: v.annotations,
				Spec: pod.Spec, NamespaceSource: injection.NamespaceFromCluster}
			predicted := injection.Istio{}.Explain(facts, w)
			created, err := c.Client.CoreV1().Pods(name).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err != nil {
				t.Errorf("namespace %s, pod %s: %v", name, v.name, err)
				continue
			}
			_, injected := created.Annotations["sidecar.istio.io/status"]
			// The pod that opts out is excluded by the webhook's selector before
			// istiod sees it; the others reach istiod, which skips the namespace.
			if injected || predicted.Expected == nil || *predicted.Expected || v.name != "label-false" && !strings.Contains(predicted.Verdict, "never injects") {
				t.Errorf("namespace %s (istio-injection=enabled), pod %s: injected %v, predicted %v: %s", name, v.name, injected, fmtBool(predicted.Expected), predicted.Verdict)
			}
			ignored++
		}
		fresh, err := c.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			fresh.Labels = before.Labels
			_, err = c.Client.CoreV1().Namespaces().Update(ctx, fresh, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Errorf("restore the labels of namespace %s: %v", name, err)
		}
	}
	return ignored
}

// kindOfStatus names the sidecar kind from sidecar.istio.io/status: istiod
// lists istio-proxy among the init containers when it adds a native sidecar.
func kindOfStatus(inits []string) string {
	for _, n := range inits {
		if n == "istio-proxy" {
			return "native"
		}
	}
	return "classic"
}

// fmtBool prints a tri-state: true, false or null (unknown).
func fmtBool(b *bool) string {
	if b == nil {
		return "null"
	}
	return fmt.Sprint(*b)
}

// isFalse reports a known false (not true, not unknown).
func isFalse(b *bool) bool { return b != nil && !*b }
