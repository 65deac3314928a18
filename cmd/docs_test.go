package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/internal/demoblock"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// The docs cannot drift from the code: every relative link and anchor of
// README.md and docs/*.md resolves; every KM- code they name is in the
// registry, with the registry's title wherever a title is given beside it;
// every `kubectl mesh …` invocation they show parses with that command's
// own flags; and so does every example of every command's --help.
func TestDocsDoNotDrift(t *testing.T) {
	docs := docFiles(t)
	root := NewRootCmd(genericiooptions.NewTestIOStreamsDiscard())
	var problems []string
	links, codes, invocations := 0, 0, 0
	for _, path := range docs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		p, n := brokenLinks(path, text)
		problems, links = append(problems, p...), links+n
		p, n = codeDrift(path, text)
		problems, codes = append(problems, p...), codes+n
		p, _ = staleClaims(path, text)
		problems = append(problems, p...)
		p, n = invocationDrift(root, path, text)
		problems, invocations = append(problems, p...), invocations+n
		p, n = proseFlagDrift(root, path, text)
		problems, invocations = append(problems, p...), invocations+n
	}
	// README's count of istioctl analyze messages no check reports is the
	// number docs/checks.md lists.
	if b, err := os.ReadFile("../docs/checks.md"); err == nil {
		_, after, _ := strings.Cut(string(b), "## istioctl analyze messages that no check reports")
		rows := regexp.MustCompile(`(?m)^\| IST\d{4} \|`).FindAllString(after, -1)
		readme, _ := os.ReadFile("../README.md")
		if want := fmt.Sprintf("but the %d that [docs/checks.md]", len(rows)); len(rows) == 0 || !strings.Contains(string(readme), want) {
			problems = append(problems, fmt.Sprintf("README.md: docs/checks.md lists %d istioctl analyze messages no check reports; README should say %q", len(rows), want))
		}
	}
	// The console blocks keep the renderers' shape: every table header in
	// them is one the code prints, and a block spliced from the demo
	// (<!-- demo: ARGS -->) shows that command.
	p, n := consoleShape(t, docs)
	problems = append(problems, p...)
	examples := 0
	for _, c := range root.Commands() {
		p, n := invocationDrift(root, "kubectl mesh "+c.Name()+" --help", "```\n"+c.Example+"\n```")
		problems, examples = append(problems, p...), examples+n
	}
	for _, p := range problems {
		t.Error(p)
	}
	testreport.Count(t, "docs against the code: %d files, %d links and anchors, %d KM- codes, %d invocations in the docs, %d console tables and demo blocks, %d help examples checked; %d problems",
		len(docs), links, codes, invocations, n, examples, len(problems))
	if links == 0 || codes == 0 || invocations == 0 || examples == 0 {
		t.Errorf("nothing of some kind was checked: the checker is broken")
	}
}

// The checker itself fails on each planted fault.
func TestDocsDriftCheckerCatchesPlantedFaults(t *testing.T) {
	root := NewRootCmd(genericiooptions.NewTestIOStreamsDiscard())
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "other.md"), []byte("# Other\n\n## A real heading\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(dir, "doc.md")
	for _, tc := range []struct {
		name, text string
		check      func(path, text string) ([]string, int)
		want       string
	}{
		{"missing file", "see [x](nowhere.md)", brokenLinks, "nowhere.md"},
		{"missing anchor", "see [x](other.md#no-such-heading)", brokenLinks, "#no-such-heading"},
		{"missing local anchor", "# Doc\nsee [x](#gone)", brokenLinks, "#gone"},
		{"unknown code", "KM-CAP-999 does not exist", codeDrift, "KM-CAP-999"},
		{"stale code range", "**57 checks, each with a code** (`KM-INJ-001` …\n`KM-CONN-005`)", staleClaims, "KM-CONN-005"},
		{"stale check count", "**12 checks, each with a code** (`KM-INJ-001` … `KM-CONN-008`)", staleClaims, "says 12 checks"},
		{"stale version string", "```console\n  \"version\": \"282c43d\",\n```", staleClaims, "282c43d"},
		{"code with another title", "| KM-CAP-001 | capture | rules redirect to nothing |", codeDrift, "KM-CAP-001"},
		{"unknown flag", "```\nkubectl mesh diagnose -A --frobnicate\n```", func(p, s string) ([]string, int) { return invocationDrift(root, p, s) }, "--frobnicate"},
		{"flag of another command", "```\nkubectl mesh startup web --rules\n```", func(p, s string) ([]string, int) { return invocationDrift(root, p, s) }, "--rules"},
		{"unknown flag in prose", "give `--frobnicate` to see more", func(p, s string) ([]string, int) { return proseFlagDrift(root, p, s) }, "--frobnicate"},
		{"unknown command", "```\nkubectl mesh diagnoze web\n```", func(p, s string) ([]string, int) { return invocationDrift(root, p, s) }, "diagnoze"},
	} {
		got, _ := tc.check(doc, tc.text)
		if len(got) == 0 || !strings.Contains(strings.Join(got, "\n"), tc.want) {
			t.Errorf("%s: the checker said %q, want a problem naming %q", tc.name, got, tc.want)
		}
	}
	// A console table with a header no renderer prints, and a demo block
	// showing another command than its marker.
	shape := filepath.Join(dir, "shape.md")
	if err := os.WriteFile(shape, []byte("```console\nNAMESPACE  POD  COLOUR\n```\n\n<!-- demo: diagnose -A -->\n```console\n$ kubectl mesh startup -A\n```\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := consoleShape(t, []string{shape}); len(got) != 2 {
		t.Errorf("consoleShape on a wrong header and a wrong demo block: %q, want 2 problems", got)
	}
	// And says nothing of what is right.
	ok := "# Doc\n\n## Part one\n\n[o](other.md#a-real-heading) [p](#part-one) KM-CAP-001 · capture rules differ from the annotations\n\n```\nkubectl mesh iptables web -n shop --via node --trace in:8080\n```\n"
	for _, check := range []func(string, string) ([]string, int){brokenLinks, codeDrift, func(p, s string) ([]string, int) { return invocationDrift(root, p, s) }} {
		if got, _ := check(doc, ok); len(got) > 0 {
			t.Errorf("a correct doc drew %q", got)
		}
	}
}

func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../README.md"}
	more, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(more)
	return append(files, more...)
}

