package render

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"charm.land/lipgloss/v2"
)

// A long command wraps to the terminal and, pasted into a shell as
// printed, passes the same arguments, byte for byte apart from the JSON
// whitespace a break inside a quoted patch adds: a compact JSON patch breaks
// after its commas (never inside a string), other quoted words only at
// spaces, and a quoted script not at all.
func TestCommandWrapsAndRunsAsPasted(t *testing.T) {
	cmds := []string{
		`kubectl patch deployment/web -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyCPULimit":"800m","sidecar.istio.io/proxyMemoryLimit":"384Mi"}}}}}'`,
		`kubectl patch deployment/web -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/proxy.istio.io~1config"},{"op":"add","path":"/x","value":"a, b, c"}]'`,
		`kubectl create -n shop -f - <<<'{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}'`,
		`kubectl exec -n shop web-1 -c worker -- /bin/sh -c 'until echo | nc 127.0.0.1 15021; do sleep 1; done; echo a long line that goes on and on'`,
	}
	checks := 0
	for _, width := range []int{80, 100} {
		for _, cmd := range cmds {
			var out bytes.Buffer
			p := &Printer{Out: &out, Width: width}
			p.Command("Fix:     ", cmd)
			for _, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
				checks++
				// Over-wide only where nothing may break: a quoted
				// script, one JSON string.
				if w := lipgloss.Width(l); w > width && !strings.Contains(l, "nc 127.0.0.1") && !strings.Contains(l, "~1config") {
					t.Errorf("width %d: %q is %d wide", width, l, w)
				}
			}
			want := shellArgs(t, cmd)
			got := shellArgs(t, strings.TrimPrefix(out.String(), "Fix:     "))
			checks++
			if len(got) != len(want) {
				t.Fatalf("width %d: %d arguments, want %d:\n%s", width, len(got), len(want), out.String())
			}
			for i := range want {
				if strings.Join(strings.Fields(got[i]), "") != strings.Join(strings.Fields(want[i]), "") || !strings.Contains(want[i], "{") && got[i] != want[i] {
					t.Errorf("width %d: argument %d is %q, want %q", width, i, got[i], want[i])
				}
				if strings.Contains(want[i], `"a, b, c"`) && !strings.Contains(got[i], `"a, b, c"`) {
					t.Errorf("width %d: a JSON string was broken: %q", width, got[i])
				}
			}
		}
	}
	t.Logf("%d checks", checks)
}

// shellArgs are the arguments bash passes to kubectl for script.
func shellArgs(t *testing.T, script string) []string {
	t.Helper()
	out, err := exec.Command("bash", "-c", `kubectl() { printf '%s\0' "$@"; }; `+script).Output()
	if err != nil {
		t.Fatalf("%v: %s", err, script)
	}
	return strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
}
