package cmd

import (
	"strings"
	"testing"
)

// kubectl's output manners, on the catalogue (no cluster needed): -o
// jsonpath, go-template and custom-columns through cli-runtime's and
// kubectl's printers, --no-headers on tables and custom columns; a template
// that does not parse, or a file that cannot be read, is a usage error.
func TestKubectlOutputManners(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		args        []string
		first, rest string
	}{
		{args: []string{"-o", "jsonpath={.items[0].code}"}, first: "KM-INJ-001"},
		{args: []string{"-o", "jsonpath={range .items[*]}{.code}{\"\\n\"}{end}"}, first: "KM-INJ-001", rest: "KM-CONN-"},
		{args: []string{"-o", "go-template={{range .items}}{{.code}} {{end}}"}, first: "KM-INJ-001 KM-INJ-002"},
		{args: []string{"-o", "custom-columns=CODE:.code,STATUS:.status"}, first: "CODE ", rest: "KM-INJ-001 "},
		{args: []string{"-o", "custom-columns=CODE:.code,STATUS:.status", "--no-headers"}, first: "KM-INJ-001 "},
		{args: []string{"--no-headers"}, first: "KM-INJ-001 "},
		{args: nil, first: "CODE "},
	} {
		code, out, errOut := run(t, append([]string{"diagnose", "--list-checks"}, tc.args...)...)
		checks++
		if code != ExitOK {
			t.Errorf("%v: exit %d: %s", tc.args, code, errOut)
			continue
		}
		lines := strings.Split(out, "\n")
		if !strings.HasPrefix(lines[0], tc.first) || !strings.Contains(out, tc.rest) {
			t.Errorf("%v: first line %q (want %q), output has %q: %v\n%s", tc.args, lines[0], tc.first, tc.rest, strings.Contains(out, tc.rest), out)
		}
	}
	for _, args := range [][]string{
		{"diagnose", "--list-checks", "-o", "jsonpath={.items[0"},
		{"diagnose", "--list-checks", "-o", "go-template={{.items"},
		{"diagnose", "--list-checks", "-o", "custom-columns=CODE"},
		{"diagnose", "--list-checks", "-o", "custom-columns-file=/nonexistent/columns"},
		{"diagnose", "-n", "shop", "-o", "jsonpath="},
		{"why-injected", "-A", "-o", "jsonpath={.items[0"},
		{"version", "--client", "-o", "custom-columns=A"},
	} {
		code, _, errOut := run(t, args...)
		checks++
		if code != ExitUsage || !strings.HasPrefix(errOut, "error: -o ") {
			t.Errorf("%v: exit %d, want %d with the template's error: %s", args, code, ExitUsage, errOut)
		}
	}
	t.Logf("%d output manners checked", checks)
}

// Flag names keep kubectl's meaning: why-injected lists every factor with
// --all-factors (--all, every resource in kubectl, is hidden and only
// warns, on stderr, that it is the old name).
func TestFlagNamesKeepKubectlsMeaning(t *testing.T) {
	code, out, _ := run(t, "why-injected", "--help")
	if code != ExitOK || !strings.Contains(out, "--all-factors") || strings.Contains(out, "      --all ") {
		t.Errorf("why-injected --help: exit %d; --all-factors shown, --all hidden:\n%s", code, out)
	}
}