var (
	mdLinkRE  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRE = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	anchorRE  = regexp.MustCompile(`<a (?:id|name)="([^"]+)"`)
	fenceRE   = regexp.MustCompile("(?s)```.*?```")
)

// slug is GitHub's anchor for a heading: lower case, punctuation dropped
// but for hyphens and underscores, spaces as hyphens.
func slug(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	var b strings.Builder
	for _, r := range h {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the anchors a markdown text defines: its headings' slugs
// (numbered as GitHub numbers repeats) and explicit <a id> or <a name>.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	text = fenceRE.ReplaceAllString(text, "")
	seen := map[string]int{}
	for _, m := range headingRE.FindAllStringSubmatch(text, -1) {
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	for _, m := range anchorRE.FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}

// brokenLinks lists the relative links of a doc whose file or anchor does
// not exist, and how many were checked.
func brokenLinks(path, text string) ([]string, int) {
	var out []string
	n := 0
	for _, m := range mdLinkRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(text, ""), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		n++
		file, frag, _ := strings.Cut(target, "#")
		full := path
		if file != "" {
			full = filepath.Join(filepath.Dir(path), file)
			if _, err := os.Stat(full); err != nil {
				out = append(out, fmt.Sprintf("%s: link %q: no file %s", path, target, full))
				continue
			}
		}
		if frag == "" {
			continue
		}
		if !strings.HasSuffix(full, ".md") {
			out = append(out, fmt.Sprintf("%s: link %q: an anchor into a file that is not markdown", path, target))
			continue
		}
		b, err := os.ReadFile(full)
		if file == "" {
			b, err = []byte(text), nil
		}
		if err != nil || !anchors(string(b))[frag] {
			out = append(out, fmt.Sprintf("%s: link %q: no heading or anchor #%s in %s", path, target, frag, full))
		}
	}
	return out, n
}

var codeRE = regexp.MustCompile(`KM-[A-Z]+-\d{3}`)

var (
	// codeRange is a doc's claim of the catalogue's size and range: "57
	// checks, each with a code** (`KM-INJ-001` … `KM-CONN-008`".
	codeRange = regexp.MustCompile("(\\d+) checks, each with a code\\*\\* \\(`(KM-[A-Z]+-\\d{3})` …\\s+`(KM-[A-Z]+-\\d{3})`")
	// versionField is a shown version document's "version" field.
	versionField = regexp.MustCompile(`"version": "([^"]*)"`)
	buildVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+(-g[0-9a-f]{7,})?$`)
)

// staleClaims lists what a doc says of the build that has gone stale: the
// catalogue's size and the range of its codes, and a version shown in a
// form the build does not print.
func staleClaims(path, text string) ([]string, int) {
	var out []string
	n := 0
	checks := diagnose.Checks()
	for _, m := range codeRange.FindAllStringSubmatch(text, -1) {
		n++
		first, last := checks[0].Code, checks[len(checks)-1].Code
		if m[1] != fmt.Sprint(len(checks)) || m[2] != first || m[3] != last {
			out = append(out, fmt.Sprintf("%s: says %s checks, %s … %s; the registry has %d, %s … %s", path, m[1], m[2], m[3], len(checks), first, last))
		}
	}
	for _, m := range versionField.FindAllStringSubmatch(text, -1) {
		n++
		if !buildVersion.MatchString(m[1]) {
			out = append(out, fmt.Sprintf("%s: shows version %q, which is not a version the build prints (vX.Y.Z or vX.Y.Z-gCOMMIT)", path, m[1]))
		}
	}
	return out, n
}

// codeDrift lists the KM- codes of a doc that the registry does not have,
// and those shown beside another title than the registry's: in a table row
// or after "·" or "—", the line must carry the registry's title.
func codeDrift(path, text string) ([]string, int) {
	var out []string
	n := 0
	for i, line := range strings.Split(text, "\n") {
		for _, code := range codeRE.FindAllString(line, -1) {
			n++
			spec, ok := diagnose.Lookup(code)
			if !ok {
				out = append(out, fmt.Sprintf("%s:%d: %s is not a check of the registry", path, i+1, code))
				continue
			}
			// A table row whose first cell is the code, or a "CODE · Title"
			// line, shows its title.
			first := strings.TrimSpace(strings.SplitN(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|", 2)[0])
			titled := strings.HasPrefix(strings.TrimSpace(line), "|") && (first == code || strings.HasPrefix(first, "["+code+"]")) ||
				strings.Contains(line, code+" ·") || strings.Contains(line, code+" —")
			if titled && !strings.Contains(line, spec.Title) {
				out = append(out, fmt.Sprintf("%s:%d: %s shown with another title than the registry's %q: %s", path, i+1, code, spec.Title, strings.TrimSpace(line)))
			}
		}
	}
	return out, n
}

// invocationDrift parses every `kubectl mesh …` (or kubectl-mesh …)
// invocation of a text — a line of a code block or of inline code, with its
// continuation lines — with the command's own flags, as cobra would.
func invocationDrift(root *cobra.Command, where, text string) ([]string, int) {
	var out []string
	n := 0
	for _, inv := range invocations(text) {
		args, err := capture.SplitShell(inv)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %q: %v", where, inv, err))
			continue
		}
		n++
		if err := parseInvocation(root, args); err != nil {
			out = append(out, fmt.Sprintf("%s: `kubectl mesh %s`: %v", where, inv, err))
		}
	}
	return out, n
}

var (
	invocationRE = regexp.MustCompile(`(?:^|[;&|(]\s*)(?:kubectl mesh|kubectl-mesh)((?: +[^\x60|;&><#]+)*)`)
	placeholder  = regexp.MustCompile(`[A-Z][A-Z_]+|…|\.\.\.|\[|\]`)
)

// invocations finds `kubectl mesh ARGS` in code: fenced blocks, console
// transcripts ("$ kubectl mesh …") and inline code. Shell operators end an
// invocation; a trailing backslash continues it. Synopses with
// placeholders (POD, [flags], …) are skipped: they are not invocations.
func invocations(text string) []string {
	var code []string
	for _, block := range fenceRE.FindAllString(text, -1) {
		code = append(code, strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n")...)
	}
	inline := regexp.MustCompile("`([^`\n]+)`")
	for _, m := range inline.FindAllStringSubmatch(fenceRE.ReplaceAllString(text, ""), -1) {
		code = append(code, m[1])
	}
	var out []string
	for _, line := range code {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "$"))
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i] // a shell comment
		}
		for _, m := range invocationRE.FindAllStringSubmatch(line, -1) {
			args := strings.TrimSpace(m[1])
			if args == "" || placeholder.MatchString(stripQuoted(args)) {
				continue
			}
			out = append(out, args)
		}
	}
	return out
}

// stripQuoted drops quoted strings (their content is a value, not syntax).
func stripQuoted(s string) string {
	return regexp.MustCompile(`'[^']*'|"[^"]*"`).ReplaceAllString(s, "")
}

// parseInvocation finds the command args name and parses the rest with its
// flags; an unknown command, flag or argument count is an error.
func parseInvocation(root *cobra.Command, args []string) error {
	c, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if c == root {
		if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
			return fmt.Errorf("unknown command %q", rest[0])
		}
	}
	c.InitDefaultHelpFlag()
	if err := c.ParseFlags(rest); err != nil {
		return err
	}
	if c.Args != nil {
		if err := c.Args(c, c.Flags().Args()); err != nil {
			return err
		}
	}
	return nil
}

var proseFlagRE = regexp.MustCompile("`(--[a-z][a-z0-9-]*)(?:[ =][^`]*)?`")

// iptablesOptions are iptables' own options that the docs name in
// explaining rules: not kubectl-mesh's.
var iptablesOptions = map[string]bool{"--uid-owner": true, "--gid-owner": true, "--dport": true, "--sport": true, "--to-ports": true,
	"--line-numbers": true, "--numeric": true, "--exact": true, "--verbose": true, "--list": true, "--list-rules": true, "--table": true}

// proseFlagDrift lists the flags a doc names alone in inline code
// (`--fail-on`) that no kubectl-mesh command has, unless they are
// istio-iptables' (as --expect-args takes them) or iptables' own.
func proseFlagDrift(root *cobra.Command, path, text string) ([]string, int) {
	var out []string
	n := 0
	known := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		for _, fs := range []interface {
			VisitAll(func(*pflag.Flag))
		}{c.Flags(), c.PersistentFlags(), c.InheritedFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { known["--"+f.Name] = true })
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for _, m := range proseFlagRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(text, ""), -1) {
		flag := m[1]
		n++
		if known[flag] || iptablesOptions[flag] {
			continue
		}
		if _, err := capture.ParseCaptureArgs([]string{flag + "=1"}, nil); err == nil || !strings.Contains(err.Error(), "unknown flag") {
			continue // an istio-iptables flag
		}
		out = append(out, fmt.Sprintf("%s: `%s` is not a flag of any kubectl mesh command", path, flag))
	}
	return out, n
}

