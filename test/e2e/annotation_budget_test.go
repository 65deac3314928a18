package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// A Deployment whose template's own annotations are just under the
// apiserver's 256 KiB limit on a pod's annotations (red team round 21's
// 02): the injector's annotations take every pod over it, and none is
// created. diagnose puts the refusal down to what the injector adds and
// names the template's largest annotation; its fix, pasted as printed,
// takes that one out, and the pods are created with their sidecar.
func TestAnnotationBudgetFix(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	if c.KubectlPath == "" {
		t.Fatal("no kubectl: hack/cluster/build-kube.sh builds it")
	}
	ctx := context.Background()
	ns := c.Namespace(t, "kmbudget", map[string]string{"istio-injection": "enabled"})
	checks := 0
	defer func() {
		testreport.Count(t, "a template near the annotations' limit, its fix pasted: %d checks", checks)
	}()
	const big = "render.example.com/template"
	d := appDeployment(ns, "renderer", 1, catLean(big, strings.Repeat("x", 261900)))
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var fix string
	waitCtx, stop := context.WithTimeout(ctx, 2*time.Minute)
	defer stop()
	err := catPoll(waitCtx, "diagnose puts the refusal down to the injector's annotations", func(ctx context.Context) (bool, string) {
		r := mesh(t, c, "", "diagnose", "deployment/renderer", "-n", ns, "-o", "json")
		if r.code != 4 || !strings.Contains(r.stdout, "KM-INJ-013") {
			return false, r.stdout
		}
		fix = findingFix(t, r, "KM-INJ-013")
		return strings.Contains(r.stdout, "limit on a pod's annotations"), r.stdout
	})
	checks++
	if err != nil {
		t.Fatal(err)
	}
	checks++
	if want := "kubectl patch deployment/renderer -n " + ns + ` --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"` + big + `":null}}}}}'`; !strings.HasPrefix(fix, want) {
		t.Fatalf("fix %q, want it to start with %q", fix, want)
	}
	shell := pasteShell(ctx, t, c, "")
	for _, line := range strings.Split(fix, "\n") {
		checks++
		if out, err := shell(line); err != nil {
			t.Fatalf("the pasted fix failed: %s: %v\n%s", line, err, out)
		}
	}
	recCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	checks++
	if err := catPoll(recCtx, "deployment/renderer ready with its sidecar", func(ctx context.Context) (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=renderer"})
		if err != nil || len(pods.Items) == 0 {
			return false, "no pods"
		}
		for _, p := range pods.Items {
			if !podReadyNow(&p) || catStatus(&p, "istio-proxy") == nil {
				return false, catPodState(&p)
			}
		}
		return true, ""
	}); err != nil {
		t.Fatal(err)
	}
}
