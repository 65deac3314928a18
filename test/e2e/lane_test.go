package e2e

// The tests named TestLane* give answers that depend on the Kubernetes
// version. hack/test.sh runs them on every lane (the newest Kubernetes with
// the whole suite, the oldest that builds here on its own); each asserts the
// answer for the version its cluster runs and reports its count of checks to
// $KMESH_LANE_REPORT, which test.sh prints per lane.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

// lane counts the checks of one version-dependent test.
type lane struct {
	t       *testing.T
	c       *testcluster.Cluster
	version *version.Version
	checks  int
}

func newLane(t *testing.T, c *testcluster.Cluster) *lane {
	t.Helper()
	v, err := version.ParseSemantic(c.ServerVersion)
	if err != nil {
		t.Fatalf("the cluster's version %q: %v", c.ServerVersion, err)
	}
	l := &lane{t: t, c: c, version: v}
	t.Cleanup(func() {
		t.Logf("lane %s: %d checks", c.ServerVersion, l.checks)
		if t.Failed() {
			return
		}
		if path := os.Getenv("KMESH_LANE_REPORT"); path != "" {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err == nil {
				fmt.Fprintf(f, "%s %d %s\n", c.ServerVersion, l.checks, t.Name())
				f.Close()
			}
		}
	})
	return l
}

// check counts one assertion and reports it when it does not hold.
func (l *lane) check(ok bool, format string, args ...any) {
	l.t.Helper()
	l.checks++
	if !ok {
		l.t.Errorf("[lane %s] "+format, append([]any{l.c.ServerVersion}, args...)...)
	}
}

// meshDoc runs `kubectl-mesh ARGS -o json` and decodes its document; a
// non-zero exit ends the test.
func meshDoc[T any](t *testing.T, c *testcluster.Cluster, args ...string) T {
	t.Helper()
	r := mesh(t, c, "", append(args, "-o", "json")...)
	if r.code != 0 {
		t.Fatalf("kubectl-mesh %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return decode[T](t, r)
}

// realNode is the cluster's one kubelet-backed node.
func realNode(t *testing.T, c *testcluster.Cluster) *corev1.Node {
	t.Helper()
	nodes, err := c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		if nodes.Items[i].Labels["kmesh.test/no-kubelet"] == "" {
			return &nodes.Items[i]
		}
	}
	t.Fatal("no node with a kubelet")
	return nil
}

// oldNode registers a Node object that reports a 1.32 kubelet. No kubelet is
// behind it (1.32's cannot be built here): it only exists for what reads
// Node objects, as istiod's native-sidecar rule does. It is cordoned and
// tainted so that nothing is scheduled on it, and removed when the test ends.
func oldNode(t *testing.T, c *testcluster.Cluster, name, kubelet string) {
	t.Helper()
	ctx := context.Background()
	// One left by a run that was killed before its cleanup would turn every
	// later native-sidecar answer classic: remove it first, and wait.
	nodes := c.Client.CoreV1().Nodes()
	_ = nodes.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "kmesh.test/no-kubelet"})
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		left, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: "kmesh.test/no-kubelet"})
		return err == nil && len(left.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("a Node labelled kmesh.test/no-kubelet is still there: %v", err)
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kmesh.test/no-kubelet": "true"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{
			{Key: "kmesh.test/no-kubelet", Value: "true", Effect: corev1.TaintEffectNoSchedule},
			{Key: "kmesh.test/no-kubelet", Value: "true", Effect: corev1.TaintEffectNoExecute},
		}},
	}
	if _, err := nodes.Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nodes.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	// The node controller writes to a new node too: retry on a conflict.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status.NodeInfo.KubeletVersion = kubelet
		_, err = nodes.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sidecarOf says how the proxy was added to a created pod: "native",
// "classic" or "" (not injected).
func sidecarOf(p *corev1.Pod) string {
	for _, c := range p.Spec.InitContainers {
		if c.Name == "istio-proxy" && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return "native"
		}
	}
	for _, c := range p.Spec.Containers {
		if c.Name == "istio-proxy" {
			return "classic"
		}
	}
	return ""
}

