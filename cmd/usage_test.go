package cmd

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"
)

// kubeconfig writes a kubeconfig whose cluster is server.
func kubeconfig(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	s := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "` + server + `", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: t}
contexts:
- name: c
  context: {cluster: c, user: u, namespace: default}
current-context: c
`
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// closedPort is an address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// countingListener accepts connections, counts them and closes them.
func countingListener(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return l.Addr().String(), &n
}

// Every usage error exits 2 with its message before any request, whether
// the apiserver refuses connections or would accept them: each row, with
// its validation taken out, would connect (counted), or exit otherwise.
func TestUsageErrorsBeforeAnyConnection(t *testing.T) {
	dump := dumpFile
	if _, err := os.Stat(dump); err != nil {
		t.Fatalf("the dump the rows read: %v", err)
	}
	rows := []struct {
		name string
		args []string
		msg  string
	}{
		{"diagnose bad selector", []string{"diagnose", "-l", "a in (b"}, `-l "a in (b": unable to parse requirement`},
		{"why-injected bad selector", []string{"why-injected", "-l", "a in (b"}, `-l "a in (b": unable to parse requirement`},
		{"startup bad selector", []string{"startup", "-l", "a in (b"}, `-l "a in (b": unable to parse requirement`},
		{"audit bad selector", []string{"iptables", "audit", "-l", "a in (b"}, `-l "a in (b": unable to parse requirement`},
		{"diagnose -f missing", []string{"diagnose", "-f", "/nonexistent"}, `the path "/nonexistent" does not exist`},
		{"why-injected -f missing", []string{"why-injected", "-f", "/nonexistent"}, `the path "/nonexistent" does not exist`},
		{"--from-file missing", []string{"iptables", "--from-file", "/nonexistent"}, `the path "/nonexistent" does not exist`},
		{"--request-timeout", []string{"startup", "web", "--request-timeout", "banana"}, `invalid --request-timeout "banana"`},
		{"--request-timeout negative", []string{"diagnose", "web", "--request-timeout", "-1s"}, `invalid --request-timeout "-1s"`},
		{"diagnose three arguments", []string{"diagnose", "a", "b", "c"}, "expected POD, TYPE/NAME or TYPE NAME, got 3 arguments"},
		{"diagnose bad --sort-by", []string{"diagnose", "-A", "--sort-by", "{.name"}, `--sort-by "{.name"`},
		{"why-injected --sort-by with a POD", []string{"why-injected", "web", "--sort-by", ".name"}, "--sort-by orders a sweep's list"},
		{"startup bad --sort-by", []string{"startup", "-A", "--sort-by", "{.name"}, `--sort-by "{.name"`},
		{"why-injected three arguments", []string{"why-injected", "a", "b", "c"}, "expected POD, TYPE/NAME or TYPE NAME, got 3 arguments"},
		{"startup three arguments", []string{"startup", "a", "b", "c"}, "expected POD, TYPE/NAME or TYPE NAME, got 3 arguments"},
		{"iptables two arguments", []string{"iptables", "a", "b"}, "accepts at most 1 arg(s), received 2"},
		{"audit an argument", []string{"iptables", "audit", "web"}, `unknown command "web"`},
		{"iptables -n without a POD", []string{"iptables", "-n", "shop"}, "To audit every pod of namespace shop: kubectl mesh iptables audit -n shop"},
		{"iptables -A", []string{"iptables", "-A"}, "kubectl mesh iptables audit -A"},
		{"--from-file --interval", []string{"iptables", "--from-file", dump, "--interval", "5s"}, "--interval reads a live POD"},
		{"--from-file --via", []string{"iptables", "--from-file", dump, "--via", "node"}, "--via reads a live POD"},
		{"--from-file -c", []string{"iptables", "--from-file", dump, "-c", "istio-proxy"}, "--container reads a live POD"},
		{"--from-file --timeout", []string{"iptables", "--from-file", dump, "--timeout", "5s"}, "--timeout reads a live POD"},
		{"--from-file -n", []string{"iptables", "--from-file", dump, "-n", "shop"}, "--namespace reads a live POD"},
		{"--from-file -A", []string{"iptables", "--from-file", dump, "-A"}, "kubectl mesh iptables audit -A"},
		{"--dry-run=server", []string{"iptables", "web", "--dry-run=server"}, "--dry-run=server is not supported"},
		{"diagnose --dry-run without --rules", []string{"diagnose", "web", "--dry-run"}, "--dry-run prints what --rules or --connections would create"},
		{"diagnose -w on a POD", []string{"diagnose", "web", "-w"}, "--watch follows a sweep (-n, -l or -A)"},
		{"diagnose -w with --rules", []string{"diagnose", "-n", "shop", "-w", "--rules"}, "--watch follows a sweep (-n, -l or -A)"},
		{"diagnose -w with -f", []string{"diagnose", "-f", "-", "-w"}, "--watch follows a sweep (-n, -l or -A)"},
		{"why-injected -w on a POD", []string{"why-injected", "web", "-w"}, "--watch follows a sweep (-n, -l or -A)"},
		{"why-injected -w with --verify", []string{"why-injected", "-A", "-w", "--verify"}, "--watch follows a sweep (-n, -l or -A)"},
		{"diagnose -o", []string{"diagnose", "web", "-o", "xml"}, `unsupported output format "xml": use one of: json|yaml|wide`},
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			refused := kubeconfig(t, "https://"+closedPort(t))
			open, conns := countingListener(t)
			accepting := kubeconfig(t, "https://"+open)
			for _, kc := range []string{refused, accepting} {
				code, _, errOut := run(t, append(tc.args, "--kubeconfig", kc)...)
				if code != ExitUsage || !strings.HasPrefix(errOut, "error: ") || !strings.Contains(errOut, tc.msg) {
					t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, errOut, tc.msg)
				}
			}
			if n := conns.Load(); n != 0 {
				t.Errorf("%d connections to the apiserver before the usage error", n)
			}
		})
	}
}

// An apiserver that refuses the connection is said as kubectl says it, and
// client-go's klog lines (discovery's memcache errors) do not reach the user.
func TestConnectionRefusedReadsLikeKubectl(t *testing.T) {
	klog.ClearLogger()
	addr := closedPort(t)
	kc := kubeconfig(t, "https://"+addr)
	// klog writes to the process's stderr, not the command's.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	code, _, errOut := run(t, "startup", "deploy", "web", "--kubeconfig", kc) // TYPE NAME: discovery first
	klog.Flush()
	os.Stderr = stderr
	w.Close()
	leaked, _ := io.ReadAll(r)
	want := "The connection to the server " + addr + " was refused - did you specify the right host or port?\n"
	if code != ExitError || errOut != want {
		t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, errOut, want)
	}
	if len(leaked) > 0 {
		t.Errorf("klog lines reached stderr:\n%s", leaked)
	}
}

// The apiserver's warnings print as kubectl prints them: "Warning: …",
// once each, not as klog lines.
func TestWarningsPrintAsKubectl(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Warning", `299 - "policy/v1beta1 is going away"`)
		w.Header().Add("Warning", `299 - "policy/v1beta1 is going away"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"pods \"web\" not found"}`))
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	root := NewRootCmd(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	root.SetArgs([]string{"startup", "web", "--kubeconfig", kubeconfig(t, srv.URL)})
	_ = exitCode(root.Execute(), &errOut)
	if got := strings.Count(errOut.String(), "Warning: policy/v1beta1 is going away\n"); got != 1 || strings.Contains(errOut.String(), "warnings.go") {
		t.Errorf("the warning printed %d times (want once, as kubectl):\n%s", got, errOut.String())
	}
}
