package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"charm.land/lipgloss/v2"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// onTerminal runs the built binary on a pseudo-terminal of cols columns
// (script(1), colour left to --color=auto) and returns what the terminal
// received, lines without their carriage returns.
func onTerminal(t *testing.T, c *testcluster.Cluster, cols int, env []string, args ...string) string {
	t.Helper()
	quoted := make([]string, 0, len(args)+3)
	for _, a := range append([]string{meshBinary(t, c), "--kubeconfig", c.Kubeconfig}, args...) {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	shell := "stty cols " + strconv.Itoa(cols) + " rows 500; " + strings.Join(quoted, " ")
	cmd := exec.Command("script", "-qec", shell, "/dev/null")
	cmd.Env = append(append(os.Environ(), "TERM=xterm-256color"), env...)
	out, err := cmd.Output()
	if err != nil {
		if _, exit := err.(*exec.ExitError); !exit {
			t.Fatalf("script: %v", err)
		}
	}
	return strings.ReplaceAll(string(out), "\r\n", "\n")
}

var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// Every command's human output on real 80- and 120-column terminals: no line
// is wider than the terminal, the answer is in the first lines, colour is
// on; piped, the same commands keep one row per line. And a fix wrapped at 80
// columns still works when pasted into a shell.
func TestHumanOutputFitsTheTerminal(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "term", map[string]string{"istio-injection": "enabled"})
	plain := c.Namespace(t, "term-plain", nil)

	web := appDeployment(ns, "web", 1, nil)
	// Asks for injection with the annotation, which webhook selectors never see.
	reports := appDeployment(plain, "reports", 1, map[string]string{"sidecar.istio.io/inject": "true"})
	for _, d := range []*appsv1.Deployment{web, reports} {
		if _, err := c.Client.AppsV1().Deployments(d.Namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods := map[string]string{}
	for _, d := range []*appsv1.Deployment{web, reports} {
		pods[d.Name] = c.RunningPod(t, d.Namespace, "app="+d.Name, 120*time.Second)
	}
	file := writeManifest(t, web)

	commands := []struct {
		args []string
		// first: what one of the first lines says (the answer)
		first *regexp.Regexp
	}{
		{[]string{"why-injected", pods["web"], "-n", ns}, regexp.MustCompile(`^Verdict: Injected by revision default`)},
		{[]string{"why-injected", "deploy/web", "-n", ns}, regexp.MustCompile(`^Verdict: Pods created from this template will be injected`)},
		{[]string{"why-injected", pods["reports"], "-n", plain}, regexp.MustCompile(`^Verdict: Not injected`)},
		{[]string{"why-injected", "-n", ns}, regexp.MustCompile(`^(NAMESPACE|POD: |NAMESPACE: )`)},
		{[]string{"why-injected", "-A"}, regexp.MustCompile(`^(NAMESPACE|NAMESPACE: )`)},
		{[]string{"why-injected", "-f", file}, regexp.MustCompile(`^Verdict: Pods created from this template will be injected`)},
		{[]string{"startup", pods["web"], "-n", ns}, regexp.MustCompile(`^Mesh: istio \(native sidecar\); init: completed; order: ok`)},
		{[]string{"startup", "-n", ns}, regexp.MustCompile(`^Mesh: istio`)}, // its one pod: the detailed view
		{[]string{"iptables", pods["web"], "-n", ns, "--trace", "out:10.96.0.10:443"}, regexp.MustCompile(`^Drift: none`)},
		{[]string{"diagnose", pods["web"], "-n", ns, "--rules"}, regexp.MustCompile(`every check that ran passed`)},
		{[]string{"diagnose", "-n", ns}, regexp.MustCompile(`every check that ran passed`)}, // its one pod: the detailed view
		{[]string{"diagnose", "-A"}, regexp.MustCompile(`^[0-9]+ pods(, [0-9]+ workloads?)? diagnosed: `)},
	}
	lines := 0
	for _, cmd := range commands {
		for _, cols := range []int{80, 120} {
			out := onTerminal(t, c, cols, nil, cmd.args...)
			if detail := !strings.HasPrefix(cmd.first.String(), "^(NAMESPACE"); detail && !sgr.MatchString(out) {
				t.Errorf("%v at %d columns: no colour on a terminal", cmd.args, cols)
			}
			all := strings.Split(strings.TrimRight(out, "\n"), "\n")
			for i, l := range all {
				lines++
				if w := lipgloss.Width(l); w > cols {
					t.Errorf("%v at %d columns: line %d is %d wide: %q", cmd.args, cols, i+1, w, sgr.ReplaceAllString(l, ""))
				}
			}
			// What a command is about to create is said first, on stderr
			// (TestAnnouncesWhatItCreates): the answer comes right after.
			answer := all
			if len(all) > 0 && (strings.HasPrefix(sgr.ReplaceAllString(all[0], ""), "adding ephemeral container ") || strings.HasPrefix(sgr.ReplaceAllString(all[0], ""), "creating pod ")) {
				for i, l := range all {
					if strings.Contains(l, "until the pod is deleted") || strings.Contains(l, "Ctrl-C") {
						answer = all[i+1:]
						break
					}
				}
			}
			found := false
			for _, l := range answer[:min(4, len(answer))] {
				found = found || cmd.first.MatchString(sgr.ReplaceAllString(l, ""))
			}
			if !found {
				t.Errorf("%v at %d columns: the first lines do not say %q:\n%s", cmd.args, cols, cmd.first, sgr.ReplaceAllString(out, ""))
			}
		}
		// Piped: never wrapped, one table row per line, no colour.
		r := mesh(t, c, "", cmd.args...)
		if strings.Contains(r.stdout, "\x1b") {
			t.Errorf("%v piped: escape codes", cmd.args)
		}
	}
	r := mesh(t, c, "", "why-injected", "-A")
	for _, p := range []string{pods["web"], pods["reports"]} {
		if !regexp.MustCompile(`(?m)^\S+\s+` + regexp.QuoteMeta(p) + `\s+(yes|no)\s+(yes|no|unknown)\s+\S+\s+\S`).MatchString(r.stdout) {
			t.Errorf("piped -A: pod %s is not one row with its reason:\n%s", p, r.stdout)
		}
	}

	// The fix, as an 80-column terminal shows it, pasted into a shell.
	out := sgr.ReplaceAllString(onTerminal(t, c, 80, []string{"NO_COLOR=1"}, "why-injected", pods["reports"], "-n", plain), "")
	var fix []string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "Fix:"):
			fix = append(fix, strings.TrimSpace(strings.TrimPrefix(l, "Fix:")))
		case len(fix) > 0 && strings.HasPrefix(l, "         "):
			fix = append(fix, strings.TrimSpace(l))
		case len(fix) > 0:
			goto run
		}
	}
