package istio

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in           string
		ok           bool
		minor, patch int
	}{
		{"1.24.6", true, 24, 6},
		{"v1.24.6", true, 24, 6},
		{"1.24.6-distroless", true, 24, 6},
		{"1.22-dev", true, 22, -1},
		{"1.31-dev", true, 31, -1},
		{"1.30.3-debug", true, 30, 3},
		{"1.31.0-rc.0", true, 31, 0},
		{"1.24.6-asm.1", true, 24, 6},
		{"1.9.9", true, 9, 9},
		{" 1.28.1 ", true, 28, 1},
		{"latest", false, 0, 0},
		{"master", false, 0, 0},
		{"", false, 0, 0},
		{"sha256-3f2a", false, 0, 0},
		{"2.0.0", false, 0, 0},
		{"11.24.6", false, 0, 0},
		{"1.24.6.7", false, 0, 0},
		{"1.x", false, 0, 0},
		{"release-1.24", false, 0, 0},
	} {
		v, ok := ParseVersion(tc.in)
		if ok != tc.ok || ok && (v.Minor != tc.minor || v.Patch != tc.patch) {
			t.Errorf("ParseVersion(%q) = %+v, %v; want minor %d patch %d, %v", tc.in, v, ok, tc.minor, tc.patch, tc.ok)
		}
	}
}

func TestImageVersion(t *testing.T) {
	for _, tc := range []struct {
		image, tag, minor string
	}{
		{"docker.io/istio/pilot:1.24.6", "1.24.6", "1.24"},
		{"gcr.io/istio-release/proxyv2:1.24.6-distroless", "1.24.6-distroless", "1.24"},
		{"kmesh.local/istio/proxyv2:1.31-dev", "1.31-dev", "1.31"},
		{"registry:5000/istio/pilot:1.30.3-debug", "1.30.3-debug", "1.30"},
		{"docker.io/istio/pilot:1.28.1@sha256:0123abcd", "1.28.1", "1.28"},
		{"registry:5000/istio/pilot", "", ""},
		{"docker.io/istio/pilot@sha256:0123abcd", "", ""},
		{"docker.io/istio/pilot:latest", "latest", ""},
		{"pilot", "", ""},
	} {
		if got := ImageTag(tc.image); got != tc.tag {
			t.Errorf("ImageTag(%q) = %q, want %q", tc.image, got, tc.tag)
		}
		v, ok := ImageVersion(tc.image)
		if got := ""; ok {
			got = v.MinorString()
			if got != tc.minor {
				t.Errorf("ImageVersion(%q) = %s, want %q", tc.image, got, tc.minor)
			}
		} else if tc.minor != "" {
			t.Errorf("ImageVersion(%q): no version, want %s", tc.image, tc.minor)
		}
	}
}

func TestRevisionVersion(t *testing.T) {
	for _, tc := range []struct {
		rev   string
		minor string // "" when the name carries no version
		patch int
	}{
		{"1-24-6", "1.24", 6},
		{"1-24", "1.24", -1},
		{"istio-1-22-3", "1.22", 3},
		{"1-30-3", "1.30", 3},
		{"canary", "", 0},
		{"default", "", 0},
		{"stable", "", 0},
		{"prod-2", "", 0},
		{"1-24-6-canary", "", 0},
		{"11-24", "", 0},
	} {
		v, ok := RevisionVersion(tc.rev)
		switch {
		case ok != (tc.minor != ""):
			t.Errorf("RevisionVersion(%q) = %+v, %v; want %q", tc.rev, v, ok, tc.minor)
		case ok && (v.MinorString() != tc.minor || v.Patch != tc.patch):
			t.Errorf("RevisionVersion(%q) = %+v; want %s patch %d", tc.rev, v, tc.minor, tc.patch)
		}
	}
}

