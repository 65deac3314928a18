package cmd

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

const defaultIstioArgs = `-p 15001 -z 15006 -u 1337 -m REDIRECT -i "*" -x "" -b "*" -d 15090,15021,15020`

var dumpFile = filepath.Join("..", "explain", "capture", "testdata", "istio-default.nft.save")

// The human output: the annotated tree with counters, the drift and the traces.
func TestIptablesGolden(t *testing.T) {
	defer func() { render.ForceWidth = 0 }()
	for _, w := range widths {
		render.ForceWidth = w
		code, out, errOut := run(t, "iptables", "--from-file", dumpFile, "--pod-ip", "10.1.2.3",
			"--expect-args", defaultIstioArgs+" -x 10.96.0.0/12",
			"--trace", "out:10.96.0.10:443", "--trace", "in:8080", "--trace", "out:10.1.2.3:8080", "--trace", "out:10.96.0.1:443,uid=1337")
		if code != ExitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		name := "iptables.piped.golden"
		if w > 0 {
			name = fmt.Sprintf("iptables.%d.golden", w)
			for i, line := range strings.Split(out, "\n") {
				if lipgloss.Width(line) > w {
					t.Errorf("at %d columns, line %d is %d wide: %q", w, i+1, lipgloss.Width(line), line)
				}
			}
		}
		golden(t, name, []byte(out))
		if lines := strings.SplitN(out, "\n", 3); !strings.HasPrefix(lines[0], "Drift: 1 missing") {
			t.Errorf("at width %d the drift is not on the first line:\n%s", w, out)
		}
	}
}