run:
	if len(fix) < 2 || !strings.HasPrefix(fix[0], "kubectl patch deployment reports") {
		t.Fatalf("the fix is not a kubectl patch wrapped over several lines at 80 columns:\n%s", out)
	}
	sh := exec.Command("bash", "-c", strings.Join(fix, "\n"))
	sh.Env = append(os.Environ(), "PATH="+filepath.Dir(c.KubectlPath)+":"+os.Getenv("PATH"), "KUBECONFIG="+c.Kubeconfig)
	if b, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the pasted fix failed: %v\n%s\n%s", err, strings.Join(fix, "\n"), b)
	}
	d, err := c.Client.AppsV1().Deployments(plain).Get(ctx, "reports", metav1.GetOptions{})
	if err != nil || d.Spec.Template.Labels["sidecar.istio.io/inject"] != "true" {
		t.Errorf("after the pasted fix the template's labels are %v (%v)", d.Spec.Template.Labels, err)
	}
	testreport.Count(t, "%d commands on 80- and 120-column terminals, %d lines within the width; a fix wrapped over %d lines ran as pasted", len(commands), lines, len(fix))
}

// The iptables view on real 80- and 120-column terminals is byte for byte the
// golden file the renderer tests keep for that width (cmd/testdata): the
// goldens are what a terminal of that size shows.
func TestTerminalMatchesGolden(t *testing.T) {
	c := testcluster.Get(t)
	dump := filepath.Join(c.RepoRoot, "explain", "capture", "testdata", "istio-default.nft.save")
	for _, cols := range []int{80, 120} {
		out := onTerminal(t, c, cols, []string{"NO_COLOR=1"}, "iptables", "--from-file", dump, "--pod-ip", "10.1.2.3",
			"--expect-args", `-p 15001 -z 15006 -u 1337 -m REDIRECT -i "*" -x "" -b "*" -d 15090,15021,15020 -x 10.96.0.0/12`,
			"--trace", "out:10.96.0.10:443", "--trace", "in:8080", "--trace", "out:10.1.2.3:8080", "--trace", "out:10.96.0.1:443,uid=1337")
		want, err := os.ReadFile(filepath.Join(c.RepoRoot, "cmd", "testdata", "iptables."+strconv.Itoa(cols)+".golden"))
		if err != nil {
			t.Fatal(err)
		}
		if out != string(want) {
			t.Errorf("at %d columns the terminal shows something else than cmd/testdata/iptables.%d.golden:\n--- terminal\n%s\n--- golden\n%s", cols, cols, out, want)
		}
	}
}
