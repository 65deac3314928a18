package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/upgrade"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// pinnedApp is a Deployment on canary that names the revision in its pod
// selector, and a Service that selects its pods by it too (red team round
// 21's 04 and 05).
const pinnedApp = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web, istio.io/rev: canary}}
  template:
    metadata:
      labels: {app: web, istio.io/rev: canary}
      annotations: {sidecar.istio.io/proxyCPU: "10m"}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: app
        image: kmesh.local/mesh-test:v1
        imagePullPolicy: Never
        command: ["/bin/sh","-c","mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 8080 -h /www"]
        ports: [{containerPort: 8080, name: http-web}]
        resources: {requests: {cpu: 5m, memory: 16Mi}}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web, istio.io/rev: canary}
  ports: [{name: http-web, port: 8080, targetPort: 8080}]
`

// TestUpgradePlanPinnedToTheRevision plans the move of a Deployment whose
// selector, and whose Service's, hold istio.io/rev=canary to the default
// revision, and pastes the plan's steps: they are accepted, the pods come
// up on default, and the Service's selector still selects them.
func TestUpgradePlanPinnedToTheRevision(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	bin := meshBinary(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	checks := 0
	defer func() {
		testreport.Count(t, "upgrade-plan: a Deployment and a Service pinned to istio.io/rev, moved by the plan's steps; %d checks", checks)
	}()
	ns := c.Namespace(t, "upgpin", nil)
	c.Apply(t, ns, []byte(pinnedApp))
	if err := catPoll(ctx, ns+" ready", func(ctx context.Context) (bool, string) {
		_, err := catWaitPodSelector(ctx, c, ns, "app=web", podReadyNow)
		return err == nil, fmt.Sprint(err)
	}); err != nil {
		t.Fatal(err)
	}
	r, err := catRun(bin, "--kubeconfig", c.Kubeconfig, "upgrade-plan", "--to", "default", "-n", ns, "-o", "json")
	var plan upgrade.Plan
	if err == nil {
		err = json.Unmarshal([]byte(r.stdout), &plan)
	}
	checks++
	if err != nil || len(plan.Workloads) != 1 {
		t.Fatalf("upgrade-plan -n %s: exit %d: %v\n%s\n%s", ns, r.code, err, r.stdout, r.stderr)
	}
	steps := strings.Join(plan.Steps, "\n")
	checks++
	if !strings.Contains(steps, "kubectl patch service web -n "+ns) || !strings.Contains(steps, "kubectl replace --force --cascade=orphan") {
		t.Fatalf("the steps do not unpin the Service and remake the Deployment:\n%s", steps)
	}
	t.Logf("steps:\n%s", steps)
	shell := userShell(ctx, t, c, bin, t.TempDir())
	for _, line := range plan.Steps {
		out, err := shell(line)
		checks++
		if err != nil {
			t.Fatalf("pasted: %s: %v\n%s", line, err, out)
		}
	}
	checks++
	p, err := catWaitPodSelector(ctx, c, ns, "app=web", func(p *corev1.Pod) bool {
		return podReadyNow(p) && upgrade.SideOf(p).Revision == "default" && p.DeletionTimestamp == nil
	})
	if err != nil {
		t.Fatalf("after the plan's steps: %v", err)
	}
	checks++
	if err := catPoll(ctx, "Service web selects "+p.Name, func(ctx context.Context) (bool, string) {
		svc, err := c.Client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for k, v := range svc.Spec.Selector {
			if p.Labels[k] != v {
				return false, fmt.Sprintf("its selector %v does not select the pod's labels %v", svc.Spec.Selector, p.Labels)
			}
		}
		return true, ""
	}); err != nil {
		t.Fatal(err)
	}
}
