package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

// catServes says the apiserver serves a resource in a group version.
func catServes(c *testcluster.Cluster, groupVersion, resource string) bool {
	l, err := c.Client.Discovery().ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(l.APIResources, func(r metav1.APIResource) bool { return r.Name == resource })
}

// catOptedOut plants KM-INJ-017: a MutatingAdmissionPolicy, bound to ns
// only, that labels pods of app=NAME sidecar.istio.io/inject=false, then
// the Deployment; its pod runs without a sidecar. The policy and its
// binding are deleted at the end.
func catOptedOut(ctx context.Context, t *testing.T, c *testcluster.Cluster, f *catFault, ns string) error {
	name := "cat-opt-out-" + f.name
	if err := catBindMAP(ctx, t, c, name, ns, f.name, "Never", `Object{metadata: Object.metadata{labels: {"sidecar.istio.io/inject": "false"}}}`); err != nil {
		return err
	}
	// The apiserver reloads its admission policies about every second: the
	// Deployment waits until a pod created now is labelled.
	probe := appPod(f.name+"-probe", map[string]string{"app": f.name}, nil)
	if err := catPoll(ctx, "the policy in force", func(ctx context.Context) (bool, string) {
		got, err := c.Client.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error()
		}
		return got.Labels["sidecar.istio.io/inject"] == "false", "a dry-run pod is not labelled yet"
	}); err != nil {
		return err
	}
	d := appDeployment(ns, f.name, 1, catLean())
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	pod, err := catPodOf(ctx, c, ns, "app="+f.name)
	if err != nil {
		return err
	}
	f.pod, f.state = pod, "running without a sidecar, labelled sidecar.istio.io/inject=false at admission"
	_, err = catWaitPod(ctx, c, ns, pod, "running and ready", testcluster.Running)
	return err
}

// catUIDAssigned plants KM-CAP-013: a MutatingAdmissionPolicy, bound to ns
// only and reinvoked after the injector, that gives the istio-proxy
// container of app=NAME's pods another uid and gid (as uid and group
// ranges assigned by a platform do), then the Deployment: istio-init still
// exempts uid and gid 1337 (a proxy left in group 1337 is let out by it). The policy
// and its binding are deleted at the end.
func catUIDAssigned(ctx context.Context, t *testing.T, c *testcluster.Cluster, f *catFault, ns string) error {
	name := "cat-uid-" + f.name
	set := `.filter(c, c.name == "istio-proxy").map(c, %s{name: c.name, securityContext: %s.securityContext{runAsUser: 1000680000, runAsGroup: 1000680000}})`
	expr := `Object{spec: Object.spec{initContainers: object.spec.?initContainers.orValue([])` + fmt.Sprintf(set, "Object.spec.initContainers", "Object.spec.initContainers") +
		`, containers: object.spec.containers` + fmt.Sprintf(set, "Object.spec.containers", "Object.spec.containers") + `}}`
	if err := catBindMAP(ctx, t, c, name, ns, f.name, "IfNeeded", expr); err != nil {
		return err
	}
	proxyUID := func(p *corev1.Pod) int64 {
		for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for _, c := range cs {
				if c.Name == "istio-proxy" && c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
					return *c.SecurityContext.RunAsUser
				}
			}
		}
		return 0
	}
	probe := appPod(f.name+"-probe", map[string]string{"app": f.name}, catLean())
	if err := catPoll(ctx, "the policy in force", func(ctx context.Context) (bool, string) {
		got, err := c.Client.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err.Error()
		}
		return proxyUID(got) == 1000680000, "a dry-run pod's istio-proxy keeps its uid yet"
	}); err != nil {
		return err
	}
	d := appDeployment(ns, f.name, 1, catLean())
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	pod, err := catPodOf(ctx, c, ns, "app="+f.name)
	if err != nil {
		return err
	}
	f.pod, f.state = pod, "istio-proxy running as uid and gid 1000680000, istio-init exempting 1337"
	_, err = catWaitPod(ctx, c, ns, pod, "its istio-proxy given uid 1000680000", func(p *corev1.Pod) bool { return proxyUID(p) == 1000680000 })
	return err
}

// catBindMAP creates a MutatingAdmissionPolicy (failurePolicy Fail) on pod
// creation, for the pods labelled app=app only, with one ApplyConfiguration
// mutation, bound to namespace ns; both are deleted at the end.
func catBindMAP(ctx context.Context, t *testing.T, c *testcluster.Cluster, name, ns, app, reinvocation, expression string) error {
	policy, _ := json.Marshal(map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy", "metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"matchConstraints":   map[string]any{"resourceRules": []any{map[string]any{"apiGroups": []string{""}, "apiVersions": []string{"v1"}, "operations": []string{"CREATE"}, "resources": []string{"pods"}}}},
			"matchConditions":    []any{map[string]any{"name": "this-app", "expression": "has(object.metadata.labels) && 'app' in object.metadata.labels && object.metadata.labels['app'] == '" + app + "'"}},
			"reinvocationPolicy": reinvocation, "failurePolicy": "Fail",
			"mutations": []any{map[string]any{"patchType": "ApplyConfiguration", "applyConfiguration": map[string]any{"expression": expression}}},
		}})
	binding, _ := json.Marshal(map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"policyName": name, "matchResources": map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]string{"kubernetes.io/metadata.name": ns}}}}})
	for _, kind := range []string{"mutatingadmissionpolicybinding", "mutatingadmissionpolicy"} {
		t.Cleanup(func() {
			_ = exec.Command(c.KubectlPath, "--kubeconfig", c.Kubeconfig, "delete", kind, name, "--ignore-not-found").Run()
		})
	}
	for _, m := range [][]byte{policy, binding} {
		if err := c.ApplyManifest(ctx, "", m); err != nil {
			return err
		}
	}
	return nil
}
