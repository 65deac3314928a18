package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// A run-once bare pod (a Helm test hook, red team round 23's 01) in a
// namespace of the classic-sidecar revision, applied, never completes.
// diagnose -f --verify predicts KM-START-007 and says to edit the pod's own
// annotations (not a Job's template); the edit made as it says and the
// rest of the fix pasted as printed (the old pod deleted, the file
// applied), the pod completes. A Deployment manifest with its app on the
// tunnel's port 15008 (round 23's 02) is predicted KM-START-008, with the
// port to move to.
func TestManifestFixRecreatesABarePod(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	if c.KubectlPath == "" {
		t.Fatal("no kubectl: hack/cluster/build-kube.sh builds it")
	}
	ns := c.Namespace(t, "kmfile-barepod", map[string]string{"istio.io/rev": "canary"})
	ctx := context.Background()
	checks := 0
	defer func() { testreport.Count(t, "a bare pod's manifest fix pasted, a port predicted: %d checks", checks) }()
	dir := t.TempDir()
	pod := func(annotations string) string {
		return `apiVersion: v1
kind: Pod
metadata:
  name: smoke-test
  namespace: ` + ns + `
  annotations: {` + annotations + `}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: smoke
    image: ` + testImage + `
    imagePullPolicy: Never
    command: ["sh", "-c", "echo smoke; sleep 2"]
    resources: {requests: {cpu: 5m, memory: 16Mi}}
`
	}
	file := filepath.Join(dir, "smoke.yaml")
	if err := os.WriteFile(file, []byte(pod(`helm.sh/hook: test`)), 0o600); err != nil {
		t.Fatal(err)
	}
	shell := pasteShell(ctx, t, c, dir)
	if out, err := shell("kubectl apply -f smoke.yaml"); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	r := mesh(t, c, "", "diagnose", "-f", file, "--verify", "-o", "json")
	checks++
	if r.code != 4 {
		t.Fatalf("diagnose -f --verify: exit %d, want 4\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	fix := findingFix(t, r, "KM-START-007")
	edit := "# edit " + file + " first: sidecar.istio.io/nativeSidecar: \"true\" in the pod's metadata.annotations"
	checks += 2
	if !strings.HasPrefix(fix, edit) || strings.Contains(fix, "Job") {
		t.Fatalf("KM-START-007's fix does not edit the pod's annotations: %q\n%s", fix, r.stdout)
	}
	if !strings.Contains(fix, "\nkubectl delete pod smoke-test -n "+ns+" --ignore-not-found") {
		t.Fatalf("KM-START-007's fix does not delete the pod first: %q", fix)
	}
	// The edit, as the fix says; then the rest, pasted as printed.
	if err := os.WriteFile(file, []byte(pod(`helm.sh/hook: test, sidecar.istio.io/nativeSidecar: "true"`)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := shell(fix); err != nil {
		t.Fatalf("the pasted fix: %v\n%s", err, out)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	checks++
	if err := catPoll(waitCtx, "pod smoke-test completed", func(ctx context.Context) (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "smoke-test", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodSucceeded, catPodState(p)
	}); err != nil {
		t.Fatal(err)
	}

	deploy := filepath.Join(dir, "tunnel.yaml")
	if err := os.WriteFile(deploy, []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: tunnel-api, namespace: `+ns+`}
spec:
  selector: {matchLabels: {app: tunnel-api}}
  template:
    metadata: {labels: {app: tunnel-api}}
    spec:
      containers:
      - name: app
        image: `+testImage+`
        imagePullPolicy: Never
        command: ["httpd", "-f", "-p", "15008"]
        ports: [{containerPort: 15008, name: http-api}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	r = mesh(t, c, "", "diagnose", "-f", deploy, "--verify", "-o", "json")
	checks += 2
	if r.code != 4 {
		t.Fatalf("diagnose -f tunnel.yaml --verify: exit %d, want 4\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if fix := findingFix(t, r, "KM-START-008"); !strings.HasPrefix(fix, "# edit "+deploy+" first: move container app's port 15008 → 9008") {
		t.Errorf("KM-START-008's fix on the manifest: %q\n%s", fix, r.stdout)
	}
}
