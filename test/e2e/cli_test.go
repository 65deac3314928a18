package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// meshBinary builds kubectl-mesh once per test run.
func meshBinary(t *testing.T, c *testcluster.Cluster) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "kubectl-mesh-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "kubectl-mesh")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/kubectl-mesh")
		cmd.Dir = c.RepoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("build kubectl-mesh: %v", buildErr)
	}
	return binPath
}

// result is one run of the built binary.
type result struct {
	stdout, stderr string
	code           int
}

// mesh runs `kubectl-mesh args…` against the local cluster, with stdin.
func mesh(t *testing.T, c *testcluster.Cluster, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(meshBinary(t, c), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=")
	cmd.Stdin = bytes.NewBufferString(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("run kubectl-mesh: %v", err)
	}
	return result{stdout: out.String(), stderr: errOut.String(), code: code}
}
