package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"
)

type captureDoc struct {
	Kind string `json:"kind"`
	capture.CaptureReport
}

func ruleOf(d captureDoc, table, spec string) *capture.Rule {
	for _, dump := range d.Dumps {
		for _, t := range dump.Tables {
			if t.Name != table {
				continue
			}
			for _, c := range t.Chains {
				for _, r := range c.Rules {
					if r.Spec == spec {
						return r
					}
				}
			}
		}
	}
	return nil
}

// connectN opens n connections from this host to ip:port.
func connectN(t *testing.T, ip string, port, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, fmt.Sprint(port)), 3*time.Second)
		if err != nil {
			t.Fatalf("connect %s:%d: %v", ip, port, err)
		}
		_, _ = conn.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
		buf := make([]byte, 64)
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		_, _ = conn.Read(buf)
		conn.Close()
	}
}

func noNodePods(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{LabelSelector: nsexec.NodePodLabel})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("node pods left behind: %d (first %s/%s)", len(pods.Items), pods.Items[0].Namespace, pods.Items[0].Name)
	}
}

// A live Istio-shaped pod: the rules are read through an ephemeral container
// and through a node pod, with the counters of real traffic; --interval
// counts what happened in between; nothing is left behind.
func TestIptablesLivePod(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "ipt-live", map[string]string{"istio-injection": "enabled"})
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, appPod("web", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := c.WaitPod(t, ns, "web", 90*time.Second, "ready", testcluster.Running)
	connectN(t, p.Status.PodIP, 8080, 3)

	inbound := "-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT"
	for _, via := range []string{nsexec.ViaEphemeral, nsexec.ViaNode} {
		t.Run(via, func(t *testing.T) {
			r := mesh(t, c, "", "iptables", "web", "-n", ns, "--via", via, "--trace", "in:8080", "--trace", "out:10.213.78.1:443", "-o", "json")
			d := decode[captureDoc](t, r)
			if r.code != 0 || d.Live == nil || d.Live.Via != via || d.Live.Backend != "iptables: nft" {
				t.Fatalf("exit %d live %+v: %s", r.code, d.Live, r.stderr)
			}
			if rule := ruleOf(d, "nat", inbound); rule == nil || rule.Packets < 3 {
				t.Errorf("%s: %+v, want at least 3 packets (3 connections were made)", inbound, rule)
			}
			if len(d.Drift.Missing)+len(d.Drift.Extra) != 0 || d.Expected != "container istio-init's arguments" {
				t.Errorf("drift %+v from %q", d.Drift, d.Expected)
			}
			if d.Traces[0].Verdict != "redirect" || d.Traces[0].Port != 15006 || d.Traces[1].Verdict != "redirect" || d.Traces[1].Port != 15001 {
				t.Errorf("traces %+v", d.Traces)
			}
		})
	}
	noNodePods(t, c)

	t.Run("interval", func(t *testing.T) {
		// The debug containers of the dumps before: one may still be running
		// its last line when its dump has been read.
		before := map[string]bool{}
		if pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{}); err == nil {
			for _, s := range pod.Spec.EphemeralContainers {
				before[s.Name] = true
			}
		} else {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Connect once the first dump is taken: the new debug container's
			// log holds the first round's last section.
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
				pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				for _, s := range pod.Status.EphemeralContainerStatuses {
					if s.State.Running == nil || before[s.Name] {
						continue
					}
					b, err := c.Client.CoreV1().Pods(ns).GetLogs("web", &corev1.PodLogOptions{Container: s.Name}).DoRaw(ctx)
					if err == nil && strings.Contains(string(b), "### kubectl-mesh 1 resolv.conf") {
						return true, nil
					}
				}
				return false, nil
			})
			if err != nil {
				t.Errorf("the first dump of --interval never came: %v", err)
			}
			for i := 0; i < 5; i++ {
				conn, err := net.DialTimeout("tcp", net.JoinHostPort(p.Status.PodIP, "8080"), 2*time.Second)
				if err == nil {
					conn.Close()
				}
			}
		}()
		r := mesh(t, c, "", "iptables", "web", "-n", ns, "--interval", "5s", "-o", "json")
		<-done
		d := decode[captureDoc](t, r)
		rule := ruleOf(d, "nat", inbound)
		if r.code != 0 || rule == nil || rule.PacketsDelta == nil || *rule.PacketsDelta < 5 || *rule.PacketsDelta > 8 {
			delta := "none"
			if rule != nil && rule.PacketsDelta != nil {
				delta = fmt.Sprint(*rule.PacketsDelta)
			}
			t.Errorf("exit %d: delta of %s = %s packets, want the 5 connections made during the interval (%s)", r.code, inbound, delta, r.stderr)
		}
		if d.Live.Interval != "5s" {
			t.Errorf("interval %q", d.Live.Interval)
		}
	})
}