func factorOf(r injection.InjectionReport, name string) (injection.Factor, bool) {
	for _, f := range r.Factors {
		if f.Factor == name {
			return f, true
		}
	}
	return injection.Factor{}, false
}

// Istio (1.27+, ENABLE_NATIVE_SIDECARS=auto) adds a native sidecar only when
// the pod's node, or at admission every node, runs a kubelet of 1.33 or
// newer. On each lane: the lane's own node decides native; a Node reporting
// 1.32 flips new pods to classic; a pod already bound to the lane's node is
// decided by that node alone. why-injected must predict what the injector did
// and name the node and version that decided it.
func TestLaneNativeSidecarFollowsNodeVersions(t *testing.T) {
	c := testcluster.Get(t)
	l := newLane(t, c)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "lane-native", map[string]string{"istio-injection": "enabled"})
	node := realNode(t, c)
	l.check(node.Status.NodeInfo.KubeletVersion == c.ServerVersion, "node %s reports kubelet %s, the lane is %s", node.Name, node.Status.NodeInfo.KubeletVersion, c.ServerVersion)
	// What the lane's own kubelet gets: native from 1.33 on.
	own, ownWhy := "classic", "below 1.33"
	if l.version.AtLeast(version.MajorMinor(1, 33)) {
		own, ownWhy = "native", "1.33 or newer"
	}

	create := func(name, nodeName string) *corev1.Pod {
		t.Helper()
		p := appPod(name, nil, nil)
		p.Spec.NodeName = nodeName
		if nodeName == "" {
			p.Spec.SchedulerName = "kmesh-unscheduled" // admitted (and injected), never run
		}
		created, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return created
	}
	predict := func(name string) injection.InjectionReport {
		t.Helper()
		return meshDoc[reportDoc](t, c, "why-injected", name, "-n", ns).InjectionReport
	}

	// Only the lane's own node: native, and the answer says which version decided it.
	p := create("only-lane-node", "")
	l.check(sidecarOf(p) == own, "with only node %s (%s) the injector added %q, want %s", node.Name, c.ServerVersion, sidecarOf(p), own)
	r := predict(p.Name)
	l.check(r.Sidecar == own, "why-injected predicts sidecar %q, want %s", r.Sidecar, own)
	f, ok := factorOf(r, "node versions")
	l.check(ok && strings.Contains(f.Value, node.Name+" "+c.ServerVersion) && strings.Contains(f.Value, ownWhy),
		"factor node versions = %+v, want %s %s named as %s", f, node.Name, c.ServerVersion, ownWhy)

	// A Node that reports a 1.32 kubelet joins: new pods get a classic sidecar.
	const oldName, oldVersion = "kmesh-kubelet-1-32", "v1.32.13"
	oldNode(t, c, oldName, oldVersion)
	// istiod learns of the Node through its informer: wait until its
	// admission (a dry run) sees it, then create the pod.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p := appPod("probe", nil, nil)
		p.Spec.SchedulerName = "kmesh-unscheduled"
		dry, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && sidecarOf(dry) == "classic", nil
	}); err != nil {
		t.Logf("istiod still adds a %s sidecar 30s after Node %s joined", own, oldName)
	}
	classic := create("with-old-node", "")
	l.check(sidecarOf(classic) == "classic", "with node %s reporting %s the injector added %q, want classic", oldName, oldVersion, sidecarOf(classic))
	r = predict(classic.Name)
	l.check(r.Sidecar == "classic", "why-injected predicts sidecar %q with a 1.32 node, want classic", r.Sidecar)
	f, ok = factorOf(r, "node versions")
	l.check(ok && strings.Contains(f.Value, oldName+" "+oldVersion) && strings.Contains(f.Value, "below 1.33"),
		"factor node versions = %+v, want %s %s named as below 1.33", f, oldName, oldVersion)
	k, _ := factorOf(r, "sidecar kind")
	l.check(k.Value == "classic" && strings.Contains(k.Source, oldName), "factor sidecar kind = %+v, want classic decided by %s", k, oldName)

	// The same template from a manifest (-f): predicted classic too, before it exists.
	manifest := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: from-file, namespace: %s}\nspec: {containers: [{name: app, image: %s}]}\n", ns, testImage)
	res := mesh(t, c, manifest, "why-injected", "-f", "-", "-o", "json")
	rf := decode[reportDoc](t, res)
	l.check(res.code == 0 && rf.Sidecar == "classic", "why-injected -f: exit %d, sidecar %q with a 1.32 node, want classic", res.code, rf.Sidecar)

	// A Deployment's pod, scheduled onto the lane's node after admission: the
	// injector saw every node, and so does the prediction for its replacement.
	c.Apply(t, ns, []byte(fmt.Sprintf(`{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
"spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}},
"spec": {"terminationGracePeriodSeconds": 1, "containers": [{"name": "app", "image": %q, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}]}}}}`, testImage)))
	web := waitPods(t, c, ns, "app=web", 1)[0]
	scheduled := c.WaitPod(t, ns, web.Name, 60*time.Second, "scheduled", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
	l.check(sidecarOf(&web) == "classic" && scheduled.Spec.NodeName == node.Name, "Deployment pod: sidecar %q on node %q, want classic on %s", sidecarOf(&web), scheduled.Spec.NodeName, node.Name)
	r = predict(web.Name)
	l.check(r.Sidecar == "classic", "why-injected predicts %q for a re-created Deployment pod while a 1.32 node exists, want classic", r.Sidecar)

	// A pod bound to the lane's node at creation is decided by that node alone.
	bound := create("bound-to-new-node", node.Name)
	l.check(sidecarOf(bound) == "native", "a pod bound to %s (%s) got %q, want native", node.Name, c.ServerVersion, sidecarOf(bound))
	r = predict(bound.Name)
	l.check(r.Sidecar == "native", "why-injected predicts sidecar %q for a pod bound to %s, want native", r.Sidecar, node.Name)
	f, ok = factorOf(r, "node versions")
	l.check(ok && strings.Contains(f.Value, node.Name+" "+c.ServerVersion) && !strings.Contains(f.Value, oldName),
		"factor node versions for a bound pod = %+v, want only %s", f, node.Name)
}

