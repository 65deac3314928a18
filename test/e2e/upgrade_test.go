package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/upgrade"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// upgradeApp is a Deployment of the test app; a template annotation or
// two when given.
func upgradeApp(name string, annotations string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `}
spec:
  replicas: 1
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata:
      labels: {app: ` + name + `}
      annotations: {sidecar.istio.io/proxyCPU: "10m"` + annotations + `}
    spec:
      containers:
      - name: app
        image: kmesh.local/mesh-test:v1
        imagePullPolicy: Never
        command: ["/bin/sh","-c","mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 8080 -h /www"]
        ports: [{containerPort: 8080, name: http-web}]
        resources: {requests: {cpu: 5m, memory: 16Mi}}
`
}

// upgradeJob is a Job whose app ends at once.
const upgradeJob = `apiVersion: batch/v1
kind: Job
metadata: {name: export}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations: {sidecar.istio.io/proxyCPU: "10m"}
    spec:
      restartPolicy: Never
      containers:
      - name: app
        image: kmesh.local/mesh-test:v1
        imagePullPolicy: Never
        command: ["/bin/sh","-c","echo exported"]
        resources: {requests: {cpu: 5m, memory: 16Mi}}
`

// TestUpgradePlanPredictsTheRestart plans a canary move, then makes it:
// the plan's own steps are pasted (relabel, restart), and every field it
// predicted is compared with the pod the restart really made, and whether
// it started. In a namespace on the default revision (native sidecars): a
// Deployment that moves to canary (classic sidecars, hold), and a Job the
// move breaks (a classic istio-proxy keeps its pod from completing).
func TestUpgradePlanPredictsTheRestart(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	bin := meshBinary(t, c)
	ctx := context.Background()
	ns := c.Namespace(t, "upg", map[string]string{"istio-injection": "enabled"})
	c.Apply(t, ns, []byte(upgradeApp("web", `, proxy.istio.io/config: '{"holdApplicationUntilProxyStarts": false}'`)))
	c.Apply(t, ns, []byte(upgradeJob))
	wctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	if err := catPoll(wctx, ns+" ready, its Job complete", func(ctx context.Context) (bool, string) { return nsSettled(ctx, c, ns) }); err != nil {
		t.Fatal(err)
	}

	r, err := catRun(bin, "--kubeconfig", c.Kubeconfig, "upgrade-plan", "--to", "canary", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var plan upgrade.Plan
	if err := json.Unmarshal([]byte(r.stdout), &plan); err != nil {
		t.Fatalf("upgrade-plan -n %s: exit %d: %v\n%s\n%s", ns, r.code, err, r.stdout, r.stderr)
	}
	if r.code != 4 || len(plan.Workloads) != 2 {
		t.Fatalf("upgrade-plan -n %s: exit %d (want 4: the Job will not complete), %d workloads\n%s", ns, r.code, len(plan.Workloads), r.stdout)
	}
	job, web := plan.Workloads[0], plan.Workloads[1]
	if job.Name != "export" || job.Starts != upgrade.StartsNo || !hasCode(job.Findings, "KM-START-007") || job.After == nil || job.After.Sidecar != "classic" {
		t.Fatalf("job: starts %s, after %+v, findings %+v", job.Starts, job.After, job.Findings)
	}
	if web.Starts != upgrade.StartsYes || web.After == nil || web.After.Revision != "canary" || web.After.Sidecar != "classic" || web.Now.Sidecar != "native" {
		t.Fatalf("web: starts %s, now %+v, after %+v", web.Starts, web.Now, web.After)
	}

	// Make the move with the plan's own steps, pasted as a user would; the
	// Job, which the plan says to re-create through what created it, is
	// created again from its manifest.
	pathDir := t.TempDir()
	if err := os.Symlink(c.KubectlPath, filepath.Join(pathDir, "kubectl")); err != nil {
		t.Fatal(err)
	}
	for _, step := range plan.Steps {
		if strings.HasPrefix(step, "#") {
			continue
		}
		cmd := exec.CommandContext(ctx, "sh", "-c", step)
		cmd.Env = append(os.Environ(), "PATH="+pathDir+":"+os.Getenv("PATH"), "KUBECONFIG="+c.Kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("the plan's step failed: %s: %v\n%s", step, err, out)
		}
	}
	prop := metav1.DeletePropagationForeground
	if err := c.Client.BatchV1().Jobs(ns).Delete(ctx, "export", metav1.DeleteOptions{PropagationPolicy: &prop}); err != nil {
		t.Fatal(err)
	}
	if err := catPoll(wctx, "job export gone", func(ctx context.Context) (bool, string) {
		_, err := c.Client.BatchV1().Jobs(ns).Get(ctx, "export", metav1.GetOptions{})
		return err != nil, "still there"
	}); err != nil {
		t.Fatal(err)
	}
	c.Apply(t, ns, []byte(upgradeJob))

	compared := 0
	defer func() {
		testreport.Count(t, "upgrade-plan: %d predicted fields compared with the pods the real restart made, and 2 of 2 predictions of whether it starts held", compared)
	}()
	for _, w := range []struct {
		selector string
		want     *upgrade.Side
		// settled: the pod is as it will stay (web ready; the Job's app
		// ended while istio-proxy runs on: it never completes).
		settled func(p *corev1.Pod) bool
	}{
		{"app=web", web.After, podReadyNow},
		{"job-name=export", job.After, func(p *corev1.Pod) bool {
			app, proxy := catStatus(p, "app"), catStatus(p, "istio-proxy")
			return app != nil && app.State.Terminated != nil && proxy != nil && catRunningFor(proxy, 10*time.Second) && p.Status.Phase == corev1.PodRunning
		}},
	} {
		var real *corev1.Pod
		if err := catPoll(wctx, w.selector+"'s pod from canary, settled", func(ctx context.Context) (bool, string) {
			pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: w.selector})
			if err != nil {
				return false, err.Error()
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if p.DeletionTimestamp == nil && upgrade.SideOf(p).Revision == "canary" && w.settled(p) {
					real = p
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d pods", len(pods.Items))
		}); err != nil {
			t.Fatal(err)
		}
		changes, n := upgrade.Compare(w.want, upgrade.SideOf(real))
		compared += n + 1 // and whether it starts (completes)
		if len(changes) > 0 {
			t.Errorf("%s: the real pod differs from the prediction: %+v", w.selector, changes)
		}
	}
}

func hasCode(fs []diagnose.Finding, code string) bool {
	for _, f := range fs {
		if f.Code == code {
			return true
		}
	}
	return false
}

// nsSettled: every pod of the namespace is ready, or has completed.
func nsSettled(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string) {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	for i := range pods.Items {
		if p := &pods.Items[i]; !podReadyNow(p) && p.Status.Phase != corev1.PodSucceeded {
			return false, "pod " + p.Name + ": " + catPodState(p)
		}
	}
	return len(pods.Items) > 1, fmt.Sprintf("%d pods", len(pods.Items))
}

// A platform policy the target revision's injection breaks (one container
// per pod; the canary revision's classic sidecar is a second one):
// upgrade-plan says the workload will not start and its fix is the knob
// the target's injector and admission proved (a native sidecar), the
// policy kept. Pasted with the plan's steps, the workload runs under the
// target.
func TestUpgradePlanMeshSideFix(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	bin := meshBinary(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	checks := 0
	defer func() {
		testreport.Count(t, "upgrade-plan: a policy refusal under the target fixed by the knob its injector and admission proved, pasted with the plan's steps; %d checks", checks)
	}()
	ns := c.Namespace(t, "upgpol", map[string]string{"istio-injection": "enabled"})
	c.Apply(t, ns, []byte(upgradeApp("web", "")))
	if err := catPoll(ctx, ns+" ready", func(ctx context.Context) (bool, string) {
		_, err := catWaitPodSelector(ctx, c, ns, "app=web", podReadyNow)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		t.Fatal(err)
	}
	probe := appPod("vap-probe", map[string]string{"sidecar.istio.io/inject": "false"}, nil)
	probe.Spec.Containers = append(probe.Spec.Containers, corev1.Container{Name: "second", Image: testImage})
	if err := bindPodPolicy(ctx, t, c, ns+"-one", ns, `object.spec.containers.size() <= 1`, "a pod may run one container (sidecars as init containers)", probe); err != nil {
		t.Fatal(err)
	}
	r, err := catRun(bin, "--kubeconfig", c.Kubeconfig, "upgrade-plan", "--to", "canary", "-n", ns, "-o", "json")
	var plan upgrade.Plan
	if err == nil {
		err = json.Unmarshal([]byte(r.stdout), &plan)
	}
	checks++
	if err != nil || len(plan.Workloads) != 1 {
		t.Fatalf("upgrade-plan -n %s: exit %d: %v\n%s\n%s", ns, r.code, err, r.stdout, r.stderr)
	}
	web := plan.Workloads[0]
	var f *diagnose.Finding
	for i := range web.Findings {
		if web.Findings[i].Status == diagnose.Fail {
			f = &web.Findings[i]
			break
		}
	}
	checks++
	if web.Starts != upgrade.StartsNo || f == nil || r.code != 4 {
		t.Fatalf("web: starts %s, exit %d, findings %+v", web.Starts, r.code, web.Findings)
	}
	first, _, _ := strings.Cut(f.Fix, "\n")
	checks++
	if !strings.Contains(first, `"sidecar.istio.io/nativeSidecar":"true"`) || !strings.Contains(f.Evidence, "is admitted with its sidecar") {
		t.Fatalf("the fix is not the proved knob: %s\nfix: %s", f.Evidence, f.Fix)
	}
	t.Logf("%s\nfix: %s\nsteps: %s", f.Evidence, f.Fix, strings.Join(plan.Steps, "\n"))
	shell := userShell(ctx, t, c, bin, t.TempDir())
	for _, line := range append([]string{f.Fix}, plan.Steps...) {
		out, err := shell(line)
		checks++
		if err != nil {
			t.Fatalf("pasted: %s: %v\n%s", line, err, out)
		}
	}
	checks++
	if _, err := catWaitPodSelector(ctx, c, ns, "app=web", func(p *corev1.Pod) bool {
		return podReadyNow(p) && upgrade.SideOf(p).Revision == "canary" && p.DeletionTimestamp == nil
	}); err != nil {
		t.Fatalf("after the fix and the plan's steps: %v", err)
	}
}