// Rules written without the -x its istio-init was given show as drift.
func TestIptablesLiveDrift(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	ns := c.Namespace(t, "ipt-drift", nil)
	root := int64(0)
	args := []string{"istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT", "-i", "*", "-x", "10.96.0.0/12", "-b", "*", "-d", "15090,15021,15020"}
	pod := appPod("stale", nil, map[string]string{"traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.96.0.0/12"})
	pod.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: c.ProxyImage, ImagePullPolicy: corev1.PullNever,
		// An old istio-init that drops -x: its arguments ask for the exclusion, its rules lack it.
		Command: []string{"/bin/sh", "-c", `exec pilot-agent istio-iptables -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x '' -b '*' -d 15090,15021,15020`},
		Args:    args,
		SecurityContext: &corev1.SecurityContext{RunAsUser: &root,
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPod(t, ns, "stale", 60*time.Second, "ready", testcluster.Running)
	r := mesh(t, c, "", "iptables", "stale", "-n", ns, "-o", "json")
	d := decode[captureDoc](t, r)
	if r.code != 0 || len(d.Drift.Missing) != 1 || d.Drift.Missing[0] != "-A ISTIO_OUTPUT -d 10.96.0.0/12 -j RETURN" || len(d.Drift.Extra) != 0 {
		t.Errorf("exit %d drift %+v (%s)", r.code, d.Drift, r.stderr)
	}
	human := mesh(t, c, "", "iptables", "stale", "-n", ns)
	if !strings.Contains(human.stdout, "missing:   -A ISTIO_OUTPUT -d 10.96.0.0/12 -j RETURN") {
		t.Errorf("human output:\n%s", human.stdout)
	}
}

// PodSecurity baseline refuses the debug container's capabilities: a clear
// message, and --via node works; a user who may not patch
// pods/ephemeralcontainers is told so before anything changes.
func TestIptablesLiveRefusals(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "ipt-psa", map[string]string{"istio-injection": "enabled"})
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, appPod("web", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPod(t, ns, "web", 90*time.Second, "ready", testcluster.Running)

	// RBAC first, while the namespace allows anything.
	user := "no-debug-" + ns
	c.GrantRole(t, ns, user, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get", "list"}}})
	r := mesh(t, c, "", "iptables", "web", "-n", ns, "--as", user)
	if r.code != 1 || !strings.Contains(r.stderr, `not allowed to patch pods/ephemeralcontainers in namespace "`+ns+`"`) || !strings.Contains(r.stderr, "nothing was changed") {
		t.Errorf("RBAC: exit %d %q", r.code, r.stderr)
	}
	if p, _ := c.Client.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{}); len(p.Spec.EphemeralContainers) != 0 {
		t.Errorf("an ephemeral container was added despite the refusal")
	}

	// Now enforce PodSecurity baseline on the namespace (the pod is already running).
	nsObj, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	if _, err := c.Client.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r = mesh(t, c, "", "iptables", "web", "-n", ns)
	if r.code != 1 || !strings.Contains(r.stderr, "PodSecurity policy refuses a debug container") || !strings.Contains(r.stderr, "--via node") {
		t.Errorf("PodSecurity: exit %d %q", r.code, r.stderr)
	}
	r = mesh(t, c, "", "iptables", "web", "-n", ns, "--via", "node", "-o", "json")
	if d := decode[captureDoc](t, r); r.code != 0 || ruleOf(d, "nat", "-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001") == nil {
		t.Errorf("--via node: exit %d %s", r.code, r.stderr)
	}
	noNodePods(t, c)
}

// Ctrl-C while the node pod works: the pod is deleted all the same.
func TestIptablesLiveInterrupted(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "ipt-int", map[string]string{"istio-injection": "enabled"})
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, appPod("web", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPod(t, ns, "web", 90*time.Second, "ready", testcluster.Running)
	interruptOnNodePod(t, c, "iptables", "web", "-n", ns, "--via", "node", "--interval", "60s")
}

// interruptOnNodePod runs kubectl-mesh with args, sends it Ctrl-C once a node
// pod exists, and checks that it exits 130, as kubectl does, and that every
// node pod is gone (deletion is asked before the process exits: waited for).
func interruptOnNodePod(t *testing.T, c *testcluster.Cluster, args ...string) {
	t.Helper()
	ctx := context.Background()
	cmd := exec.Command(meshBinary(t, c), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: nsexec.NodePodLabel})
		return err == nil && len(pods.Items) > 0, nil
	}); err != nil {
		_ = cmd.Process.Kill()
		t.Fatal("the node pod never appeared")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("%v interrupted: exit %d, want 130 as kubectl", args, code)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: nsexec.NodePodLabel})
		return err == nil && len(pods.Items) == 0, nil
	}); err != nil {
		noNodePods(t, c)
	}
}