// The table: one row per minor from 1.20 to master, each with every
// column's source; the rows the answers depend on as read from Istio's
// source.
func TestReleaseTable(t *testing.T) {
	rs := Releases()
	if rs[0].Minor != "1.20" || ModelledRange() != "1.20–"+rs[len(rs)-1].Minor {
		t.Errorf("range %s", ModelledRange())
	}
	for i, r := range rs {
		v, ok := ParseVersion(r.Minor)
		if !ok || v.Minor != 20+i || v.MinorString() != r.Minor {
			t.Errorf("row %d: minor %q out of order", i, r.Minor)
		}
		if got, ok := DefaultsFor(r.Minor); !ok || got.ReadAt != r.ReadAt {
			t.Errorf("DefaultsFor(%s) = %v, %v", r.Minor, got.ReadAt, ok)
		}
		for _, c := range Columns {
			if r.Sources[c] == "" && !(c == ColAmbient && r.AmbientEnrollment == "") {
				t.Errorf("%s: no source for %s", r.Minor, c)
			}
		}
		if r.NativeSidecarsAuto != (r.NativeSidecars == "auto") || r.NativeSidecarsAuto != (r.NativeMinKubelet > 0) {
			t.Errorf("%s: native sidecar mode %q, auto %v, kubelet %d", r.Minor, r.NativeSidecars, r.NativeSidecarsAuto, r.NativeMinKubelet)
		}
		if r.ValidationContainer != ValidationContainer || r.ExcludedInboundPorts != "15090,15021,15020" || r.HoldApplicationUntilProxyStarts || r.DNSCapture || !r.RewriteAppHTTPProbe {
			t.Errorf("%s: a column found the same in every release differs: %+v", r.Minor, r)
		}
	}
	for _, tc := range []struct {
		minor, native, annotation, inject string
		kubelet                           int
	}{
		{"1.20", "false", NativeAnnotationIgnored, InjectValueYAMLBool, 0},
		{"1.22", "false", NativeAnnotationIgnored, InjectValueYAMLBool, 0},
		{"1.24", "false", NativeAnnotationTrueOnly, InjectValueYAMLBool, 0},
		{"1.26", "false", NativeAnnotationTrueOnly, InjectValueYAMLBool, 0},
		{"1.27", "auto", NativeAnnotationNotFalse, InjectValueTrueFalse, 33},
		{"1.28", "auto", NativeAnnotationNotFalse, InjectValueTrueFalse, 33},
		{"1.31", "auto", NativeAnnotationNotFalse, InjectValueTrueFalse, 33},
	} {
		r, ok := DefaultsFor(tc.minor)
		if !ok || r.NativeSidecars != tc.native || r.NativeAnnotation != tc.annotation || r.InjectValue != tc.inject || r.NativeMinKubelet != tc.kubelet {
			t.Errorf("%s: %+v", tc.minor, r)
		}
	}
	for _, minor := range []string{"1.19", "1.33", "2.0", "", "1.2"} {
		if _, ok := DefaultsFor(minor); ok {
			t.Errorf("%q is modelled", minor)
		}
	}
	// Releases is a copy: the table cannot be changed through it.
	rs[0].NativeSidecars, rs[0].Sources[ColHold], rs[0].InitArgs[0] = "true", "x", "x"
	if r, _ := DefaultsFor("1.20"); r.NativeSidecars != "false" || r.Sources[ColHold] == "x" || r.InitArgs[0] == "x" {
		t.Error("Releases shares the table")
	}
}

var updateDocs = flag.Bool("update-docs", false, "rewrite the generated tables of docs/istio-versions.md from the table")

const (
	docPath    = "../../docs/istio-versions.md"
	beginTable = "<!-- BEGIN generated by go test ./internal/istio -update-docs: do not edit -->"
	endTable   = "<!-- END generated -->"
)

