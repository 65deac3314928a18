package injection

import (
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// withURL points a configuration's webhooks at a URL, as a revision whose
// istiod runs outside the cluster (or is gone) has them.
func withURL(c admissionregistrationv1.MutatingWebhookConfiguration, url string, policy admissionregistrationv1.FailurePolicyType) admissionregistrationv1.MutatingWebhookConfiguration {
	for i := range c.Webhooks {
		u := url
		c.Webhooks[i].ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &u}
		c.Webhooks[i].FailurePolicy = &policy
	}
	return c
}

// twoBroken is the default and canary revisions, healthy, beside two broken
// ones whose webhooks have the very same names: revision gone (its istiod
// at a URL where nothing answers) and a tag broken-tag whose Service has no
// endpoints.
func twoBroken(policy admissionregistrationv1.FailurePolicyType) *ClusterFacts {
	f := meshFacts()
	f.Webhooks = append(f.Webhooks,
		withURL(mwc("istio-sidecar-injector-gone", map[string]string{"istio.io/rev": "gone"}, revHooks("gone", "istiod-gone")), "https://127.0.0.1:15997/inject", policy),
		mwc("istio-revision-tag-broken-tag", map[string]string{"istio.io/rev": "gone2", "istio.io/tag": "broken-tag"}, revHooks("broken-tag", "istiod-gone2")))
	f.Services["istio-system/istiod-gone2"] = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istiod-gone2"}}
	f.EndpointSlices["istio-system/istiod-gone2"] = []discoveryv1.EndpointSlice{}
	return f
}

func refusedEvent(msg string) corev1.Event {
	return corev1.Event{Type: "Warning", Reason: "FailedCreate", Message: msg, Count: 3,
		InvolvedObject: corev1.ObjectReference{Kind: "ReplicaSet", Name: "app-5d9f8"}}
}

// Every Istio revision names its webhooks alike: a refusal is put down to
// the configuration whose selectors match this pod and whose URL the
// message quotes, never to another one with the same webhook name.
func TestRefusalAttributedToTheWebhookThatActed(t *testing.T) {
	m := Istio{}
	checks := 0
	expect := func(t *testing.T, ok bool, format string, args ...any) {
		t.Helper()
		checks++
		if !ok {
			t.Errorf(format, args...)
		}
	}

	// The namespace of revision gone: its webhook fails closed.
	f := withNamespace(twoBroken(admissionregistrationv1.Fail), "hz1", map[string]string{"istio.io/rev": "gone"})
	w := template("hz1", nil, nil)
	w.Kind = "ReplicaSet"
	w.Events = []corev1.Event{refusedEvent(`Error creating: Internal error occurred: failed calling webhook "rev.namespace.sidecar-injector.istio.io": failed to call webhook: Post "https://127.0.0.1:15997/inject?timeout=10s": dial tcp 127.0.0.1:15997: connect: connection refused`)}
	r := m.Explain(f, w)
	expect(t, r.CreationBlocked, "hz1: not blocked: %s", r.Verdict)
	expect(t, strings.Contains(r.Verdict, "istio-sidecar-injector-gone"), "hz1: the verdict does not name the configuration that acted: %s", r.Verdict)
	for _, s := range []string{r.Verdict, r.Fix} {
		expect(t, !strings.Contains(s, "broken-tag") && !strings.Contains(s, "gone2"), "hz1: blames the other broken revision: %s", s)
	}
	expect(t, strings.HasPrefix(r.Fix, "kubectl label namespace hz1 istio.io/rev=default --overwrite"), "hz1: fix %q", r.Fix)

	// The URL decides between two that match: the same event quoting
	// another URL is no webhook's that matches the pod now.
	w.Events = []corev1.Event{refusedEvent(`Error creating: Internal error occurred: failed calling webhook "rev.namespace.sidecar-injector.istio.io": failed to call webhook: Post "https://10.0.0.9:443/inject": x509: certificate signed by unknown authority`)}
	r = m.Explain(f, w)
	expect(t, !strings.Contains(r.Verdict, "broken-tag") && strings.Contains(r.Verdict, "older than a change"), "hz1, another URL: %s", r.Verdict)

	// The reverse: the namespace of tag broken-tag, whose Service has no
	// endpoints, is never put down to revision gone.
	f = withNamespace(twoBroken(admissionregistrationv1.Fail), "hz2", map[string]string{"istio.io/rev": "broken-tag"})
	w = template("hz2", nil, nil)
	r = m.Explain(f, w)
	expect(t, r.CreationBlocked && strings.Contains(r.Verdict, "istio-revision-tag-broken-tag"), "hz2: %s", r.Verdict)
	for _, s := range []string{r.Verdict, r.Fix} {
		expect(t, !strings.Contains(s, "15997") && !strings.Contains(s, "injector-gone"), "hz2: blames revision gone: %s", s)
	}
	expect(t, strings.HasPrefix(r.Fix, "kubectl label namespace hz2 istio.io/rev=default --overwrite"), "hz2: fix %q", r.Fix)

	// A namespace of the healthy default revision: neither broken one is named.
	f = withNamespace(twoBroken(admissionregistrationv1.Fail), "ok", map[string]string{"istio-injection": "enabled"})
	r = m.Explain(f, template("ok", nil, nil))
	expect(t, r.IsExpected() && !r.CreationBlocked, "ok: %s", r.Verdict)
	for _, s := range []string{r.Verdict, r.Fix, r.Reason} {
		expect(t, !strings.Contains(s, "gone") && !strings.Contains(s, "broken"), "ok: names a broken revision: %s", s)
	}
	testreport.Count(t, "refusal attribution: %d checks over two broken revisions sharing webhook names with the healthy ones", checks)
}