// Ctrl-C at random moments of 20 runs: before the node pod is asked for,
// while its creation is in flight, while it starts and while it works. Every
// run exits 130 (or 0 when it had finished), and no node pod is left behind.
// (The random delay before the signal is what the test varies, not a wait.)
func TestIptablesLiveInterruptedAtRandom(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "ipt-rand", map[string]string{"istio-injection": "enabled"})
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, appPod("web", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPod(t, ns, "web", 90*time.Second, "ready", testcluster.Running)
	bin := meshBinary(t, c)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	const runs = 20
	codes := map[int]int{}
	for i := 0; i < runs; i++ {
		cmd := exec.Command(bin, "--kubeconfig", c.Kubeconfig, "iptables", "web", "-n", ns, "--via", "node", "--interval", "2s", "-o", "json")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(rng.Int63n(int64(2500 * time.Millisecond)))
		// How it ended is read off its ProcessState below, not Wait's error.
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(delay):
			_ = cmd.Process.Signal(syscall.SIGINT)
			<-exited
		}
		code := cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGINT {
			// The signal came before the process had set up its handler (its
			// first milliseconds): it ended as any program does, before it
			// could create anything.
			code = 128 + int(syscall.SIGINT)
		}
		codes[code]++
		if code != 130 && code != 0 {
			t.Errorf("run %d, Ctrl-C after %v: exit %d: %s", i, delay, code, stderr.String())
		}
	}
	// Deletion is asked before each process exits: wait until the pods are gone.
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: nsexec.NodePodLabel})
		if err != nil {
			return false, nil
		}
		left = left[:0]
		for _, p := range pods.Items {
			left = append(left, p.Namespace+"/"+p.Name)
		}
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("node pods left behind after %d interrupted runs: %v", runs, left)
	}
	testreport.Count(t, "%d runs of iptables --via node interrupted at random moments (exit codes %v), 0 node pods left", runs, codes)
}