func TestIptablesJSON(t *testing.T) {
	code, out, errOut := run(t, "iptables", "--from-file", dumpFile, "--pod-ip", "10.1.2.3", "--expect-args", defaultIstioArgs,
		"--trace", "out:10.96.0.10:53/udp", "--trace", "in:15021", "--trace", "out:10.96.0.10:443", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		APIVersion, Kind string
		Dumps            []struct {
			Backend, Family string
			Tables          []struct {
				Name   string
				Chains []struct {
					Name  string
					Rules []struct {
						Rule, Annotation string
						Packets          uint64
					}
				}
			}
		}
		Drift  struct{ Missing, Extra []string }
		Traces []struct {
			Spec, Verdict string
			Port          int
			Path          []struct{ Table, Chain, Rule string }
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Kind != "CaptureReport" || doc.Dumps[0].Backend != "nft" || doc.Drift.Missing == nil || len(doc.Drift.Missing)+len(doc.Drift.Extra) != 0 {
		t.Errorf("kind %q backend %q drift %+v", doc.Kind, doc.Dumps[0].Backend, doc.Drift)
	}
	if r := doc.Dumps[0].Tables[0].Chains[0].Rules; len(r) == 0 || r[0].Annotation == "" {
		t.Errorf("first chain's rules carry no annotation: %+v", r)
	}
	want := []struct {
		verdict string
		port    int
	}{{"direct", 0}, {"direct", 0}, {"redirect", 15001}}
	for i, w := range want {
		if tr := doc.Traces[i]; tr.Verdict != w.verdict || tr.Port != w.port || len(tr.Path) == 0 {
			t.Errorf("trace %d %s: %s %d, want %s %d", i, tr.Spec, tr.Verdict, tr.Port, w.verdict, w.port)
		}
	}
}

// Every form a person may paste reads to the same explanation: the rules
// of the save fixture, listed by the real iptables tools
// (hack/testdata/pasted-forms.sh), agree with --expect-args and trace alike.
func TestIptablesPastedForms(t *testing.T) {
	dir := filepath.Join("..", "explain", "capture", "testdata", "pasted", "istio-default.nft.counted")
	for _, form := range []string{"source.save", "S.txt", "S.prompt.txt", "L-v.txt", "L-vn.prompt.txt", "L-vnx.txt"} {
		code, out, errOut := run(t, "iptables", "--from-file", filepath.Join(dir, form), "--pod-ip", "10.1.2.3", "--expect-args", defaultIstioArgs,
			"--trace", "out:10.96.0.10:443", "--trace", "in:8080", "-o", "json")
		if code != ExitOK {
			t.Fatalf("%s: exit %d: %s", form, code, errOut)
		}
		var doc struct {
			Dumps  []struct{ Form, Family string }
			Drift  struct{ Missing, Extra []string }
			Notes  []string
			Traces []struct {
				Verdict string
				Port    int
			}
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%s: %v", form, err)
		}
		want := map[string]string{"source.save": "iptables-save", "S.txt": "iptables -S", "S.prompt.txt": "iptables -S"}[form]
		if want == "" {
			want = "iptables -L"
		}
		if len(doc.Dumps) != 1 || doc.Dumps[0].Form != want || len(doc.Drift.Missing)+len(doc.Drift.Extra) != 0 ||
			len(doc.Traces) != 2 || doc.Traces[0].Port != 15001 || doc.Traces[1].Port != 15006 {
			t.Errorf("%s: %+v", form, doc)
		}
		if note := strings.Join(doc.Notes, "\n"); (want != "iptables-save") != strings.Contains(note, "read from "+want) {
			t.Errorf("%s: notes %q", form, doc.Notes)
		}
		if form == "L-v.txt" && !strings.Contains(strings.Join(doc.Notes, "\n"), "rounded") {
			t.Errorf("L-v.txt: no word of its rounded counters: %q", doc.Notes)
		}
	}
}

// Both families' listings pasted one after the other, each after its
// command line: the two dumps, as two files would be.
func TestIptablesPastedBothFamilies(t *testing.T) {
	dir := filepath.Join("..", "explain", "capture", "testdata", "pasted")
	l4, _ := os.ReadFile(filepath.Join(dir, "istio-default.nft", "L-vn.prompt.txt"))
	l6, _ := os.ReadFile(filepath.Join(dir, "istio-default.v6.nosave-counters", "L-vn.prompt.txt"))
	s6, _ := os.ReadFile(filepath.Join(dir, "istio-default.v6.nosave-counters", "S.prompt.txt"))
	// One form at a time: -L then -S is refused.
	mixed := filepath.Join(t.TempDir(), "mixed")
	if err := os.WriteFile(mixed, append(append([]byte{}, l4...), s6...), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "iptables", "--from-file", mixed); code != ExitUsage || !strings.Contains(errOut, "iptables -S output after iptables -L output") {
		t.Errorf("-L and -S in one paste: exit %d, %s", code, errOut)
	}
	p := filepath.Join(t.TempDir(), "both")
	if err := os.WriteFile(p, append(l4, l6...), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "iptables", "--from-file", p, "--pod-ip", "10.1.2.3", "--pod-ip", "fd00::3", "--expect-args", defaultIstioArgs+" --dual-stack", "-o", "json")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		Dumps []struct{ Family, Form string }
		Drift struct{ Missing, Extra []string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Dumps) != 2 || doc.Dumps[0].Family != "ipv4" || doc.Dumps[1].Family != "ipv6" || len(doc.Drift.Missing)+len(doc.Drift.Extra) != 0 {
		t.Errorf("%+v", doc)
	}
	// With a second --from-file, a paste holding both families is refused.
	code, _, errOut = run(t, "iptables", "--from-file", p, "--from-file", dumpFile)
	if code != ExitUsage || !strings.Contains(errOut, "holds both families' rules") {
		t.Errorf("both families and a second file: exit %d, %s", code, errOut)
	}
}

func TestIptablesBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	full, _ := os.ReadFile(dumpFile)
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"no input", []string{"iptables"}, "give a POD, or the rules to read with --from-file"},
		{"-n without a POD", []string{"iptables", "-n", "shop"}, "To audit every pod of namespace shop: kubectl mesh iptables audit -n shop"},
		{"-A on iptables itself", []string{"iptables", "-A"}, "its own command: kubectl mesh iptables audit -A"},
		{"-l on iptables itself", []string{"iptables", "-l", "app=web"}, "its own command: kubectl mesh iptables audit -l app=web"},
		{"--from-file with live flags", []string{"iptables", "--from-file", dumpFile, "--interval", "5s", "-c", "istio-proxy"}, "--container, --interval read a live POD; --from-file reads a dump"},
		{"--from-file with -n", []string{"iptables", "--from-file", dumpFile, "-n", "shop"}, "--namespace reads a live POD"},
		{"--from-file with --dry-run", []string{"iptables", "--from-file", dumpFile, "--dry-run"}, "--dry-run reads a live POD"},
		{"--dry-run=server", []string{"iptables", "mypod", "--dry-run=server"}, "--dry-run=server is not supported"},
		{"--dry-run with -o json", []string{"iptables", "mypod", "--dry-run", "-o", "json"}, "--dry-run prints what would be created as YAML"},
		{"--from-file that does not exist", []string{"iptables", "--from-file", "/nonexistent"}, `the path "/nonexistent" does not exist`},
		{"not iptables", []string{"iptables", "--from-file", write("text", "hello\n")}, "line 1: not a form of rules kubectl-mesh reads (accepted: iptables-save"},
		{"forms mixed", []string{"iptables", "--from-file", write("mixed", string(full)+"-P PREROUTING ACCEPT\n")}, "line 31: iptables -S output after iptables-save output (from line 1)"},
		{"-S table unknown", []string{"iptables", "--from-file", write("chain", "-N ISTIO_OUTPUT\n-A ISTIO_OUTPUT -j RETURN\n")}, "line 1: cannot tell which table"},
		{"truncated", []string{"iptables", "--from-file", write("half", string(full[:strings.Index(string(full), "COMMIT")]))}, "truncated dump"},
		{"unknown flag in --expect-args", []string{"iptables", "--from-file", dumpFile, "--expect-args", "-p 15001 --frobnicate"}, "unknown flag: --frobnicate"},
		{"bad quoting in --expect-args", []string{"iptables", "--from-file", dumpFile, "--expect-args", `-i "*`}, "unterminated"},
		{"malformed trace", []string{"iptables", "--from-file", dumpFile, "--trace", "out:10.0.0.1"}, "an outbound trace needs IP:PORT"},
		{"trace without pod ip", []string{"iptables", "--from-file", dumpFile, "--trace", "in:8080"}, "no pod address"},
		{"bad pod ip", []string{"iptables", "--from-file", dumpFile, "--pod-ip", "ten"}, `--pod-ip "ten"`},
		{"two v4 dumps", []string{"iptables", "--from-file", dumpFile, "--from-file", dumpFile}, "both ipv4"},
		{"POD and --from-file", []string{"iptables", "mypod", "--from-file", dumpFile}, "give either a POD or --from-file"},
		{"bad --via", []string{"iptables", "mypod", "--via", "ssh"}, `--via "ssh": ephemeral or node`},
		{"--istio-version not a version", []string{"iptables", "--from-file", dumpFile, "--istio-version", "banana"}, `"banana" is not an Istio version`},
		{"--istio-version half a version", []string{"iptables", "mypod", "--istio-version", "1.x"}, `"1.x" is not an Istio version`},
		{"--istio-version for an audit", []string{"iptables", "audit", "-A", "--istio-version", "1.24"}, "unknown flag: --istio-version"},
		{"audit -o raw", []string{"iptables", "audit", "-A", "-o", "raw"}, `unsupported output format "raw": use one of: json|yaml`},
		{"audit with a POD", []string{"iptables", "audit", "web"}, "unknown command \"web\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(t, tc.args...)
			if code != ExitUsage || !strings.Contains(errOut, tc.msg) {
				t.Errorf("exit %d, stderr %q, want exit 2 and %q", code, errOut, tc.msg)
			}
		})
	}
	// A dump with no Istio chains is explained, with a note.
	code, out, _ := run(t, "iptables", "--from-file", write("plain", "*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -d 10.0.0.0/8 -j RETURN\nCOMMIT\n"))
	if code != ExitOK || !strings.Contains(out, "no Istio (ISTIO_*) or Linkerd (PROXY_INIT_*) chains") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// validateFlags takes what a live pod will settle (its addresses) and
