package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// iptables --connections on a pod real istiod injected: its app's calls to
// the backend's port 8080 are captured (replies from 15001, each with the
// proxy's own upstream flow), its calls to port 9090, which the pod's
// excludeOutboundPorts annotation leaves out, bypass the proxy through the
// rule for that port, and a container running as the proxy's uid 1337
// bypasses it through the uid rule.
func TestIptablesConnections(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	plain := c.Namespace(t, "conn-backend", nil)
	ns := c.Namespace(t, "conn", map[string]string{"istio-injection": "enabled"})
	backend := appPod("backend", nil, nil)
	backend.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "mkdir -p /w && echo hi > /w/index.html && (httpd -f -p 9090 -h /w &) && exec httpd -f -p 8080 -h /w"}
	if _, err := c.Client.CoreV1().Pods(plain).Create(ctx, backend, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ip := c.WaitPod(t, plain, "backend", 60*time.Second, "running", testcluster.Running).Status.PodIP
	web := appPod("web", nil, map[string]string{"traffic.sidecar.istio.io/excludeOutboundPorts": "9090"})
	loop := func(ports ...string) []string {
		var calls []string
		for _, p := range ports {
			calls = append(calls, "wget -q -O- http://"+ip+":"+p+"/ >/dev/null")
		}
		return []string{"/bin/sh", "-c", "while true; do " + strings.Join(calls, "; ") + "; sleep 1; done"}
	}
	web.Spec.Containers[0].Command = loop("8080", "9090")
	uid := int64(1337)
	web.Spec.Containers = append(web.Spec.Containers, corev1.Container{Name: "as-proxy-uid", Image: testImage, ImagePullPolicy: corev1.PullNever,
		SecurityContext: &corev1.SecurityContext{RunAsUser: &uid}, Command: loop("8080")})
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPod(t, ns, "web", 120*time.Second, "running", testcluster.Running)

	var d captureDoc
	var r result
	kinds := map[string]int{}
	// The flows come every second: read until each kind has been seen.
	err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		r = mesh(t, c, "", "iptables", "web", "-n", ns, "--via", "node", "--connections", "-o", "json")
		if r.code != 0 {
			return false, nil
		}
		d = decode[captureDoc](t, r)
		kinds = map[string]int{}
		for _, f := range d.Connections {
			dst := f.Dst.String()
			switch {
			case f.Class == "captured outbound" && dst == ip+":8080" && f.Port == 15001:
				kinds["captured"]++
			case f.Class == "proxy upstream" && dst == ip+":8080":
				kinds["upstream"]++
			case f.Class == capture.Bypassing && dst == ip+":9090" && strings.HasSuffix(f.Rule, "--dport 9090 -j RETURN"):
				kinds["excluded port"]++
			case f.Class == capture.Bypassing && dst == ip+":8080" && strings.HasSuffix(f.Rule, "--uid-owner 1337 -j RETURN"):
				kinds["uid 1337"]++
			case f.Class == capture.Bypassing:
				kinds["other bypass"]++
			}
		}
		return kinds["captured"] > 0 && kinds["excluded port"] > 0 && kinds["uid 1337"] > 0, nil
	})
	if err != nil {
		t.Fatalf("not every kind of flow was seen: %v (exit %d, %s)\n%v", kinds, r.code, r.stderr, d.ConnectionsSummary)
	}
	if kinds["other bypass"] > 0 || kinds["upstream"] == 0 || kinds["upstream"] > kinds["captured"] {
		t.Errorf("flows by kind %v: a bypass nobody explains, or proxy upstreams that do not pair with captured calls", kinds)
	}
	human := mesh(t, c, "", "iptables", "web", "-n", ns, "--connections")
	lines := strings.Split(human.stdout, "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[2], "Connections: ") || !strings.Contains(human.stdout, "let through by: -A ISTIO_OUTPUT -p tcp -m tcp --dport 9090 -j RETURN") {
		t.Errorf("the connections are not summarised first:\n%s", human.stdout)
	}
	noNodePods(t, c)
	testreport.Count(t, "--connections: %d flows classified (%v)", len(d.Connections), kinds)
}
