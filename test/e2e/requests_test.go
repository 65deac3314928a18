package e2e

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// apiRequest is one request a command sent, as client-go logs it at -v=6.
var apiRequest = regexp.MustCompile(`"Response" verb="([A-Z]+)" url="https://[^/"]+([^"?]*)`)

// requestsOf runs the plugin at -v=6 and counts the API requests it sent,
// by "VERB path".
func requestsOf(t *testing.T, c *testcluster.Cluster, args ...string) (map[string]int, int) {
	t.Helper()
	r := mesh(t, c, "", append(args, "-v=6", "-o", "json")...)
	if r.code != 0 && r.code != 3 && r.code != 4 {
		t.Fatalf("%v: exit %d: %s", args, r.code, lastLines(r.stderr, 5))
	}
	counts, total := map[string]int{}, 0
	for _, m := range apiRequest.FindAllStringSubmatch(r.stderr, -1) {
		counts[m[1]+" "+m[2]]++
		total++
	}
	if total == 0 {
		t.Fatalf("%v: no request logged at -v=6: %s", args, lastLines(r.stderr, 5))
	}
	return counts, total
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestRequestsDoNotGrowWithPods: a namespace's sweep (diagnose,
// why-injected, startup) and a named Deployment's diagnosis send the same
// requests for 2 pods as for 8: a few LISTs, never one request per pod;
// the requests they send name no pod.
func TestRequestsDoNotGrowWithPods(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "req", map[string]string{"istio-injection": "enabled"})
	d := appDeployment(ns, "web", 2, catLean())
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := func(n int) []string {
		t.Helper()
		var names []string
		if err := wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return false, nil
			}
			names = names[:0]
			for i := range l.Items {
				if p := &l.Items[i]; p.DeletionTimestamp == nil && testcluster.Running(p) {
					names = append(names, p.Name)
				}
			}
			return len(names) == n && len(l.Items) == n, nil
		}); err != nil {
			t.Fatalf("%d pods of web running and ready: %v", n, err)
		}
		return names
	}
	commands := [][]string{{"diagnose", "-n", ns}, {"why-injected", "-n", ns}, {"startup", "-n", ns}, {"diagnose", "deploy/web", "-n", ns}}
	few := ready(2)
	before := map[string]int{}
	for _, cmd := range commands {
		_, before[strings.Join(cmd, " ")] = requestsOf(t, c, cmd...)
	}
	scale := []byte(`{"spec":{"replicas":8}}`)
	if _, err := c.Client.AppsV1().Deployments(ns).Patch(ctx, "web", "application/merge-patch+json", scale, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	many := ready(8)
	checks := 0
	var report []string
	for _, cmd := range commands {
		name := strings.Join(cmd, " ")
		counts, total := requestsOf(t, c, cmd...)
		checks++
		if total != before[name] {
			t.Errorf("%s: %d requests for 2 pods, %d for 8: it sends requests per pod:\n%s", name, before[name], total, fmtCounts(counts))
		}
		for req := range counts {
			for _, p := range append(append([]string{}, few...), many...) {
				checks++
				if strings.Contains(req, "/pods/"+p) {
					t.Errorf("%s: a request about one of its pods (they are listed): %s", name, req)
				}
			}
		}
		report = append(report, fmt.Sprintf("%s: %d", strings.ReplaceAll(name, ns, "NS"), total))
	}
	testreport.Count(t, "API requests, 2 pods then 8: %s (the same for both); %d checks", strings.Join(report, ", "), checks)
}

func fmtCounts(counts map[string]int) string {
	var lines []string
	for k, n := range counts {
		lines = append(lines, fmt.Sprintf("  %3d %s", n, k))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
