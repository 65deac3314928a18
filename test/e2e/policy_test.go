package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

// noNetAdminPolicy creates a ValidatingAdmissionPolicy that refuses pods
// whose init containers add NET_ADMIN (as istio-init does), bound to one
// namespace, both deleted when the test ends.
func noNetAdminPolicy(ctx context.Context, t *testing.T, c *testcluster.Cluster, name, ns string) error {
	t.Helper()
	probe := appPod("vap-probe", map[string]string{"sidecar.istio.io/inject": "false"}, nil)
	probe.Spec.InitContainers = []corev1.Container{{Name: "probe", Image: testImage, SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}}
	return bindPodPolicy(ctx, t, c, name, ns,
		`!has(object.spec.initContainers) || object.spec.initContainers.all(c, !has(c.securityContext) || !has(c.securityContext.capabilities) || !has(c.securityContext.capabilities.add) || !c.securityContext.capabilities.add.exists(x, x == 'NET_ADMIN'))`,
		"containers may not add NET_ADMIN", probe)
}

// bindPodPolicy creates a ValidatingAdmissionPolicy (failurePolicy Fail)
// of one validation on pod creation, bound with Deny to namespace ns, both
// deleted when the test ends; then waits until the apiserver, which
// reloads its policies about every second, refuses a dry-run create of
// probe with it, so that what is planted next meets it.
func bindPodPolicy(ctx context.Context, t *testing.T, c *testcluster.Cluster, name, ns, expression, message string, probe *corev1.Pod) error {
	t.Helper()
	fail := admissionv1.Fail
	pol := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
				Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}}},
			Validations: []admissionv1.Validation{{Expression: expression, Message: message}}}}
	if _, err := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, pol, metav1.CreateOptions{}); err != nil {
		return err
	}
	t.Cleanup(func() {
		_ = c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	b := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}}}
	if _, err := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil {
		return err
	}
	t.Cleanup(func() {
		_ = c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy"), nil
	})
}
