// Package e2e holds end-to-end tests that run against the local cluster
// (hack/cluster/up.sh): a real kube-apiserver deciding which webhook fires, a
// real kubelet running init, sidecar and ephemeral containers, real iptables
// in the pods' network namespaces.
package e2e

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

const testImage = "kmesh.local/mesh-test:v1"

// counterOf returns the packet counter of the iptables-save -c rule that
// ends with suffix, or -1 when there is no such rule.
func counterOf(dump, suffix string) int {
	re := regexp.MustCompile(`^\[(\d+):\d+\] (.*)$`)
	for _, line := range strings.Split(dump, "\n") {
		m := re.FindStringSubmatch(strings.TrimSpace(line))
		if m != nil && strings.HasSuffix(m[2], suffix) {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return -1
}

// The harness itself: an init container programs nat rules in the pod's
// network namespace, real connections go through them, and an ephemeral
// container added through pods/ephemeralcontainers reads them back with
// counters, through `kubectl logs`.
func TestInitContainerRulesReadByEphemeralContainer(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t, "harness", nil)
	root := int64(0)
	grace := int64(1)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nat-rules"},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			InitContainers: []corev1.Container{{
				Name: "istio-init", Image: testImage, ImagePullPolicy: corev1.PullNever,
				SecurityContext: &corev1.SecurityContext{RunAsUser: &root,
					Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}, Drop: []corev1.Capability{"ALL"}}},
				Command: []string{"/bin/sh", "-ec", `
iptables -t nat -N ISTIO_INBOUND
iptables -t nat -N ISTIO_IN_REDIRECT
iptables -t nat -N ISTIO_OUTPUT
iptables -t nat -N ISTIO_REDIRECT
iptables -t nat -A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006
iptables -t nat -A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001
iptables -t nat -A PREROUTING -p tcp -j ISTIO_INBOUND
iptables -t nat -A ISTIO_INBOUND -p tcp --dport 8080 -j ISTIO_IN_REDIRECT
iptables -t nat -A OUTPUT -p tcp -j ISTIO_OUTPUT
iptables -t nat -A ISTIO_OUTPUT -o lo -d 127.0.0.1/32 -j RETURN
iptables -t nat -A ISTIO_OUTPUT -p tcp --dport 9080 -j ISTIO_REDIRECT`},
			}},
			Containers: []corev1.Container{{
				Name: "app", Image: testImage, ImagePullPolicy: corev1.PullNever,
				Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				Command: []string{"/bin/sh", "-c", `
nc -ll -p 15006 -e /bin/echo inbound-redirected &
nc -ll -p 15001 -e /bin/echo outbound-redirected &
# until both listen (LISTEN rows for ports 15006 and 15001, IPv4 or IPv6)
listening() { cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q ":$1 [0-9A-F]*:0000 0A"; }
until listening 3A9E && listening 3A99; do sleep 0.1; done
for i in 1 2 3 4 5; do nc -w 2 "$POD_IP" 9080 </dev/null; done > /tmp/outbound.log
touch /tmp/done
exec sleep 3600`},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", "/tmp/done"}}}},
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := c.WaitPod(t, ns, pod.Name, 90*time.Second, "running and ready", testcluster.Running)
	if s := p.Status.InitContainerStatuses[0].State.Terminated; s == nil || s.ExitCode != 0 {
		t.Fatalf("istio-init did not succeed: %+v", p.Status.InitContainerStatuses[0].State)
	}

	// Three connections from this host into the pod: PREROUTING sends them to 15006.
	for i := 0; i < 3; i++ {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(p.Status.PodIP, "8080"), 3*time.Second)
		if err != nil {
			t.Fatalf("connect to the pod's port 8080: %v", err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		b, _ := io.ReadAll(conn)
		conn.Close()
		if got := strings.TrimSpace(string(b)); got != "inbound-redirected" {
			t.Fatalf("connection %d to :8080 answered %q, want the 15006 listener's inbound-redirected", i, got)
		}
	}

	c.RunEphemeral(t, ns, pod.Name, "dump", testImage, []corev1.Capability{"NET_ADMIN", "NET_RAW"}, "iptables-save", "-c", "-t", "nat")
	if c.KubectlPath == "" {
		t.Fatal("kubectl of the local cluster not found (hack/cluster/build-kube.sh builds it)")
	}
	out, err := exec.Command(c.KubectlPath, "--kubeconfig", c.Kubeconfig, "-n", ns, "logs", pod.Name, "-c", "dump").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl logs: %v\n%s", err, out)
	}
	dump := string(out)
	for _, want := range []struct {
		rule string
		min  int
	}{
		{"-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006", 3},
		{"-A ISTIO_INBOUND -p tcp -m tcp --dport 8080 -j ISTIO_IN_REDIRECT", 3},
		{"-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001", 5},
		{"-A ISTIO_OUTPUT -p tcp -m tcp --dport 9080 -j ISTIO_REDIRECT", 5},
	} {
		if n := counterOf(dump, want.rule); n < want.min {
			t.Errorf("rule %q: packet counter %d, want at least %d\n%s", want.rule, n, want.min, dump)
		}
	}
}

// Every command through kubectl's plugin discovery, as a user runs it:
// machine output parses back, piped output (NO_COLOR set) has no escape
// codes, help says "kubectl mesh", and kubectl's own completion reaches the
// plugin through the kubectl_complete-mesh shim and lists the cluster's pods.
func TestKubectlMeshThroughKubectl(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ns := c.Namespace(t, "plugin", map[string]string{"istio-injection": "enabled"})
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), appPod("web", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPod(t, ns, "web", 90*time.Second, "ready", testcluster.Running)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+"/kubectl-mesh", "./cmd/kubectl-mesh")
	build.Dir = c.RepoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build kubectl-mesh: %v\n%s", err, out)
	}
	env := append(os.Environ(), "PATH="+bin+":"+filepath.Dir(c.KubectlPath)+":/usr/bin:/bin", "KUBECONFIG="+c.Kubeconfig, "NO_COLOR=1")
	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(c.KubectlPath, args...)
		cmd.Env = env
		out, err := cmd.Output()
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 4 && slices.Contains(args, "-A") {
			err = nil // a problem found among the cluster's other pods: an answer, printed
		}
		return string(out), err
	}
	if out, err := kubectl("mesh", "completion", "shim", "--install"); err != nil || !strings.Contains(out, bin+"/kubectl_complete-mesh") {
		t.Fatalf("install the shim: %v %s", err, out)
	}
	dump := filepath.Join(c.RepoRoot, "explain", "capture", "testdata", "istio-default.nft.save")
	for _, args := range [][]string{
		{"mesh", "version", "-o", "json"},
		{"mesh", "why-injected", "-A", "-o", "yaml"},
		{"mesh", "why-injected", "web", "-n", ns, "-o", "json"},
		{"mesh", "startup", "-A", "-o", "json"},
		{"mesh", "startup", "web", "-n", ns, "-o", "yaml"},
		{"mesh", "iptables", "--from-file", dump, "-o", "json"},
		{"mesh", "iptables", "web", "-n", ns, "-o", "yaml"},
	} {
		out, err := kubectl(args...)
		if err != nil {
			t.Errorf("%v: %v", args, err)
			continue
		}
		var v map[string]any
		if err := yaml.Unmarshal([]byte(out), &v); err != nil || v["apiVersion"] != "kubectl-mesh.io/v1alpha1" {
			t.Errorf("%v: output does not parse back (%v): %.200s", args, err, out)
		}
	}
	for _, args := range [][]string{
		{"mesh", "why-injected", "-A"}, {"mesh", "why-injected", "web", "-n", ns}, {"mesh", "startup", "web", "-n", ns},
		{"mesh", "iptables", "web", "-n", ns}, {"mesh", "version"},
	} {
		out, err := kubectl(args...)
		if err != nil || strings.Contains(out, "\x1b") || out == "" {
			t.Errorf("%v: err %v, escape codes %v", args, err, strings.Contains(out, "\x1b"))
		}
	}
	if out, _ := kubectl("mesh", "why-injected", "--help"); !strings.Contains(out, "kubectl mesh why-injected") {
		t.Errorf("help does not say kubectl mesh:\n%s", out)
	}
	out, err := kubectl("__complete", "mesh", "why-injected", "-n", ns, "")
	if err != nil || !strings.Contains(out, "web\n") {
		t.Errorf("kubectl's completion of kubectl mesh: %v\n%s", err, out)
	}
	out, _ = kubectl("__complete", "mesh", "startup", "-n", "")
	if !strings.Contains(out, ns+"\n") {
		t.Errorf("namespace completion lacks %s:\n%s", ns, out)
	}
}
