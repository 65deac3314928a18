package e2e

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// Every command that adds an ephemeral container or creates a node pod says
// so on stderr before it does, naming what and where, as kubectl debug
// does; and what it names is what was made (the ephemeral container in the
// pod's spec, the node pod's namespace). Commands that only read say
// nothing of the kind.
func TestAnnouncesWhatItCreates(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "announce", map[string]string{"istio-injection": "enabled"})
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, appPod("web", map[string]string{"app": "web"}, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPod(t, ns, "web", 90*time.Second, "ready", testcluster.Running)
	nodeNS := c.Namespace(t, "announce-nodes", nil)

	ephemeralRE := regexp.MustCompile(`(?m)^adding ephemeral container (mesh-dump-[a-z0-9]+) \(image [^)]+\) to pod ` + ns + `/web: it cannot be removed`)
	nodePodRE := regexp.MustCompile(`(?m)^creating pod ` + nodeNS + `/mesh-dump-[a-z0-9]+ on node \S+ \(privileged, hostPID, hostNetwork, tolerates every taint\): it is deleted when the read ends`)
	sweepRE := regexp.MustCompile(`(?m)^reading 1 pods with 1 node pod \(one per node, in namespace ` + nodeNS + `; privileged`)
	anyRE := regexp.MustCompile(`(?m)^(adding ephemeral container|creating pod|reading \d+ pods with)`)

	checked := 0
	ephemeralNames := func() map[string]bool {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, e := range p.Spec.EphemeralContainers {
			names[e.Name] = true
		}
		return names
	}
	for _, tc := range []struct {
		name string
		args []string
		want *regexp.Regexp // nil: nothing is announced
		// adds: the command adds one ephemeral container, named in the line
		adds bool
	}{
		{"iptables POD", []string{"iptables", "web", "-n", ns}, ephemeralRE, true},
		{"iptables POD --via node", []string{"iptables", "web", "-n", ns, "--via", "node", "--node-namespace", nodeNS}, nodePodRE, false},
		{"iptables fleet audit", []string{"iptables", "audit", "-n", ns, "--node-namespace", nodeNS}, sweepRE, false},
		{"diagnose POD --rules", []string{"diagnose", "web", "-n", ns, "--rules"}, ephemeralRE, true},
		{"diagnose -n NS --rules", []string{"diagnose", "-n", ns, "--rules", "--node-namespace", nodeNS, "-l", "app=web"}, sweepRE, false},
		{"diagnose POD (reads only)", []string{"diagnose", "web", "-n", ns}, nil, false},
		{"why-injected POD (reads only)", []string{"why-injected", "web", "-n", ns}, nil, false},
		{"startup POD (reads only)", []string{"startup", "web", "-n", ns}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ephemeralNames()
			r := mesh(t, c, "", tc.args...)
			if r.code > 1 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			after := ephemeralNames()
			var added []string
			for n := range after {
				if !before[n] {
					added = append(added, n)
				}
			}
			checked++
			if tc.want == nil {
				if m := anyRE.FindString(r.stderr); m != "" || len(added) > 0 {
					t.Errorf("a read-only command announced %q / added %v:\n%s", m, added, r.stderr)
				}
				return
			}
			m := tc.want.FindStringSubmatch(r.stderr)
			if m == nil {
				t.Fatalf("stderr lacks the announcement %s:\n%s", tc.want, r.stderr)
			}
			checked++
			if tc.adds {
				if len(added) != 1 || added[0] != m[1] {
					t.Errorf("announced ephemeral container %s; the pod got %v", m[1], added)
				}
			} else if len(added) > 0 {
				t.Errorf("announced no ephemeral container, and the pod got %v", added)
			}
			// The announcement comes first: before the report is printed.
			if i := strings.Index(r.stderr, m[0]); strings.TrimSpace(r.stderr[:i]) != "" && !strings.Contains(r.stderr[:i], "reading capture rules") {
				t.Errorf("something came before the announcement:\n%s", r.stderr)
			}
		})
	}
	noNodePods(t, c)
	testreport.Count(t, "what a command creates, announced on stderr: %d checks over 8 commands", checked)
}
