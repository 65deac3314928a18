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
        readinessProbe: {httpGet: {path: /index.html, port: 8080}, periodSeconds: 2}
`
}

// TestUpgradePlanPredictsTheRestart plans a canary move, then makes it:
// the plan's own steps are pasted (relabel, restart), and every field it
// predicted for each workload is compared with the pod the restart really
// made, and whether it started. The workloads: one on the default revision
// (native sidecar) that moves to canary (classic, hold); one on the cni
// revision (no istio-init) in a namespace whose PodSecurity is baseline,
// which the move breaks (istio-init's NET_ADMIN).
func TestUpgradePlanPredictsTheRestart(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	bin := meshBinary(t, c)
	ctx := context.Background()
	moved := c.Namespace(t, "upg", map[string]string{"istio-injection": "enabled"})
	broken := c.Namespace(t, "upgpsa", map[string]string{"istio.io/rev": "cni", "pod-security.kubernetes.io/enforce": "baseline"})
	c.Apply(t, moved, []byte(upgradeApp("web", `, proxy.istio.io/config: '{"holdApplicationUntilProxyStarts": false}'`)))
	c.Apply(t, broken, []byte(upgradeApp("api", "")))
	for _, ns := range []string{moved, broken} {
		c.RunningPod(t, ns, "app", 3*time.Minute)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for _, ns := range []string{moved, broken} {
		if err := catPoll(wctx, ns+" ready", func(ctx context.Context) (bool, string) { return nsReady(ctx, c, ns) }); err != nil {
			t.Fatal(err)
		}
	}

	var plans []*upgrade.Plan
	for _, ns := range []string{moved, broken} {
		r, err := catRun(bin, "--kubeconfig", c.Kubeconfig, "upgrade-plan", "--to", "canary", "-n", ns, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var plan upgrade.Plan
		if err := json.Unmarshal([]byte(r.stdout), &plan); err != nil {
			t.Fatalf("upgrade-plan -n %s: exit %d: %v\n%s\n%s", ns, r.code, err, r.stdout, r.stderr)
		}
		want := map[string]int{moved: 0, broken: 4}[ns]
		if r.code != want || len(plan.Workloads) != 1 {
			t.Fatalf("upgrade-plan -n %s: exit %d (want %d), %d workloads\n%s", ns, r.code, want, len(plan.Workloads), r.stdout)
		}
		plans = append(plans, &plan)
	}
	web, api := plans[0].Workloads[0], plans[1].Workloads[0]
	if web.Starts != upgrade.StartsYes || web.After == nil || web.After.Revision != "canary" || web.After.Sidecar != "classic" || web.Now.Sidecar != "native" {
		t.Fatalf("web: starts %s, now %+v, after %+v", web.Starts, web.Now, web.After)
	}
	if api.Starts != upgrade.StartsNo || len(api.Findings) == 0 || api.Findings[0].Code != "KM-INJ-012" || !strings.Contains(api.Findings[0].Evidence, "istio-init") {
		t.Fatalf("api: starts %s, findings %+v", api.Starts, api.Findings)
	}

	// Make the move with the plan's own steps, pasted as a user would.
	pathDir := t.TempDir()
	if err := os.Symlink(c.KubectlPath, filepath.Join(pathDir, "kubectl")); err != nil {
		t.Fatal(err)
	}
	for _, plan := range plans {
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
	}
	compared := 0
	defer func() {
		testreport.Count(t, "upgrade-plan: %d predicted fields compared with the pods the real restart made, and 2 of 2 predictions of whether it starts", compared)
	}()
	// web: a new pod from the canary revision, ready; every field as predicted.
	var real *corev1.Pod
	if err := catPoll(wctx, "web's pod from canary", func(ctx context.Context) (bool, string) {
		pods, err := c.Client.CoreV1().Pods(moved).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		if len(pods.Items) != 1 || pods.Items[0].DeletionTimestamp != nil || !podReadyNow(&pods.Items[0]) {
			return false, fmt.Sprintf("%d pods", len(pods.Items))
		}
		real = &pods.Items[0]
		return upgrade.SideOf(real).Revision == "canary", "revision " + upgrade.SideOf(real).Revision
	}); err != nil {
		t.Fatal(err)
	}
	changes, n := upgrade.Compare(web.After, upgrade.SideOf(real))
	compared += n
	if len(changes) > 0 {
		t.Errorf("web: the real pod differs from the prediction: %+v", changes)
	}
	// api: the restart's new pods are refused, as predicted, for istio-init.
	if err := catPoll(wctx, "api's new pods refused", func(ctx context.Context) (bool, string) {
		evs, err := c.Client.CoreV1().Events(broken).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreate"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Message, "violates PodSecurity") && strings.Contains(e.Message, "istio-init") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d FailedCreate events", len(evs.Items))
	}); err != nil {
		t.Fatal(err)
	}
	compared++
}

// nsReady: every pod of the namespace is ready.
func nsReady(ctx context.Context, c *testcluster.Cluster, ns string) (bool, string) {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err.Error()
	}
	for i := range pods.Items {
		if !podReadyNow(&pods.Items[i]) {
			return false, "pod " + pods.Items[i].Name + ": " + catPodState(&pods.Items[i])
		}
	}
	return len(pods.Items) > 0, fmt.Sprintf("%d pods", len(pods.Items))
}
