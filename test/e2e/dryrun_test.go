package e2e

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

// --dry-run prints exactly what a real run then creates, and creates
// nothing: the ephemeral container (iptables POD), the node pod (--via
// node) and the audit's node pods (iptables audit), each compared with
// what the apiserver saw created by the same command without --dry-run
// (the random name aside). `iptables -n NS` without a POD creates nothing.
func TestDryRunPrintsWhatARealRunCreates(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "dryrun", map[string]string{"istio-injection": "enabled"})
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, appPod("web", map[string]string{"app": "web"}, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPod(t, ns, "web", 90*time.Second, "ready", testcluster.Running)
	nodeNS := c.Namespace(t, "dryrun-nodes", nil)

	// created runs args and returns the pods created in nodeNS meanwhile.
	created := func(args ...string) ([]*corev1.Pod, result) {
		w, err := c.Client.CoreV1().Pods(nodeNS).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		r := mesh(t, c, "", args...)
		var pods []*corev1.Pod
		deadline := time.After(2 * time.Second)
		for {
			select {
			case ev := <-w.ResultChan():
				if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
					pods = append(pods, p)
				}
			case <-deadline:
				return pods, r
			}
		}
	}
	ephemerals := func() []corev1.EphemeralContainer {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Spec.EphemeralContainers
	}
	sameNodePod := func(what string, printed, real *corev1.Pod) {
		t.Helper()
		a, b := printed.Spec, real.Spec
		if a.NodeName != b.NodeName || a.HostPID != b.HostPID || a.HostNetwork != b.HostNetwork || !reflect.DeepEqual(a.Tolerations, b.Tolerations) ||
			!reflect.DeepEqual(printed.Labels, real.Labels) || printed.Namespace != real.Namespace ||
			a.Containers[0].Image != b.Containers[0].Image || !reflect.DeepEqual(a.Containers[0].Command, b.Containers[0].Command) ||
			!reflect.DeepEqual(a.Containers[0].SecurityContext, b.Containers[0].SecurityContext) {
			t.Errorf("%s: the dry run printed\n%+v\nthe real run created\n%+v", what, printed, real)
		}
	}

	// iptables -n NS without a POD: a usage error, nothing created.
	if pods, r := created("iptables", "-n", ns, "--node-namespace", nodeNS); r.code != 2 || len(pods) != 0 || !strings.Contains(r.stderr, "kubectl mesh iptables audit -n "+ns) {
		t.Errorf("iptables -n NS: exit %d, %d node pods created\n%s", r.code, len(pods), r.stderr)
	}

	// The ephemeral container.
	before := len(ephemerals())
	r := mesh(t, c, "", "iptables", "web", "-n", ns, "--dry-run")
	var doc struct {
		Kind     string
		Metadata metav1.ObjectMeta
		Spec     struct {
			EphemeralContainers []corev1.EphemeralContainer `json:"ephemeralContainers"`
		}
	}
	if err := yaml.Unmarshal([]byte(r.stdout), &doc); err != nil || r.code != 0 || doc.Kind != "Pod" || doc.Metadata.Name != "web" || len(doc.Spec.EphemeralContainers) != 1 {
		t.Fatalf("iptables POD --dry-run: exit %d, %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	if n := len(ephemerals()); n != before {
		t.Fatalf("the dry run added %d ephemeral containers", n-before)
	}
	if r := mesh(t, c, "", "iptables", "web", "-n", ns); r.code != 0 {
		t.Fatalf("iptables POD: exit %d: %s", r.code, r.stderr)
	}
	after := ephemerals()
	if len(after) != before+1 {
		t.Fatalf("%d ephemeral containers added, want 1", len(after)-before)
	}
	printed, real := doc.Spec.EphemeralContainers[0], after[len(after)-1]
	if printed.Image != real.Image || !reflect.DeepEqual(printed.Command, real.Command) || !reflect.DeepEqual(printed.SecurityContext, real.SecurityContext) ||
		printed.ImagePullPolicy != real.ImagePullPolicy {
		t.Errorf("ephemeral container: printed\n%+v\ncreated\n%+v", printed, real)
	}

	// --via node and the audit: each node pod as created.
	for _, args := range [][]string{
		{"iptables", "web", "-n", ns, "--via", "node", "--node-namespace", nodeNS},
		{"iptables", "audit", "-n", ns, "--node-namespace", nodeNS},
	} {
		what := strings.Join(args[:2], " ")
		pods, r := created(append(args, "--dry-run")...)
		if r.code != 0 || len(pods) != 0 {
			t.Fatalf("%s --dry-run: exit %d, %d pods created: %s", what, r.code, len(pods), r.stderr)
		}
		var p corev1.Pod
		if err := yaml.Unmarshal([]byte(r.stdout), &p); err != nil || p.Kind != "Pod" || strings.Contains(r.stdout, "\n---\n") {
			t.Fatalf("%s --dry-run: one node pod expected (one node): %v\n%s", what, err, r.stdout)
		}
		pods, r = created(args...)
		if r.code != 0 || len(pods) != 1 {
			t.Fatalf("%s: exit %d, %d node pods created: %s", what, r.code, len(pods), r.stderr)
		}
		sameNodePod(what, &p, pods[0])
	}
}
