package injection

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// A refusal of what the injector added, by another webhook or an admission
// policy, is the mesh's cause: put down to the object that acted on this
// pod (the binding the apiserver names, the webhook configuration whose
// rules and selectors match it), with a patch exempting the namespace; a
// refusal of the pod's own, or by a webhook that does not select the pod,
// is not.
func TestPolicyRefusalAttributed(t *testing.T) {
	m := Istio{}
	checks := 0
	expect := func(ok bool, format string, args ...any) {
		t.Helper()
		checks++
		if !ok {
			t.Errorf(format, args...)
		}
	}
	rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}
	vwc := func(name, ns string) admissionregistrationv1.ValidatingWebhookConfiguration {
		return admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "caps.policy.example.com", Rules: rules,
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}}
	}
	f := withNamespace(meshFacts(), "shop", map[string]string{"istio-injection": "enabled"})
	// Two configurations with the same webhook name: only the one whose
	// selector matches shop acted.
	f.ValidatingWebhooks = []admissionregistrationv1.ValidatingWebhookConfiguration{vwc("caps-other", "elsewhere"), vwc("caps-shop", "shop")}
	f.PolicyBindings = []admissionregistrationv1.ValidatingAdmissionPolicyBinding{{ObjectMeta: metav1.ObjectMeta{Name: "no-net-admin"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "no-net-admin"}}}

	w := template("shop", nil, nil)
	w.Spec.Containers = []corev1.Container{{Name: "app"}}
	w.Events = []corev1.Event{refusedEvent(`Error creating: admission webhook "caps.policy.example.com" denied the request: container istio-init adds NET_ADMIN, which is not allowed`)}
	r := m.Explain(f, w)
	expect(r.CreationBlocked && r.BlockedBy == BlockedPolicy, "webhook: blocked %v by %q: %s", r.CreationBlocked, r.BlockedBy, r.Verdict)
	expect(strings.Contains(r.Verdict, "ValidatingWebhookConfiguration caps-shop") && !strings.Contains(r.Verdict+r.Fix, "caps-other"), "webhook: %s / %s", r.Verdict, r.Fix)
	expect(strings.HasPrefix(r.Fix, `kubectl patch validatingwebhookconfiguration caps-shop --type=json -p '[{"op":"add","path":"/webhooks/0/namespaceSelector/matchExpressions","value":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["shop"]}]}]'`), "webhook fix: %s", r.Fix)
	expect(strings.Contains(r.Fix, "CNI"), "webhook fix without the mesh's way out: %s", r.Fix)

	w.Events = []corev1.Event{refusedEvent(`Error creating: pods "app-x" is forbidden: ValidatingAdmissionPolicy 'no-net-admin' with binding 'no-net-admin' denied request: NET_ADMIN is not allowed`)}
	r = m.Explain(f, w)
	expect(r.BlockedBy == BlockedPolicy && strings.Contains(r.Verdict, "binding no-net-admin"), "policy: %s", r.Verdict)
	expect(strings.HasPrefix(r.Fix, `kubectl patch validatingadmissionpolicybinding no-net-admin --type=json -p '[{"op":"add","path":"/spec/matchResources","value":{"namespaceSelector":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["shop"]}]}}}]'`), "policy fix: %s", r.Fix)

	// The pod's own container asks for NET_ADMIN: the policy's refusal is
	// the pod's, not the mesh's.
	w.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}
	r = m.Explain(f, w)
	expect(r.BlockedBy != BlockedPolicy, "the app's own NET_ADMIN put down to the mesh: %s", r.Verdict)
	testreport.Count(t, "policy refusal attribution: %d checks", checks)
}