var (
	headerLineRE   = regexp.MustCompile(`^[A-Z][A-Z]+(?:  +[A-Z][A-Z ]*[A-Z])+\s*$`)
	sourceHeadRE   = regexp.MustCompile(`\[\]string\{((?:"[A-Z][A-Z ]*"(?:, )?)+)\}`)
	goldenMarkerRE = regexp.MustCompile("(?ms)^<!-- golden: (\\S+) -->\n```console\n(.*?)^```")
	consoleRE      = regexp.MustCompile("(?s)```console\n(.*?)```")
	spacesRE       = regexp.MustCompile(`  +`)
	quotedCapsRE   = regexp.MustCompile(`"([A-Z][A-Z ]*)"`)
)

// consoleShape checks the console blocks of the docs against the code:
// each table header line must start with a header the renderers print
// (its further columns printed names too, as -o wide adds), and each block
// spliced from the demo must run the command its marker names.
func consoleShape(t *testing.T, docs []string) ([]string, int) {
	t.Helper()
	var heads [][]string
	names := map[string]bool{}
	for _, dir := range []string{"../render", "."} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range sourceHeadRE.FindAllStringSubmatch(string(b), -1) {
				var h []string
				for _, q := range quotedCapsRE.FindAllStringSubmatch(m[1], -1) {
					h = append(h, q[1])
				}
				heads = append(heads, h)
			}
			for _, q := range quotedCapsRE.FindAllStringSubmatch(string(b), -1) {
				names[q[1]] = true
			}
		}
	}
	var out []string
	n := 0
	for _, path := range docs {
		b, _ := os.ReadFile(path)
		text := string(b)
		for _, block := range consoleRE.FindAllStringSubmatch(text, -1) {
			for _, line := range strings.Split(block[1], "\n") {
				if !headerLineRE.MatchString(line) {
					continue
				}
				n++
				cols := spacesRE.Split(strings.TrimSpace(line), -1)
				ok := false
				for _, h := range heads {
					if len(h) <= len(cols) && len(h) >= 2 && strings.Join(cols[:len(h)], "|") == strings.Join(h, "|") {
						ok = true
						for _, c := range cols[len(h):] {
							ok = ok && names[c]
						}
					}
				}
				if !ok {
					out = append(out, fmt.Sprintf("%s: table header %q is not one kubectl-mesh prints", path, strings.TrimSpace(line)))
				}
			}
		}
		// A block marked <!-- golden: FILE --> shows that golden file (the
		// output a test checks) after its command lines.
		for _, m := range goldenMarkerRE.FindAllStringSubmatch(text, -1) {
			n++
			want, err := os.ReadFile(filepath.Join("..", m[1]))
			if err != nil {
				out = append(out, fmt.Sprintf("%s: <!-- golden: %s -->: %v", path, m[1], err))
				continue
			}
			lines := strings.SplitAfter(m[2], "\n")
			i := 0
			for i < len(lines) && (strings.HasPrefix(lines[i], "$ ") || i > 0 && strings.HasSuffix(strings.TrimRight(lines[i-1], "\n"), "\\")) {
				i++
			}
			if got := strings.Join(lines[i:], ""); got != string(want) {
				out = append(out, fmt.Sprintf("%s: the block marked <!-- golden: %s --> is not that file's output (copy it again)", path, m[1]))
			}
		}
		for _, m := range demoblock.Marker.FindAllStringSubmatch(text, -1) {
			n++
			first, _, _ := strings.Cut(m[3], "\n")
			if cmd, ok := strings.CutPrefix(first, "$ "); !ok || !demoblock.Command(m[1]).MatchString(cmd) {
				out = append(out, fmt.Sprintf("%s: the block marked <!-- demo: %s --> shows %q (hack/demo/readme.sh splices the demo's run in)", path, m[1], first))
			}
		}
	}
	return out, n
}
