package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// syncBuffer is a buffer a process writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// `diagnose -n NS -w` follows a rollout as kubectl get -w does: a
// Deployment created after it started shows up passing, its broken
// rollout (an image the node cannot run) shows up failing, each as a row
// printed when its answer changes; Ctrl-C ends it with exit 130.
func TestDiagnoseWatch(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	bin := meshBinary(t, c)
	checks := 0
	defer func() {
		testreport.Count(t, "diagnose -w: rows printed as a rollout's answers change; %d checks", checks)
	}()
	ns := c.Namespace(t, "kmwatch", map[string]string{"istio-injection": "enabled"})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out, errOut, wiOut, wiErr syncBuffer
	cmd := exec.Command(bin, "--kubeconfig", c.Kubeconfig, "diagnose", "-n", ns, "-w")
	cmd.Env = append(cmd.Environ(), "NO_COLOR=1")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	// why-injected -w beside it: the same rollout, its own rows.
	wi := exec.Command(bin, "--kubeconfig", c.Kubeconfig, "why-injected", "-n", ns, "-w")
	wi.Env = cmd.Env
	wi.Stdout, wi.Stderr = &wiOut, &wiErr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := wi.Start(); err != nil {
		t.Fatal(err)
	}
	done, wiDone := make(chan error, 1), make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	go func() { wiDone <- wi.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
		if wi.ProcessState == nil {
			_ = wi.Process.Kill()
		}
	}()
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		checks++
		if err := catPoll(ctx, what, func(context.Context) (bool, string) {
			s := out.String()
			return ok(s), s + errOut.String()
		}); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	waitFor("the sweep of an empty namespace", func(string) bool { return strings.Contains(errOut.String(), "No pods found.") })
	one := int32(1)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: catLean()},
				Spec: appPod("web", nil, nil).Spec}}}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	row := func(status string) func(string) bool {
		return func(s string) bool {
			for _, l := range strings.Split(s, "\n") {
				f := strings.Fields(l)
				if len(f) >= 3 && f[0] == ns && strings.HasPrefix(f[1], "web-") && f[2] == status {
					return true
				}
			}
			return false
		}
	}
	waitFor("a passing row for web's pod", row("pass"))
	if _, err := c.Client.AppsV1().Deployments(ns).Patch(ctx, "web", "application/strategic-merge-patch+json",
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"kmesh.local/mesh-test:no-such-tag"}]}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("a failing row for the new pod", row("fail"))
	// why-injected's rows: one per pod of the rollout, each injected.
	checks++
	if err := catPoll(ctx, "why-injected -w rows for both pods", func(context.Context) (bool, string) {
		pods := map[string]bool{}
		for _, l := range strings.Split(wiOut.String(), "\n") {
			f := strings.Fields(l)
			if len(f) >= 4 && f[0] == ns && strings.HasPrefix(f[1], "web-") && f[2] == "yes" {
				pods[f[1]] = true
			}
		}
		return len(pods) >= 2, wiOut.String() + wiErr.String()
	}); err != nil {
		t.Errorf("why-injected -w: %v", err)
	}
	for _, w := range []struct {
		name   string
		cmd    *exec.Cmd
		done   chan error
		stderr *syncBuffer
	}{{"diagnose -w", cmd, done, &errOut}, {"why-injected -w", wi, wiDone, &wiErr}} {
		checks++
		if err := w.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-w.done:
			t.Logf("%s ended: %v", w.name, err) // its exit code is checked below
		case <-time.After(20 * time.Second):
			t.Fatalf("%s did not stop on SIGINT", w.name)
		}
		checks++
		if code := w.cmd.ProcessState.ExitCode(); code != 130 {
			t.Errorf("%s: exit %d after SIGINT, want 130\n%s", w.name, code, w.stderr.String())
		}
	}
	t.Logf("diagnose -w printed:\n%s\nwhy-injected -w printed:\n%s", out.String(), wiOut.String())
}
