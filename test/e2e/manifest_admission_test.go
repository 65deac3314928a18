package e2e

import (
	"context"
	"encoding/json"
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

// termPolicy binds a ValidatingAdmissionPolicy requiring every container,
// init containers too, to set terminationMessagePolicy
// FallbackToLogsOnError (a platform rule of the field) to namespace ns,
// and waits until a dry run meets it. Istio's injected containers do not
// set it.
func termPolicy(ctx context.Context, t *testing.T, c *testcluster.Cluster, name, ns string) error {
	t.Helper()
	return bindPodPolicy(ctx, t, c, name, ns,
		`object.spec.containers.all(c, has(c.terminationMessagePolicy) && c.terminationMessagePolicy == "FallbackToLogsOnError") && (!has(object.spec.initContainers) || object.spec.initContainers.all(c, has(c.terminationMessagePolicy) && c.terminationMessagePolicy == "FallbackToLogsOnError"))`,
		"every container must set terminationMessagePolicy: FallbackToLogsOnError",
		appPod("vap-probe", map[string]string{"sidecar.istio.io/inject": "false"}, nil))
}

// manifestWorker is a Deployment manifest whose own container complies
// with termPolicy: only what the injector adds does not.
const manifestWorker = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: worker
spec:
  replicas: 1
  selector: {matchLabels: {app: worker}}
  template:
    metadata:
      labels: {app: worker}
      annotations: {sidecar.istio.io/proxyCPU: "10m"}
    spec:
      containers:
      - name: app
        image: ` + testImage + `
        imagePullPolicy: Never
        terminationMessagePolicy: FallbackToLogsOnError
        command: ["/bin/sh", "-c", "mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 8080 -h /www"]
        ports: [{containerPort: 8080, name: http}]
        resources: {requests: {cpu: 5m, memory: 16Mi}}
`

// A manifest diagnosed before it is applied, in a namespace whose pods a
// ValidatingAdmissionPolicy refuses for what the injector adds: without
// --verify the injection check is unknown (KM-INJ-018, exit 3), never pass,
// and its fix is the command that settles it; that command (--verify)
// proves the refusal and puts it down to the mesh (KM-INJ-014); its fix,
// pasted as printed, lets the workload be created and become ready with
// its sidecar. The same manifest in a namespace no validating admission
// takes in passes (exit 0).
func TestManifestAdmissionUnverified(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	bin := meshBinary(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	checks := 0
	defer func() {
		testreport.Count(t, "a manifest meeting an unevaluated admission policy: unknown without --verify, refused with it, recovered by the pasted fix; %d checks", checks)
	}()
	ns := c.Namespace(t, "kmman", map[string]string{"istio-injection": "enabled"})
	control := c.Namespace(t, "kmman-ok", map[string]string{"istio-injection": "enabled"})
	if err := termPolicy(ctx, t, c, ns+"-term", ns); err != nil {
		t.Fatalf("the policy: %v", err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "worker.yaml")
	if err := os.WriteFile(file, []byte(manifestWorker), 0o644); err != nil {
		t.Fatal(err)
	}
	shell := userShell(ctx, t, c, bin, dir)
	diagnoseFile := func(namespace string, more ...string) (catItem, result) {
		t.Helper()
		r, err := catRun(bin, append([]string{"--kubeconfig", c.Kubeconfig, "diagnose", "-f", file, "-n", namespace, "-o", "json"}, more...)...)
		var d catDoc
		if err == nil {
			err = json.Unmarshal([]byte(r.stdout), &d)
		}
		if err != nil || len(d.all()) != 1 {
			t.Fatalf("diagnose -f -n %s %v: %v (exit %d)\n%s\n%s", namespace, more, err, r.code, r.stdout, r.stderr)
		}
		return d.all()[0], r
	}
	find := func(it catItem, code string) *catFinding {
		for i := range it.Findings {
			if it.Findings[i].Code == code {
				return &it.Findings[i]
			}
		}
		return nil
	}

	// The control: nothing validates its pods; the model's answer stands.
	it, r := diagnoseFile(control)
	checks++
	if it.Status != "pass" || r.code != 0 {
		t.Errorf("the control namespace: %s, exit %d: %s", it.Status, r.code, it.says())
	}

	it, r = diagnoseFile(ns)
	f := find(it, "KM-INJ-018")
	checks++
	if f == nil || f.Status != "unknown" || it.Status != "unknown" || r.code != 3 {
		t.Fatalf("without --verify: want KM-INJ-018 unknown, exit 3; got %s exit %d: %s", it.Status, r.code, it.says())
	}
	checks++
	if !strings.Contains(f.Evidence, "ValidatingAdmissionPolicyBinding "+ns+"-term") {
		t.Errorf("KM-INJ-018 does not name the binding that takes the pod in: %s", f.Evidence)
	}
	settle, _, _ := strings.Cut(f.Fix, "   #")
	checks++
	if !strings.HasPrefix(settle, "kubectl mesh diagnose -f "+file+" -n "+ns+" --verify") {
		t.Fatalf("KM-INJ-018's fix is not the command that settles it: %q", f.Fix)
	}

	// The printed command, as printed (as JSON, to read its answer).
	out, err := shell(settle + " -o json 2>/dev/null")
	var d catDoc
	checks++
	if jerr := json.Unmarshal(out, &d); jerr != nil || len(d.all()) != 1 {
		t.Fatalf("%s -o json: %v %v\n%s", settle, err, jerr, out)
	}
	it = d.all()[0]
	f = find(it, "KM-INJ-014")
	checks++
	if f == nil || f.Status != "fail" {
		t.Fatalf("--verify: want KM-INJ-014 fail (the policy refuses what the injector adds): %s", it.says())
	}
	checks++
	if !strings.Contains(f.Evidence, "without the sidecar is admitted") {
		t.Errorf("KM-INJ-014 does not prove it is the injector's part that is refused: %s", f.Evidence)
	}
	t.Logf("--verify: %s\nfix:\n%s", catShort(f.Evidence), f.Fix)
	for _, line := range strings.Split(f.Fix, "\n") {
		out, err := shell(line)
		checks++
		if err != nil {
			t.Fatalf("the pasted fix failed: %s: %v\n%s", line, err, out)
		}
	}
	checks++
	if _, err := catWaitPodSelector(ctx, c, ns, "app=worker", func(p *corev1.Pod) bool {
		return podReadyNow(p) && catStatus(p, "istio-proxy") != nil
	}); err != nil {
		t.Fatalf("after the pasted fix: %v", err)
	}
}

// catWaitPodSelector waits for a pod of the selector in the state cond says.
func catWaitPodSelector(ctx context.Context, c *testcluster.Cluster, ns, selector string, cond func(p *corev1.Pod) bool) (*corev1.Pod, error) {
	var found *corev1.Pod
	err := catPoll(ctx, "a pod "+selector, func(ctx context.Context) (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		state := "no pods"
		for i := range pods.Items {
			if cond(&pods.Items[i]) {
				found = &pods.Items[i]
				return true, ""
			}
			state = catPodState(&pods.Items[i])
		}
		return false, state
	})
	return found, err
}
