package render

import (
	"bytes"
	"strings"
	"testing"

	"charm.land/lipgloss/v2"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain":            "plain",
		"a\x1b[2Jb":        `a\x1b[2Jb`,
		"line\nbreak":      `line\nbreak`,
		"ünïcödé ok":       "ünïcödé ok",
		"bell\a":           `bell\a`,
		"tab	here":         "tab here",
		`quotes "stay"`:    `quotes "stay"`,
		"carriage\rreturn": `carriage\rreturn`,
	} {
		if got := Escape(in); got != want {
			t.Errorf("escape(%q) = %q, want %q", in, got, want)
		}
	}
}

// On a terminal the effects are coloured and headings bold (lipgloss v2
// renders escape codes unconditionally, so the printer must not style at all
// when colour is off).
func TestColourOnlyWhenOn(t *testing.T) {
	on := &Printer{Out: &bytes.Buffer{}, Color: true}
	off := &Printer{Out: &bytes.Buffer{}}
	for e, code := range map[string]string{
		injection.EffectInject: "\x1b[32m", injection.EffectSkip: "\x1b[31m", injection.EffectBlocks: "\x1b[31m",
		injection.EffectWarning: "\x1b[33m", injection.EffectUnknown: "\x1b[35m",
	} {
		if got := on.Effect(e); !strings.HasPrefix(got, code) || !strings.Contains(got, e) {
			t.Errorf("colour on: effect %q renders %q, want it in %q", e, got, code)
		}
		if got := off.Effect(e); got != e {
			t.Errorf("colour off: effect %q renders %q", e, got)
		}
	}
	if got := on.Bold("Verdict"); !strings.HasPrefix(got, "\x1b[1m") {
		t.Errorf("bold renders %q", got)
	}
	if got := off.Bold("Verdict"); got != "Verdict" {
		t.Errorf("bold without colour renders %q", got)
	}
	if got := on.Effect(injection.EffectNone); got != injection.EffectNone {
		t.Errorf("an effect without a colour renders %q", got)
	}
}

// A wrapped line is never wider than asked, whatever lipgloss.Wrap does
// with a line ending in "…." (it left one a column too wide).
func TestWrapTextFits(t *testing.T) {
	text := `Pods cannot be created: the apiserver rejected pod creation: Error creating: admission webhook "namespace.sidecar-injector.istio.io" denied the request: failed to run injection template: 1 error occurred:\n * invalid value '10.0.0.0/33' for annotation 'traffic.s….`
	checked := 0
	for w := 10; w <= 120; w++ {
		for _, l := range strings.Split(WrapText(text, w, CellBreaks), "\n") {
			if lipgloss.Width(l) > w {
				t.Errorf("width %d: a line of %d: %q", w, lipgloss.Width(l), l)
			}
			checked++
		}
	}
	t.Logf("%d wrapped lines fit", checked)
}