// A refusal of the pod's own, by a webhook that does not answer, is named
// by the configuration whose selectors match the pod, with a fix; it is
// not the mesh's.
func TestPlatformRefusalNamed(t *testing.T) {
	rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"pods"}}}}
	f := withNamespace(meshFacts(), "shop", map[string]string{"istio-injection": "enabled", "scan": "yes"})
	f.ValidatingWebhooks = []admissionregistrationv1.ValidatingWebhookConfiguration{{ObjectMeta: metav1.ObjectMeta{Name: "image-scanner"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "scan.example.com", Rules: rules,
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"scan": "yes"}}}}}}
	w := template("shop", nil, nil)
	w.Events = []corev1.Event{refusedEvent(`Error creating: Internal error occurred: failed calling webhook "scan.example.com": failed to call webhook: Post "https://127.0.0.1:18999/validate?timeout=5s": dial tcp 127.0.0.1:18999: connect: connection refused`)}
	r := Istio{}.Explain(f, w)
	if r.CreationBlocked || r.RefusedBy == nil || r.RefusedBy.By != "ValidatingWebhookConfiguration image-scanner (webhook scan.example.com)" ||
		!strings.HasPrefix(r.RefusedBy.Fix, `kubectl patch validatingwebhookconfiguration image-scanner --type=json -p '[{"op":"add","path":"/webhooks/0/namespaceSelector/matchExpressions"`) {
		t.Fatalf("blocked %v by %q, refused by %+v", r.CreationBlocked, r.BlockedBy, r.RefusedBy)
	}
}

// A policy that refuses containers running as root refuses istio-init (uid
// 0) when every container of the pod's own runs as a non-root user: the
// mesh's cause, with the CNI way out; when one of the pod's own may run as
// root, the refusal is not put down to the mesh.
func TestRootRefusalOfIstioInit(t *testing.T) {
	f := withNamespace(meshFacts(), "shop", map[string]string{"istio-injection": "enabled"})
	f.PolicyBindings = []admissionregistrationv1.ValidatingAdmissionPolicyBinding{{ObjectMeta: metav1.ObjectMeta{Name: "nonroot"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "nonroot"}}}
	uid := int64(1000)
	w := template("shop", nil, nil)
	w.Kind = "CronJob"
	w.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: &uid}
	w.Spec.Containers = []corev1.Container{{Name: "report"}}
	w.Events = []corev1.Event{refusedEvent(`Error creating: pods "report-29930176-b7spp" is forbidden: ValidatingAdmissionPolicy 'nonroot' with binding 'nonroot' denied request: containers must not run as root (runAsUser 0)`)}
	r := Istio{}.Explain(f, w)
	if r.BlockedBy != BlockedPolicy || !strings.Contains(r.Verdict, "refused by ValidatingAdmissionPolicy nonroot (binding nonroot), which rejects istio-init's user, root (uid 0)") || !strings.Contains(r.Fix, "CNI") {
		t.Fatalf("non-root pod: blocked by %q: %s\nfix: %s", r.BlockedBy, r.Verdict, r.Fix)
	}
	w.Spec.SecurityContext = nil // the app may run as root: its own refusal
	r = Istio{}.Explain(f, w)
	if r.BlockedBy == BlockedPolicy {
		t.Fatalf("a pod whose own container may run as root put down to the mesh: %s", r.Verdict)
	}
}

// A policy requiring read-only root filesystems refuses istio-init, whose
// root filesystem is writable, when the pod's own containers all have a
// read-only one.
func TestReadOnlyRootRefusalOfIstioInit(t *testing.T) {
	f := withNamespace(meshFacts(), "shop", map[string]string{"istio-injection": "enabled"})
	f.PolicyBindings = []admissionregistrationv1.ValidatingAdmissionPolicyBinding{{ObjectMeta: metav1.ObjectMeta{Name: "ro-root"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "ro-root"}}}
	yes := true
	w := template("shop", nil, nil)
	w.Spec.Containers = []corev1.Container{{Name: "app", SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: &yes}}}
	w.Events = []corev1.Event{refusedEvent(`Error creating: pods "app-x" is forbidden: ValidatingAdmissionPolicy 'ro-root' with binding 'ro-root' denied request: every container must set securityContext.readOnlyRootFilesystem: true`)}
	r := Istio{}.Explain(f, w)
	if r.BlockedBy != BlockedPolicy || !strings.Contains(r.Verdict, "istio-init's writable root filesystem") {
		t.Fatalf("blocked by %q: %s", r.BlockedBy, r.Verdict)
	}
	w.Spec.Containers[0].SecurityContext = nil
	if r = (Istio{}).Explain(f, w); r.BlockedBy == BlockedPolicy {
		t.Fatalf("the app's own writable root put down to the mesh: %s", r.Verdict)
	}
}