// refuses what no pod can: it runs before any request.
func TestIptablesValidateFlagsBeforeAnyRequest(t *testing.T) {
	ok := []*IptablesOptions{
		{Pod: "web", Via: "ephemeral", Timeout: time.Minute, Traces: []string{"in:8080", "out:10.0.0.1:443,uid=1337"}},
		{Pod: "web", Via: "node", Timeout: time.Minute, Output: "raw"},
		{FromFiles: []string{"-"}, Via: "ephemeral", Timeout: time.Minute, PodIPs: []string{"10.1.2.3"}, Traces: []string{"in:8080"}},
	}
	for _, o := range ok {
		if err := o.validateFlags(false); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	bad := []struct {
		o     *IptablesOptions
		fleet bool
	}{
		{&IptablesOptions{Pod: "web", Via: "ephemeral", Timeout: time.Minute, Output: "xml"}, false},
		{&IptablesOptions{Pod: "web", Via: "ephemeral", Timeout: time.Minute, Traces: []string{"garbage"}}, false},
		{&IptablesOptions{Pod: "web", Via: "bogus", Timeout: time.Minute}, false},
		{&IptablesOptions{Pod: "web", Via: "ephemeral", Timeout: 0}, false},
		{&IptablesOptions{Pod: "web", Via: "ephemeral", Timeout: time.Minute, AllNamespaces: true}, false},
		{&IptablesOptions{Pod: "web", Via: "ephemeral", Timeout: time.Minute, expectSet: true, ExpectArgs: "-p 'x"}, false},
		{&IptablesOptions{FromFiles: []string{"-"}, Via: "ephemeral", Timeout: time.Minute, Traces: []string{"in:8080"}}, false},
		{&IptablesOptions{Via: "ephemeral", Timeout: time.Minute, AllNamespaces: true}, false},
		{&IptablesOptions{FromFiles: []string{"-"}, Via: "ephemeral", Timeout: time.Minute, changed: func(f string) bool { return f == "timeout" }}, false},
		{&IptablesOptions{Via: "ephemeral", Timeout: time.Minute, Output: "xml"}, true},
		{&IptablesOptions{Pod: "web", Via: "ephemeral", Timeout: time.Minute, DryRun: "server"}, false},
		{&IptablesOptions{Via: "ephemeral", Timeout: time.Minute, Parallel: -1}, true},
		{&IptablesOptions{Via: "ephemeral", Timeout: time.Minute, Parallel: 65}, true},
	}
	for _, b := range bad {
		var usage *UsageError
		if err := b.o.validateFlags(b.fleet); !errors.As(err, &usage) {
			t.Errorf("%+v (fleet %v): %v, want a usage error", b.o, b.fleet, err)
		}
	}
}

// The rules of each Istio release are compared with that release's model:
// a healthy 1.24 pod has no drift against 1.24 (and would against the
// newest release), and Istio 1.6, outside the model, is unknown: explained
// and traced, never drift. Both dumps were written by the real binaries
// (explain/capture/testdata, hack/testdata/istio-releases.sh).
func TestIptablesIstioRelease(t *testing.T) {
	const args = `-p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x '' -b '*' -d 15090,15021,15020`
	dump124 := "../explain/capture/testdata/releases/1.24/05-dns.v4.save"
	dump16 := "../explain/capture/testdata/outside/1.6/default.v4.save"
	dump16S := "../explain/capture/testdata/outside/1.6/default.nat.S"
	checked := 0
	for _, tc := range []struct {
		name      string
		args      []string
		want      []string
		wantDrift string // JSON: "none", "drift" or "unknown"
	}{
		{"1.24 against 1.24", []string{"--from-file", dump124, "--istio-version", "1.24.6", "--nameserver", "10.96.0.10", "--expect-args", args + " --redirect-dns"},
			[]string{"Drift: none", "in Istio 1.24.6 (--istio-version)"}, "none"},
		{"1.24 against the newest", []string{"--from-file", dump124, "--nameserver", "10.96.0.10", "--expect-args", args + " --redirect-dns"},
			[]string{"missing", "no version given: the newest modelled release"}, "drift"},
		{"1.6: no model", []string{"--from-file", dump16, "--istio-version", "1.6.0", "--pod-ip", "10.250.0.2", "--expect-args", args, "--trace", "in:8080"},
			[]string{"Drift: unknown: no rule model for Istio 1.6.0", "explained and traced, not compared", "to port 22", "Trace in:8080: inbound TCP to 10.250.0.2:8080 is redirected to port 15006"}, "unknown"},
		// As the articles show it: `iptables -t nat -S` of the pod, and its
		// istio-init arguments; the version from --istio-version.
		{"1.6 pasted as iptables -S", []string{"--from-file", dump16S, "--istio-version", "1.6.0", "--pod-ip", "10.250.0.2", "--expect-args", args, "--trace", "in:8080", "--trace", "out:10.96.0.1:443"},
			[]string{"Drift: unknown: no rule model for Istio 1.6.0", "to port 22", "Trace in:8080: inbound TCP to 10.250.0.2:8080 is redirected to port 15006",
				"Trace out:10.96.0.1:443: outbound TCP to 10.96.0.1:443 is redirected to port 15001"}, "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(t, append([]string{"iptables"}, tc.args...)...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			for _, w := range tc.want {
				checked++
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			code, js, errOut := run(t, append([]string{"iptables", "-o", "json"}, tc.args...)...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var doc struct {
				Drift *struct {
					Missing []string `json:"missing"`
					Extra   []string `json:"extra"`
				} `json:"drift"`
				RuleModel   *struct{ Minor int } `json:"ruleModel"`
				NoRuleModel string               `json:"noRuleModel"`
			}
			if err := json.Unmarshal([]byte(js), &doc); err != nil {
				t.Fatal(err)
			}
			got := "unknown"
			switch {
			case doc.Drift != nil && len(doc.Drift.Missing)+len(doc.Drift.Extra) == 0:
				got = "none"
			case doc.Drift != nil:
				got = "drift"
			}
			checked++
			if got != tc.wantDrift || (got == "unknown") != (doc.NoRuleModel != "" && doc.RuleModel == nil) {
				t.Errorf("JSON drift %s (noRuleModel %q, ruleModel %v), want %s", got, doc.NoRuleModel, doc.RuleModel, tc.wantDrift)
			}
		})
	}
	t.Logf("%d answers checked", checked)
}

// An empty dump is what iptables-save prints for a network namespace without
// a table: no rules, compared as such (a pod its CNI plugin skipped has every
// rule missing), and beside an IPv4 dump it is the IPv6 one.
func TestIptablesEmptyDump(t *testing.T) {
	const args = `-p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x '' -b '*' -d 15090,15021,15020`
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "iptables", "--from-file", empty, "--expect-args", args, "--pod-ip", "10.1.2.3")
	if code != ExitOK || !strings.Contains(out, "Drift: 18 missing") || !strings.Contains(out, "empty: no table at all") {
		t.Errorf("an empty dump alone: exit %d: %s%s", code, out, errOut)
	}
	v4 := "../explain/capture/testdata/releases/1.24/01-default.v4.save"
	code, out, errOut = run(t, "iptables", "--from-file", v4, "--from-file", empty, "--istio-version", "1.24", "--expect-args", args, "--pod-ip", "10.250.0.2")
	if code != ExitOK || !strings.Contains(out, "Drift: none") {
		t.Errorf("an empty IPv6 dump beside an IPv4 one: exit %d: %s%s", code, out, errOut)
	}
	// A dual-stack pod whose IPv6 dump is not given: IPv6 is said to be
	// not compared, not passed over.
	v4ds := "../explain/capture/testdata/releases/1.24/03-dual-stack.v4.save"
	code, out, _ = run(t, "iptables", "--from-file", v4ds, "--istio-version", "1.24", "--expect-args", args+" --dual-stack", "--pod-ip", "10.250.0.2", "--pod-ip", "fd00:250::2")
	if code != ExitOK || !strings.Contains(out, "no ipv6 dump was given: ipv6 is not compared") {
		t.Errorf("a missing IPv6 dump: exit %d: %s", code, out)
	}
}

