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
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

type auditDoc struct {
	Kind  string `json:"kind"`
	Items []struct {
		Namespace, Pod, Node, Mesh, Backend, Inbound, Outbound, DNS, Error string
		Rules, Missing, Extra                                              int
		Drift                                                              *bool
		Hazards                                                            []string
	} `json:"items"`
}

// The fleet audit over 20 injected pods on the node, 2 of them with a rule
// planted after istio-init: exactly those 2 are reported with drift, every
// pod is read (one node pod for the node, no ephemeral container), inbound
// and outbound are captured and DNS is not (the mesh's defaults), nothing is
// left behind; and Ctrl-C in the middle leaves nothing either.
func TestIptablesFleetAudit(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "fleet", map[string]string{"istio-injection": "enabled"})
	// Small proxy requests (Istio's own annotations): 20 pods fit the 2-core node.
	small := map[string]string{"sidecar.istio.io/proxyCPU": "10m", "sidecar.istio.io/proxyMemory": "32Mi"}
	dep := appDeployment(ns, "fleet", 18, small)
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Two pods whose own init container adds a rule istio-init did not write.
	root := int64(0)
	planted := map[string]bool{}
	for i := 0; i < 2; i++ {
		p := appPod(fmt.Sprintf("planted-%d", i), map[string]string{"app": "planted"}, small)
		p.Spec.InitContainers = []corev1.Container{{Name: "planter", Image: testImage, ImagePullPolicy: corev1.PullNever,
			SecurityContext: &corev1.SecurityContext{RunAsUser: &root, Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}},
			Command:         []string{"iptables", "-t", "mangle", "-A", "OUTPUT", "-d", "10.99.0.0/16", "-j", "RETURN"}}}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		planted[p.Name] = true
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 240*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		running := 0
		for i := range l.Items {
			if testcluster.Running(&l.Items[i]) {
				running++
			}
		}
		return running == 20, nil
	}); err != nil {
		t.Fatalf("20 pods did not all run: %v", err)
	}

	start := time.Now()
	r := mesh(t, c, "", "iptables", "audit", "-n", ns, "-o", "json")
	took := time.Since(start)
	d := decode[auditDoc](t, r)
	if r.code != 0 || d.Kind != "CaptureAuditList" || len(d.Items) != 20 {
		t.Fatalf("exit %d, kind %q, %d lines: %s", r.code, d.Kind, len(d.Items), r.stderr)
	}
	found := 0
	for i, it := range d.Items {
		drift := it.Drift != nil && *it.Drift
		switch {
		case it.Error != "":
			t.Errorf("%s: not read: %s", it.Pod, it.Error)
		case drift != planted[it.Pod]:
			t.Errorf("%s: drift %v (missing %d, extra %d), planted %v", it.Pod, drift, it.Missing, it.Extra, planted[it.Pod])
		case drift && (i > 1 || it.Extra != 1):
			t.Errorf("%s: a planted pod at position %d with %d extra rules", it.Pod, i, it.Extra)
		case it.Mesh != "istio sidecar" || it.Rules == 0 || !strings.HasPrefix(it.Inbound, "captured") || !strings.HasPrefix(it.Outbound, "captured") || it.DNS != "not captured":
			t.Errorf("%s: mesh %q, %d rules, inbound %q, outbound %q, DNS %q", it.Pod, it.Mesh, it.Rules, it.Inbound, it.Outbound, it.DNS)
		}
		if drift {
			found++
		}
	}
	if found != 2 {
		t.Errorf("%d pods with drift, want exactly the 2 planted", found)
	}
	l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Items {
		if len(p.Spec.EphemeralContainers) > 0 {
			t.Errorf("%s: the audit added an ephemeral container", p.Name)
		}
	}
	noNodePods(t, c)
	human := mesh(t, c, "", "iptables", "audit", "-n", ns)
	if !strings.HasPrefix(human.stdout, "20 pods on 1 nodes read with 1 node pods (no ephemeral container): 2 with drift, 0 unreadable") {
		t.Errorf("human output does not open with the count:\n%s", human.stdout)
	}

	// Ctrl-C while the node pod works: exit 130, nothing left.
	interruptOnNodePod(t, c, "iptables", "audit", "-n", ns)
	b, _ := json.Marshal(d.Items[0])
	t.Logf("first line: %s", b)
	testreport.Count(t, "fleet audit: 20 pods read with 1 node pod in %.1fs (%.0f ms per pod), the 2 planted drifts found, 0 ephemeral containers, 0 node pods left (also after Ctrl-C)",
		took.Seconds(), float64(took.Milliseconds())/20)
}
