package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// A manifest that declares its namespace with PodSecurity restricted and a
// pod the injector gives istio-init (red team round 12's 05): applied, the
// pod is refused. diagnose -f --verify names PodSecurity, and its fix,
// pasted in the file's directory as printed, relabels the namespace from
// the file and applies the rest without re-applying the old label: the pod
// then runs with its sidecar.
func TestManifestFixKeepsItsNamespaceLabel(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	if c.KubectlPath == "" {
		t.Fatal("no kubectl: hack/cluster/build-kube.sh builds it")
	}
	const ns = "kmfile-psa"
	ctx := context.Background()
	checks := 0
	defer func() { testreport.Count(t, "a manifest's PodSecurity fix pasted as printed: %d checks", checks) }()
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	dir := t.TempDir()
	manifest := `apiVersion: v1
kind: Namespace
metadata:
  name: ` + ns + `
  labels: {istio-injection: enabled, pod-security.kubernetes.io/enforce: restricted}
---
apiVersion: v1
kind: Pod
metadata:
  name: api
  namespace: ` + ns + `
  annotations: {sidecar.istio.io/proxyCPU: "10m"}
spec:
  terminationGracePeriodSeconds: 1
  securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: app
    image: ` + testImage + `
    imagePullPolicy: Never
    command: ["/bin/sh","-c","mkdir -p /tmp/www && echo ok > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"]
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`
	if err := os.WriteFile(filepath.Join(dir, "api.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	shell := pasteShell(ctx, t, c, dir)
	// Applied as the user did: the namespace is made, the pod refused.
	out, err := shell("kubectl apply -f api.yaml")
	checks++
	if err == nil || !strings.Contains(string(out), "PodSecurity") {
		t.Fatalf("kubectl apply: want the pod refused by PodSecurity, got %v\n%s", err, out)
	}
	r := mesh(t, c, "", "diagnose", "-f", filepath.Join(dir, "api.yaml"), "--verify", "-o", "json")
	checks++
	if r.code != 4 {
		t.Fatalf("diagnose -f --verify: exit %d, want 4\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	fix := findingFix(t, r, "KM-INJ-012")
	checks++
	if !strings.Contains(fix, "-l 'pod-security.kubernetes.io/enforce=restricted'") || !strings.Contains(fix, "-l 'pod-security.kubernetes.io/enforce!=restricted'") {
		t.Fatalf("no KM-INJ-012 whose fix keeps the file's namespace label out; fix %q\n%s", fix, r.stdout)
	}
	// Pasted as printed, from the file's directory (the fix names it as
	// it was given, an absolute path here).
	if out, err := shell(fix); err != nil {
		t.Fatalf("the pasted fix: %v\n%s", err, out)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	checks++
	if err := catPoll(waitCtx, "pod api running with istio-proxy", func(ctx context.Context) (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "api", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning && catStatus(p, "istio-proxy") != nil, catPodState(p)
	}); err != nil {
		t.Fatal(err)
	}
	n, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	checks++
	if err != nil || n.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		t.Errorf("namespace %s after the fix: %v %v", ns, n.Labels, err)
	}
}

// pasteShell runs a line through a shell in dir, with kubectl and this
// build as kubectl-mesh on PATH, as a user pastes a fix.
func pasteShell(ctx context.Context, t *testing.T, c *testcluster.Cluster, dir string) func(string) ([]byte, error) {
	t.Helper()
	bin := meshBinary(t, c)
	pathDir := t.TempDir()
	for name, target := range map[string]string{"kubectl": c.KubectlPath, "kubectl-mesh": bin} {
		if err := os.Symlink(target, filepath.Join(pathDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return func(line string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PATH="+pathDir+":"+os.Getenv("PATH"), "KUBECONFIG="+c.Kubeconfig)
		return cmd.CombinedOutput()
	}
}

// findingFix is the fix of the first finding with code in a diagnose -o
// json answer ("" when there is none).
func findingFix(t *testing.T, r result, code string) string {
	t.Helper()
	var d catDoc
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatal(err)
	}
	for _, it := range d.all() {
		for _, f := range it.Findings {
			if f.Code == code {
				return f.Fix
			}
		}
	}
	return ""
}

// A manifest whose Deployment carries sidecar.istio.io/inject=true on its
// own metadata, not its template's (red team round 12's 10): diagnose -f
// fails it before it is applied, and its fix, pasted as printed, creates it
// with the label where the webhooks read it: its pod runs with a sidecar.
func TestManifestFixMovesTheInjectLabel(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	if c.KubectlPath == "" {
		t.Fatal("no kubectl: hack/cluster/build-kube.sh builds it")
	}
	const ns = "kmfile-label"
	ctx := context.Background()
	checks := 0
	defer func() { testreport.Count(t, "a manifest's workload-label fix pasted as printed: %d checks", checks) }()
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	dir := t.TempDir()
	d := appDeployment(ns, "api", 1, catLean())
	d.Labels = map[string]string{"sidecar.istio.io/inject": "true"}
	file := writeManifest(t, &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}}, d)
	r := mesh(t, c, "", "diagnose", "-f", file, "-o", "json")
	checks++
	if r.code != 4 {
		t.Fatalf("diagnose -f: exit %d, want 4\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	fix := findingFix(t, r, "KM-INJ-015")
	checks++
	if !strings.HasPrefix(fix, "kubectl apply -f "+file+" -n "+ns+" && kubectl patch deployment api") {
		t.Fatalf("no KM-INJ-015 with the apply-then-patch fix: %q\n%s", fix, r.stdout)
	}
	if out, err := pasteShell(ctx, t, c, dir)(fix); err != nil {
		t.Fatalf("the pasted fix: %v\n%s", err, out)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	checks++
	if _, err := catWaitPodSelector(waitCtx, c, ns, "app=api", func(p *corev1.Pod) bool {
		return p.DeletionTimestamp == nil && podReadyNow(p) && catStatus(p, "istio-proxy") != nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A bare pod's manifest refused by a policy that admits it with a native
// sidecar (the policy reads only spec.containers): diagnose -f --verify
// proves the change with dry runs, and its fix, pasted as printed, applies
// the file so changed: the pod runs with its sidecar, the policy kept.
func TestManifestFixAppliesTheProvedChange(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	if c.KubectlPath == "" {
		t.Fatal("no kubectl: hack/cluster/build-kube.sh builds it")
	}
	const ns = "kmfile-names"
	ctx := context.Background()
	checks := 0
	defer func() {
		testreport.Count(t, "a manifest pod's proved mesh-side fix pasted as printed: %d checks", checks)
	}()
	dir := t.TempDir()
	shell := pasteShell(ctx, t, c, dir)
	policy := `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: kmfile-names}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  validations:
  - expression: "object.spec.containers.all(c, c.name.startsWith('app'))"
    message: "container names must start with app"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: kmfile-names}
spec:
  policyName: kmfile-names
  validationActions: [Deny]
  matchResources: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ` + ns + `}}}
---
apiVersion: v1
kind: Namespace
metadata: {name: ` + ns + `, labels: {istio.io/rev: canary}}
`
	t.Cleanup(func() {
		_, _ = shell("kubectl delete validatingadmissionpolicybinding kmfile-names --ignore-not-found; kubectl delete validatingadmissionpolicy kmfile-names --ignore-not-found")
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := shell("kubectl apply -f policy.yaml && sleep 3"); err != nil {
		t.Fatalf("the policy: %v\n%s", err, out)
	}
	p := appPod("api", map[string]string{"app": "api"}, catLean())
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	p.Namespace = ns
	p.Spec.Containers[0].Name = "app"
	file := writeManifest(t, p)
	r := mesh(t, c, "", "diagnose", "-f", file, "--verify", "-o", "json")
	checks++
	if r.code != 4 {
		t.Fatalf("diagnose -f --verify: exit %d, want 4\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	fix := findingFix(t, r, "KM-INJ-014")
	checks++
	if !strings.HasPrefix(fix, "kubectl annotate --local -f "+file+" 'sidecar.istio.io/nativeSidecar=true' --overwrite -o json | kubectl apply -n "+ns+" -f -") {
		t.Fatalf("no KM-INJ-014 applying the file with a native sidecar: %q\n%s", fix, r.stdout)
	}
	if out, err := shell(fix); err != nil {
		t.Fatalf("the pasted fix: %v\n%s", err, out)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	checks++
	if _, err := catWaitPodSelector(waitCtx, c, ns, "app=api", func(p *corev1.Pod) bool {
		return podReadyNow(p) && catStatus(p, "istio-proxy") != nil
	}); err != nil {
		t.Fatal(err)
	}
}