// Start order on each lane's kubelet: a classic sidecar held by
// holdApplicationUntilProxyStarts starts (and is ready) before the app; one
// without the hold is started after the app, and the answer says so.
func TestLaneStartupClassicSidecar(t *testing.T) {
	c := testcluster.Get(t)
	l := newLane(t, c)
	c.InstallMesh(t)
	ctx := context.Background()
	held := c.Namespace(t, "lane-held", map[string]string{"istio.io/rev": "canary"})
	unheld := c.Namespace(t, "lane-unheld", map[string]string{"istio-injection": "enabled"})
	classic := map[string]string{"sidecar.istio.io/nativeSidecar": "false"}
	for _, p := range []struct {
		ns  string
		pod *corev1.Pod
	}{{held, appPod("held", nil, classic)}, {unheld, appPod("unheld", nil, classic)}} {
		if _, err := c.Client.CoreV1().Pods(p.ns).Create(ctx, p.pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.WaitPod(t, held, "held", 90*time.Second, "ready", testcluster.Running)
	c.WaitPod(t, unheld, "unheld", 90*time.Second, "ready", testcluster.Running)

	report := func(ns, name string) (startupDoc, *corev1.Pod) {
		t.Helper()
		d := meshDoc[startupDoc](t, c, "startup", name, "-n", ns)
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d, p
	}
	started := func(p *corev1.Pod, name string) time.Time {
		t.Helper()
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == name && s.State.Running != nil {
				return s.State.Running.StartedAt.Time
			}
		}
		t.Fatalf("%s: container %s is not running", p.Name, name)
		return time.Time{}
	}

	d, p := report(held, "held")
	l.check(!d.Native && d.Hold, "held: native %v hold %v, want a classic sidecar with the hold", d.Native, d.Hold)
	l.check(strings.Join(d.StartOrder, ",") == "istio-init,istio-proxy,app", "held: start order %q, want istio-init,istio-proxy,app", d.StartOrder)
	l.check(d.OrderVerdict == "ok" && len(d.Hazards) == 0, "held: verdict %q hazards %+v", d.OrderVerdict, d.Hazards)
	l.check(!started(p, "istio-proxy").After(started(p, "app")), "held: the kubelet started istio-proxy at %v, after app at %v", started(p, "istio-proxy"), started(p, "app"))
	// The hold: the app was started only once the proxy had come up.
	var proxyReady *time.Time
	for _, cs := range d.Containers {
		if cs.Name == "istio-proxy" {
			proxyReady = cs.ReadyAt
		}
	}
	l.check(proxyReady != nil && !started(p, "app").Before(*proxyReady), "held: app started at %v, before istio-proxy was ready at %v", started(p, "app"), proxyReady)

	d, p = report(unheld, "unheld")
	l.check(!d.Native && !d.Hold, "unheld: native %v hold %v, want a classic sidecar without the hold", d.Native, d.Hold)
	l.check(len(d.StartOrder) == 3 && d.StartOrder[0] == "istio-init" && d.StartOrder[1] == "app", "unheld: start order %q, want istio-init, then app before istio-proxy", d.StartOrder)
	l.check(!started(p, "app").After(started(p, "istio-proxy")), "unheld: the kubelet started app at %v, after istio-proxy at %v", started(p, "app"), started(p, "istio-proxy"))
	l.check(d.OrderVerdict != "ok" || len(d.Hazards) > 0, "unheld: verdict %q with no hazard for an app that starts before its proxy", d.OrderVerdict)
}

// The live rules of a classic and a native sidecar pod read through an
// ephemeral container on each lane's kubelet, with the counters of real
// connections, no drift, and the ephemeral container visible in the pod.
func TestLaneIptablesThroughEphemeralContainer(t *testing.T) {
	c := testcluster.Get(t)
	l := newLane(t, c)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "lane-ipt", map[string]string{"istio-injection": "enabled"})
	for _, p := range []*corev1.Pod{appPod("native", nil, nil), appPod("classic", nil, map[string]string{"sidecar.istio.io/nativeSidecar": "false"})} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	inbound := "-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT"
	for _, name := range []string{"native", "classic"} {
		p := c.WaitPod(t, ns, name, 90*time.Second, "ready", testcluster.Running)
		l.check(sidecarOf(p) == name, "pod %s has a %q sidecar", name, sidecarOf(p))
		connectN(t, p.Status.PodIP, 8080, 3)
		r := mesh(t, c, "", "iptables", name, "-n", ns, "--via", "ephemeral", "--trace", "in:8080", "-o", "json")
		d := decode[captureDoc](t, r)
		l.check(r.code == 0 && d.Live != nil && d.Live.Via == "ephemeral", "%s: exit %d live %+v: %s", name, r.code, d.Live, r.stderr)
		if d.Live == nil {
			continue
		}
		rule := ruleOf(d, "nat", inbound)
		l.check(rule != nil && rule.Packets >= 3, "%s: %s = %+v, want at least 3 packets", name, inbound, rule)
		l.check(len(d.Drift.Missing)+len(d.Drift.Extra) == 0, "%s: drift %+v", name, d.Drift)
		l.check(len(d.Traces) == 1 && d.Traces[0].Verdict == "redirect" && d.Traces[0].Port == 15006, "%s: traces %+v", name, d.Traces)
		after, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.check(len(after.Spec.EphemeralContainers) == 1 && len(after.Status.EphemeralContainerStatuses) == 1,
			"%s: %d ephemeral containers, %d statuses after one read", name, len(after.Spec.EphemeralContainers), len(after.Status.EphemeralContainerStatuses))
	}
}