// docs/istio-versions.md carries the table as the code has it: go test
// ./internal/istio -update-docs rewrites it.
func TestReleaseTableDoc(t *testing.T) {
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, beginTable), strings.Index(doc, endTable)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated section (%q … %q)", docPath, beginTable, endTable)
	}
	want := doc[:i] + beginTable + "\n" + releaseTableMarkdown() + endTable + doc[j+len(endTable):]
	if *updateDocs {
		if err := os.WriteFile(docPath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if doc != want {
		t.Errorf("%s is stale: go test ./internal/istio -update-docs rewrites it from the table", docPath)
	}
}

// releaseTableMarkdown is the table in Markdown: the defaults per minor in
// two tables, then each column's sources (path@tag per minor).
func releaseTableMarkdown() string {
	var b strings.Builder
	row := func(cells ...string) { b.WriteString("| " + strings.Join(cells, " | ") + " |\n") }
	sep := func(n int) { row(slices.Repeat([]string{"---"}, n)...) }
	code := func(s string) string { return "`" + s + "`" }
	rs := Releases()
	minor := func(r ReleaseDefaults) string {
		if r.Unreleased {
			return r.Minor + " (" + r.ReadAt + ", unreleased)"
		}
		return r.Minor + " (" + r.ReadAt + ")"
	}

	b.WriteString("**Sidecar kind, hold, injection, ambient enrollment**\n\n")
	row("minor (read at)", ColNativeSidecars+" unset", ColNativeKubelet, ColNativeAnnotation, ColHold, ColHoldNative, ColInjectValue, ColAmbient)
	sep(8)
	for _, r := range rs {
		kubelet := "no auto: only " + code("true") + " is native"
		if r.NativeSidecarsAuto {
			kubelet = fmt.Sprintf("1.%d or newer on every deciding node", r.NativeMinKubelet)
		}
		annotation := map[string]string{
			NativeAnnotationIgnored:  "not read",
			NativeAnnotationTrueOnly: "set: only " + code(`"true"`) + " is native",
			NativeAnnotationNotFalse: "empty: the mode; " + code(`"false"`) + " classic; else native",
		}[r.NativeAnnotation]
		holdNative := "kept (postStart wait on the native sidecar)"
		if r.HoldIgnoredForNative {
			holdNative = "dropped"
		}
		inject := map[string]string{
			InjectValueYAMLBool:  "y/yes/true/on (any case) inject; other values skip",
			InjectValueTrueFalse: code("true") + "/" + code("false") + " only; other values: the policy",
		}[r.InjectValue]
		ambient := map[string]string{
			"":                 "not modelled",
			AmbientByLabels:    "dataplane-mode labels (built in)",
			AmbientBySelectors: code("AMBIENT_ENABLEMENT_SELECTOR") + " (none: none)",
		}[r.AmbientEnrollment]
		row(minor(r), code(r.NativeSidecars), kubelet, annotation, code(fmt.Sprint(r.HoldApplicationUntilProxyStarts)), holdNative, inject, ambient)
	}

	b.WriteString("\n**Init containers and capture**\n\n")
	row("minor", ColCNI, ColValidationExit, ColDNSCapture, ColRewriteProbes, "istio-init -d", ColInitFlags)
	sep(7)
	for _, r := range rs {
		flags := "none"
		if len(r.InitFlags) > 0 {
			var fs []string
			for _, f := range r.InitFlags {
				fs = append(fs, code(f))
			}
			flags = strings.Join(fs, ", ")
		}
		var keys []string
		for _, k := range r.CNIValues {
			keys = append(keys, code(k))
		}
		row(r.Minor, code(r.ValidationContainer)+" when "+strings.Join(keys, " or "), fmt.Sprint(r.ValidationExitCode), code(fmt.Sprint(r.DNSCapture)),
			code(fmt.Sprint(r.RewriteAppHTTPProbe)), code(r.ExcludedInboundPorts), flags)
	}
	b.WriteString("\nistio-init's arguments under the chart's defaults, in every modelled release: " + code(strings.Join(quoteEmpty(rs[0].InitArgs), " ")) + ".\n")

	b.WriteString("\n**Sources** (the file of Istio's repository each cell was read from, at the row's tag)\n\n")
	row("column", "source")
	sep(2)
	for _, c := range Columns {
		var parts []string
		for i := 0; i < len(rs); {
			j := i
			for j+1 < len(rs) && rs[j+1].Sources[c] == rs[i].Sources[c] {
				j++
			}
			var tags []string
			for _, r := range rs[i : j+1] {
				tags = append(tags, r.ReadAt)
			}
			if p := rs[i].Sources[c]; p != "" {
				parts = append(parts, code(p)+" @ "+strings.Join(tags, ", "))
			} else {
				parts = append(parts, "not modelled @ "+strings.Join(tags, ", "))
			}
			i = j + 1
		}
		row(c, strings.Join(parts, "; "))
	}
	return b.String()
}

// quoteEmpty shows an empty argument as "".
func quoteEmpty(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if a == "" {
			out[i] = `""`
		}
	}
	return out
}
