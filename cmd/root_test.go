package cmd

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// run executes `kubectl mesh args…` in process and returns its exit code and output.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRootCmd(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	root.SetArgs(args)
	return exitCode(root.Execute(), &errOut), out.String(), errOut.String()
}

// The client's version needs no cluster (--client); the cluster's part is
// checked on the real cluster (e2e).
func TestVersionOutputs(t *testing.T) {
	code, out, _ := run(t, "version", "--client", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	var v VersionReport
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("-o json does not parse: %v\n%s", err, out)
	}
	if v.APIVersion != render.APIVersion || v.Kind != "Version" || v.Version == "" || v.GoVersion == "" {
		t.Errorf("version report %+v", v)
	}
	if v.Cluster != nil {
		t.Errorf("--client read the cluster: %+v", v.Cluster)
	}
	code, out, _ = run(t, "version", "--client", "-o", "yaml")
	var y VersionReport
	if err := yaml.Unmarshal([]byte(out), &y); code != ExitOK || err != nil || y.Kind != "Version" {
		t.Errorf("-o yaml: exit %d, err %v\n%s", code, err, out)
	}
	code, out, _ = run(t, "version", "--client")
	if code != ExitOK || !strings.HasPrefix(out, "kubectl-mesh ") {
		t.Errorf("plain version: exit %d\n%s", code, out)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"version", "-o", "table"},
		{"version", "--no-such-flag"},
		{"version", "extra-argument"},
	} {
		code, _, errOut := run(t, args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, ExitUsage, errOut)
		}
		if !strings.HasPrefix(errOut, "error: ") {
			t.Errorf("%v: stderr %q does not start with error:", args, errOut)
		}
	}
}

func TestHelpShowsKubectlMeshAndKubectlFlags(t *testing.T) {
	code, out, _ := run(t, "version", "--help")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"kubectl mesh version", "--kubeconfig", "--context", "--namespace", "-v, --v"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "--log_dir") || strings.Contains(out, "--logtostderr") {
		t.Errorf("help shows klog flags other than -v:\n%s", out)
	}
}
