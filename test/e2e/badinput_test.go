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
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// Bad input changes nothing: every command's usage errors, given against
// a live injected pod and a workload of two, exit 2 before any request
// that changes the cluster. An ephemeral container can never be removed
// from a pod, so the pod's spec (its ephemeral containers included) must
// be exactly as before, and no pod (a node pod, say) may have been created
// in the namespace meanwhile — watched from before the first command to
// after the last, so a node pod created and deleted again is seen too.
func TestBadInputChangesNothing(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "badinput", map[string]string{"istio-injection": "enabled"})
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, appPod("target", map[string]string{"app": "target"}, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, appDeployment(ns, "pair", 2, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPod(t, ns, "target", 120*time.Second, "running and ready", testcluster.Running)
	for _, p := range waitPods(t, c, ns, "app=pair", 2) {
		c.WaitPod(t, ns, p.Name, 120*time.Second, "running and ready", testcluster.Running)
	}
	manifest := writeManifest(t, func() *corev1.Pod {
		p := appPod("from-file", nil, nil)
		p.APIVersion, p.Kind, p.Namespace = "v1", "Pod", ns
		return p
	}())

	specs := func() map[string]string {
		t.Helper()
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, p := range pods.Items {
			b, _ := json.Marshal(p.Spec)
			out[p.Name+" "+string(p.UID)] = string(b)
		}
		return out
	}
	before := specs()
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	cases := [][]string{
		// iptables: one pod (its live path adds an ephemeral container)...
		{"iptables", "target", "-o", "xml"},
		{"iptables", "target", "--trace", "garbage"},
		{"iptables", "target", "--trace", "out:10.0.0.1:99999"},
		{"iptables", "target", "--trace", "in:8080,uid=0"},
		{"iptables", "target", "--via", "bogus"},
		{"iptables", "target", "--via", "node", "--interval", "-1s"},
		{"iptables", "target", "--timeout", "0s"},
		{"iptables", "target", "--pod-ip", "not-an-ip"},
		{"iptables", "target", "--nameserver", "10.0.0.300"},
		{"iptables", "target", "--expect-args", "-p 15001 'unterminated"},
		{"iptables", "target", "--expect-args", "--no-such-flag"},
		{"iptables", "target", "--from-file", manifest},
		{"iptables", "target", "-l", "app=target"},
		// ...no POD with -n: not a fleet audit, a usage error...
		{"iptables"},
		{"iptables", "--timeout", "30s"},
		// ...and the fleet audit (node pods), its own command.
		{"iptables", "audit", "-o", "xml"},
		{"iptables", "audit", "-o", "raw"},
		{"iptables", "audit", "--trace", "out:10.0.0.1:80"},
		{"iptables", "audit", "--connections"},
		{"iptables", "audit", "--via", "ephemeral"},
		{"iptables", "audit", "-l", "a in (b"},
		{"iptables", "audit", "--dry-run=server"},
		// diagnose: --rules (ephemeral container or node pods), --verify (dry runs).
		{"diagnose", "target", "--rules", "-o", "xml"},
		{"diagnose", "target", "--rules", "--fail-on", "bogus"},
		{"diagnose", "target", "--via", "bogus"},
		{"diagnose", "target", "--rules", "--sort-by", ".name"},
		{"diagnose", "-A", "--rules", "--sort-by", "{.name"},
		{"diagnose", "target", "--rules", "--timeout", "0s"},
		{"diagnose", "target", "--rules", "-A"},
		{"diagnose", "deploy/pair", "--via", "ephemeral", "--verify"},
		{"diagnose", "--rules", "--via", "ephemeral"},
		{"diagnose", "-f", manifest, "--rules"},
		{"diagnose", "-f", manifest, "--verify", "-o", "xml"},
		// why-injected --verify (dry runs) and startup.
		{"why-injected", "target", "--verify", "-o", "xml"},
		{"why-injected", "target", "--verify", "-A"},
		{"why-injected", "-f", manifest, "target", "--verify"},
		{"startup", "target", "-o", "xml"},
		{"startup", "target", "-A"},
	}
	checked := 0
	for _, args := range cases {
		args = append(args, "-n", ns)
		if args[0] == "iptables" || args[0] == "diagnose" {
			args = append(args, "--node-namespace", ns) // a node pod would be created here
		}
		r := mesh(t, c, "", args...)
		checked++
		if r.code != 2 || !strings.Contains(r.stderr, "rror") {
			t.Errorf("kubectl-mesh %s: exit %d, want 2 (usage error) with its message\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}

	// Nothing created, nothing changed: the watch saw no pod added or
	// deleted, and every pod's spec is as it was.
	after := specs()
	checked++
	if fmt.Sprint(before) != fmt.Sprint(after) {
		for k, v := range after {
			if before[k] != v {
				t.Errorf("pod %s changed (or appeared): spec now %s", k, v)
			}
		}
		for k := range before {
			if _, ok := after[k]; !ok {
				t.Errorf("pod %s is gone", k)
			}
		}
	}
	target, err := c.Client.CoreV1().Pods(ns).Get(ctx, "target", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checked++
	if n := len(target.Spec.EphemeralContainers); n != 0 {
		t.Errorf("pod target has %d ephemeral containers after usage errors alone", n)
	}
	seen := map[string]bool{}
	for name := range before {
		seen[strings.Fields(name)[0]] = true
	}
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			checked++
			if (ev.Type == watch.Added && !seen[p.Name]) || ev.Type == watch.Deleted {
				t.Errorf("pod %s %s in %s while only usage errors ran", p.Name, strings.ToLower(string(ev.Type)), ns)
			}
		case <-time.After(2 * time.Second):
			done = true // the watch has delivered what happened (events arrive within milliseconds here)
		}
	}
	testreport.Count(t, "bad input: %d usage errors against a live pod, %d checks that nothing changed", len(cases), checked-len(cases))
}