// The red team's cases (explain/capture/testdata/redteam-rules: real dumps
// of real istio-iptables binaries, healthy or with a fault planted, from the
// round that scored the release model): each healthy one reads "Drift:
// none", each fault reports drift, a malformed paste is refused.
func TestIptablesRedTeamRules(t *testing.T) {
	dirs, err := filepath.Glob("../explain/capture/testdata/redteam-rules/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	right := 0
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "case"))
		if err != nil {
			t.Fatal(err)
		}
		c := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ": "); ok {
				c[k] = v
			} else if k, ok := strings.CutSuffix(line, ":"); ok {
				c[k] = ""
			}
		}
		args := []string{"iptables", "--istio-version", c["release"], "--expect-args", strings.TrimSpace(c["env"] + " " + c["args"])}
		for _, f := range strings.Fields(c["files"]) {
			args = append(args, "--from-file", filepath.Join(dir, f))
		}
		for _, ip := range strings.Fields(c["podips"]) {
			args = append(args, "--pod-ip", ip)
		}
		for _, ns := range strings.Fields(c["nameservers"]) {
			args = append(args, "--nameserver", ns)
		}
		code, out, errOut := run(t, args...)
		first := strings.SplitN(out, "\n", 2)[0]
		ok := false
		switch c["expect"] {
		case "none":
			ok = code == ExitOK && strings.HasPrefix(first, "Drift: none")
		case "drift":
			ok = code == ExitOK && strings.HasPrefix(first, "Drift: ") && !strings.HasPrefix(first, "Drift: none") && !strings.HasPrefix(first, "Drift: unknown")
		case "refused":
			ok = code == ExitUsage
		}
		if !ok {
			t.Errorf("%s (%s): want %s; exit %d: %s %s", filepath.Base(dir), c["finding"], c["expect"], code, first, errOut)
			continue
		}
		right++
	}
	testreport.Count(t, "red team of the release model: %d of %d of its cases (real dumps, healthy and faulty) answered right", right, len(dirs))
}