// A pod created without a sidecar while a failurePolicy Ignore webhook
// already selected it failed open: not "created before injection was
// enabled", and the fix moves it to a revision that answers before the
// restart.
func TestFailedOpenIsNotHistory(t *testing.T) {
	m := Istio{}
	base := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	setup := func(podAt time.Time) (*ClusterFacts, *Workload) {
		f := withNamespace(twoBroken(admissionregistrationv1.Ignore), "hz3", map[string]string{"istio.io/rev": "gone"})
		for i := range f.Webhooks {
			f.Webhooks[i].CreationTimestamp = metav1.NewTime(base)
		}
		ns := f.Namespaces["hz3"]
		at := metav1.NewTime(base.Add(time.Minute))
		ns.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl-label", Operation: metav1.ManagedFieldsOperationUpdate, Time: &at,
			FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:istio.io/rev":{}}}}`)}}
		_, w := livePod("hz3", nil, "", "", false)
		w.Pod.CreationTimestamp = metav1.NewTime(podAt)
		w.Owner = &Owner{Kind: "ReplicaSet", Name: "web-7d4b9"}
		return f, w
	}
	f, w := setup(base.Add(5 * time.Minute))
	r := m.Explain(f, w)
	if !r.IsMismatch() || !strings.Contains(r.Verdict, "failurePolicy Ignore") || strings.Contains(r.Reason, "created before") {
		t.Fatalf("a pod created after its namespace's label, without a sidecar: %s (%s)", r.Verdict, r.Reason)
	}
	lines := strings.Split(r.Fix, "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "kubectl label namespace hz3 istio.io/rev=default --overwrite") || !strings.HasPrefix(lines[1], "# then") || !strings.Contains(lines[1], "--verify") || !strings.HasPrefix(lines[2], "kubectl delete pod web-7d4b9-x2x -n hz3") {
		t.Fatalf("fix: %q", r.Fix)
	}
	// Created before the label: history, as before.
	f, w = setup(base.Add(30 * time.Second))
	if r = m.Explain(f, w); !strings.Contains(r.Reason, "created before") {
		t.Fatalf("a pod created before its namespace's label: %s (%s)", r.Verdict, r.Reason)
	}
	// A dry run that gets no sidecar from the Ignore webhook is its proof,
	// not a disagreement of the model.
	f, w = setup(base.Add(5 * time.Minute))
	r = m.Explain(f, w)
	v := AdmittedPod(&corev1.Pod{})
	v.Compare(r)
	if v.FailedOpen == "" || v.Disagreement != "" || !strings.Contains(v.Summary(), "failurePolicy Ignore") {
		t.Fatalf("dry run without a sidecar: %+v", v)
	}
}