// Istio's native nftables mode in a real pod: Istio's own istio-iptables
// (in the proxyv2 image) run by istio-init with --native-nftables writes inet
// istio-proxy-* tables; `kubectl mesh iptables POD` reads them with nft
// through an ephemeral container, with counters, annotated, traced, and
// compared with the rules that mode writes for istio-init's arguments.
func TestIptablesLiveNativeNftables(t *testing.T) {
	c := testcluster.Get(t)
	ctx := context.Background()
	ns := c.Namespace(t, "ipt-native", nil)
	root := int64(0)
	pod := appPod("native", nil, nil)
	pod.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: c.ProxyImage, ImagePullPolicy: corev1.PullNever,
		Args: []string{"istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT", "-i", "*", "-x", "", "-b", "*",
			"-d", "15090,15021,15020", "--native-nftables"},
		SecurityContext: &corev1.SecurityContext{RunAsUser: &root,
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := c.WaitPod(t, ns, "native", 60*time.Second, "running", testcluster.Running)
	// A connection into the pod: PREROUTING sends it to 15006, where nothing
	// listens, so the pod answers with a reset. Wait until it has answered.
	var dialErr error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(p.Status.PodIP, "8080"), time.Second)
		if err == nil {
			conn.Close()
		}
		dialErr = err
		return err == nil || errors.Is(err, syscall.ECONNREFUSED), nil
	}); err != nil {
		t.Fatalf("no answer from %s:8080: %v", p.Status.PodIP, dialErr)
	}
	r := mesh(t, c, "", "iptables", "native", "-n", ns, "--trace", "in:8080", "--trace", "out:10.99.0.5:443", "-o", "json")
	d := decode[captureDoc](t, r)
	checked := 0
	check := func(ok bool, format string, a ...any) {
		t.Helper()
		checked++
		if !ok {
			t.Errorf(format, a...)
		}
	}
	check(r.code == 0, "exit %d: %s", r.code, r.stderr)
	check(d.Drift != nil && len(d.Drift.Missing)+len(d.Drift.Extra)+len(d.Drift.Reordered) == 0, "drift %+v, want none", d.Drift)
	check(strings.Contains(d.Expected, "istio-init") && strings.Contains(d.Expected, "native nftables"), "expected from %q", d.Expected)
	var redirected uint64
	native := false
	for _, dump := range d.Dumps {
		if dump.Backend != capture.BackendNative {
			continue
		}
		native = true
		for _, tb := range dump.Tables {
			for _, ch := range tb.Chains {
				for _, rule := range ch.Rules {
					if dump.Family == "ipv4" && ch.Name == "ISTIO_IN_REDIRECT" && strings.Contains(rule.Spec, "redirect to :15006") {
						redirected = rule.Packets
					}
				}
			}
		}
	}
	check(native, "no native nftables dump: %+v", d.Dumps)
	check(redirected >= 1, "the inbound redirect to 15006 counted %d packets, want the connection made", redirected)
	check(len(d.Traces) == 2 && d.Traces[0].Verdict == "redirect" && d.Traces[0].Port == 15006 && d.Traces[1].Verdict == "redirect" && d.Traces[1].Port == 15001,
		"traces %+v", d.Traces)
	testreport.Count(t, "native nftables in a live pod: %d checks", checked)
}

// A workload names its pod: `iptables deploy/web` reads one of its pods,
// picked as kubectl logs picks it (running and ready), and says which when
// there are several; its rules are read and compared as a pod's are.
func TestIptablesOfAWorkload(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "ipt-workload", map[string]string{"istio-injection": "enabled"})
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, appDeployment(ns, "web", 2, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range waitPods(t, c, ns, "app=web", 2) {
		c.WaitPod(t, ns, p.Name, 120*time.Second, "running and ready", testcluster.Running)
		names[p.Name] = true
	}
	checks := 0
	for _, target := range []string{"deploy/web", "deployment/web", "deployments/web"} {
		r := mesh(t, c, "", "iptables", target, "-n", ns, "--via", "node", "-o", "json")
		d := decode[captureDoc](t, r)
		checks++
		if r.code != 0 || d.Live == nil || !names[d.Live.Pod] {
			t.Fatalf("iptables %s: exit %d, live %+v, want one of the pods %v: %s", target, r.code, d.Live, names, r.stderr)
		}
		checks++
		if d.Drift == nil || len(d.Drift.Missing)+len(d.Drift.Extra) != 0 {
			t.Errorf("iptables %s: drift %+v, want none", target, d.Drift)
		}
		checks++
		if !strings.Contains(r.stderr, "Found 2 pods, using pod/"+d.Live.Pod) {
			t.Errorf("iptables %s: stderr %q does not say which of the 2 pods it read", target, r.stderr)
		}
	}
	r := mesh(t, c, "", "iptables", "deploy/nothing-here", "-n", ns, "--via", "node")
	checks++
	if r.code == 0 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("iptables deploy/nothing-here: exit %d, stderr %q: want not found", r.code, r.stderr)
	}
	noNodePods(t, c)
	testreport.Count(t, "iptables TYPE/NAME: %d checks", checks)
}
