package nsexec_test

// The ways into a pod's network namespace against the real apiserver and
// kubelet of the local cluster (skipped without one, failing under CI=true):
// what is refused before anything is changed, and that the node pod is gone
// after every way a dump can end. The successful dumps are in test/e2e.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"
)

const image = "kmesh.local/mesh-test:v1"

// podOnNode is a pod object (never created) that looks running on the
// cluster's node, with a container ID no process has.
func podOnNode(t *testing.T, c *testcluster.Cluster, ns string) *corev1.Pod {
	t.Helper()
	nodes, err := c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("no node: %v", err)
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ghost"},
		Spec: corev1.PodSpec{NodeName: nodes.Items[0].Name},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "app",
			ContainerID: "containerd://" + strings.Repeat("0123456789abcdef", 4), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}}
}

// nodePodsGone waits until ns holds no node pod, and fails if one stays.
func nodePodsGone(t *testing.T, c *testcluster.Cluster, ns string) {
	t.Helper()
	var left int
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: nsexec.NodePodLabel})
		if err != nil {
			return false, nil
		}
		left = len(pods.Items)
		return left == 0, nil
	})
	if err != nil {
		t.Errorf("%d node pods left in %s", left, ns)
	}
}

// The node pod runs, finds no process of the container, and fails: the error
// says why, and the pod is deleted.
func TestNodeDumpFailsAndCleansUp(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t, "nsexec-fail", nil)
	r := &nsexec.Runner{Client: c.Client}
	_, err := r.Dump(context.Background(), nsexec.Request{Pod: podOnNode(t, c, ns), Via: nsexec.ViaNode, Image: image, NodeNamespace: ns, Timeout: 60 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "no process of container") {
		t.Errorf("dump of a container with no process: %v", err)
	}
	nodePodsGone(t, c, ns)
}

// The dump times out: the error says so, and the pod is deleted.
func TestNodeDumpTimeoutCleansUp(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t, "nsexec-timeout", nil)
	r := &nsexec.Runner{Client: c.Client}
	_, err := r.Dump(context.Background(), nsexec.Request{Pod: podOnNode(t, c, ns), Via: nsexec.ViaNode, Image: image, NodeNamespace: ns,
		Timeout: time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("a dump given 1ms: %v", err)
	}
	nodePodsGone(t, c, ns)
}

// The caller's context ends while the node pod works: the pod is deleted.
func TestNodeDumpCancelledCleansUp(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t, "nsexec-cancel", nil)
	r := &nsexec.Runner{Client: c.Client}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the node pod exists: the condition, not a delay.
		_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: nsexec.NodePodLabel})
			return err == nil && len(pods.Items) > 0, nil
		})
		cancel()
	}()
	_, err := r.Dump(ctx, nsexec.Request{Pod: podOnNode(t, c, ns), Via: nsexec.ViaNode, Image: image, NodeNamespace: ns, Interval: time.Minute, Timeout: time.Minute})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled dump: %v", err)
	}
	nodePodsGone(t, c, ns)
}

// A namespace whose PodSecurity level refuses privileged pods: the error
// names --node-namespace, and nothing is left.
func TestNodeDumpPodSecurity(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t, "nsexec-psa", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	r := &nsexec.Runner{Client: c.Client}
	_, err := r.Dump(context.Background(), nsexec.Request{Pod: podOnNode(t, c, ns), Via: nsexec.ViaNode, Image: image, NodeNamespace: ns, Timeout: 30 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "--node-namespace") {
		t.Errorf("node pod in a restricted namespace: %v", err)
	}
	nodePodsGone(t, c, ns)
}

// Without the permissions a way needs, it is refused before anything is
// changed, naming the permission.
func TestDumpRefusedWithoutPermission(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t, "nsexec-rbac", nil)
	user := ns + "-user"
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &nsexec.Runner{Client: client}
	for _, tc := range []struct {
		via, want string
	}{
		{nsexec.ViaNode, `not allowed to create pods in namespace "` + ns + `"`},
		{nsexec.ViaEphemeral, `not allowed to patch pods/ephemeralcontainers in namespace "` + ns + `"`},
	} {
		_, err := r.Dump(context.Background(), nsexec.Request{Pod: podOnNode(t, c, ns), Via: tc.via, Image: image, NodeNamespace: ns, Timeout: 10 * time.Second})
		var perm *nsexec.PermissionError
		if !errors.As(err, &perm) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("via %s: %v, want a PermissionError saying %q", tc.via, err, tc.want)
		}
	}
	nodePodsGone(t, c, ns)
}

// An ephemeral container cannot be removed: a pod that is not Running gets
// none unless asked (--force).
func TestEphemeralRefusesPodNotRunning(t *testing.T) {
	c := testcluster.Get(t)
	ns := c.Namespace(t, "nsexec-pending", nil)
	p := podOnNode(t, c, ns)
	p.Status.Phase = corev1.PodPending
	r := &nsexec.Runner{Client: c.Client}
	_, err := r.Dump(context.Background(), nsexec.Request{Pod: p, Via: nsexec.ViaEphemeral, Image: image, Timeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("ephemeral container for a Pending pod: %v", err)
	}
}