// istiod's injection template failing on an annotation's value is its
// refusal of that annotation (KM-INJ-007), named whole, or every key the
// message's cut-short quote may be.
func TestDeniedByTemplate(t *testing.T) {
	w := template("shop", nil, map[string]string{"sidecar.istio.io/userVolume": "{tls: {}}", "sidecar.istio.io/userVolumeMount": "{tls: {}}", "other": "x"})
	msg := "admission webhook \"namespace.sidecar-injector.istio.io\" denied the request: failed to run injection template: template: inject:471:73: executing \"inject\" at <`sidecar.istio.io/userVolumeMount`>: range can't iterate over {}"
	if got := deniedByTemplate(msg, w); len(got) != 2 || got[1] != "sidecar.istio.io/userVolumeMount" {
		t.Errorf("whole key, and its YAML-valued sibling: %v", got)
	}
	if got := deniedByTemplate("denied the request: failed to run injection template: at <`sidecar.istio.io/userVo…", w); len(got) != 2 {
		t.Errorf("cut-short key: %v", got)
	}
	if got := deniedByTemplate("denied the request: something else", w); len(got) != 0 {
		t.Errorf("not a template failure: %v", got)
	}
}

// istiod's refusal of an annotation's value (proxy.istio.io/config that is
// not valid YAML) is its refusal of that annotation, not a webhook that
// cannot be called: the webhook was called, and denied the request.
func TestDeniedAnnotationValue(t *testing.T) {
	f := withNamespace(meshFacts(), "shop", map[string]string{"istio-injection": "enabled"})
	w := template("shop", nil, map[string]string{"proxy.istio.io/config": "holdApplicationUntilProxyStarts: yes\n  drain: [5s", "sidecar.istio.io/proxyCPU": "10m"})
	w.Kind = "ReplicaSet"
	w.Events = []corev1.Event{refusedEvent("Error creating: admission webhook \"namespace.sidecar-injector.istio.io\" denied the request: failed to run injection template: 1 error occurred:\n\t* invalid value 'holdApplicationUntilProxyStarts: yes\n  drain: [5s' for annotation 'proxy.istio.io/config': failed to convert to apply proxy config")}
	r := Istio{}.Explain(f, w)
	if !r.CreationBlocked || r.BlockedBy != BlockedAnnotation || r.Reason != "refused at admission: invalid annotation proxy.istio.io/config" {
		t.Fatalf("blocked %v by %q: %s (%s)", r.CreationBlocked, r.BlockedBy, r.Verdict, r.Reason)
	}
	if !strings.Contains(r.Fix, `"op":"remove","path":"/spec/template/metadata/annotations/proxy.istio.io~1config"`) || strings.Contains(r.Fix, "proxyCPU") {
		t.Fatalf("fix: %s", r.Fix)
	}
}

// A namespace with both istio-injection and istio.io/rev: the fix is the
// choice said, and the restart that applies it to a live pod.
func TestBothNamespaceLabelsFix(t *testing.T) {
	f, w := livePod("both", map[string]string{"istio-injection": "enabled", "istio.io/rev": "canary"}, `{"revision":"default","initContainers":["istio-init"],"containers":["istio-proxy"]}`, "kmesh.local/istio/proxyv2:1.31-dev", true)
	r := Istio{}.Explain(f, w)
	if !strings.HasPrefix(r.Fix, "kubectl label namespace both istio-injection-   # a choice") || !strings.Contains(r.Fix, "\nkubectl rollout restart deployment/web -n both") {
		t.Fatalf("fix: %q (verdict %s, warnings %v)", r.Fix, r.Verdict, r.Warnings)
	}
}
