package render

import (
	"strings"
	"testing"

	"charm.land/lipgloss/v2"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// A coloured cell wrapped to the terminal's width leaves no line wider
// than the terminal: the spaces before a wrapped line's closing reset are
// trimmed as the others are (the why-injected row "fail KM-INJ-010: …" was
// 123 columns wide on a 120-column terminal).
func TestWrappedColouredCellFits(t *testing.T) {
	reason := "no Istio webhook matches: the namespace has no istio-injection=enabled or istio.io/rev label, and the pod no sidecar.istio.io/inject=true label"
	for _, w := range []int{80, 120} {
		var b strings.Builder
		p := &Printer{Out: &b, Width: w, Color: true}
		p.Table([]string{"NAMESPACE", "POD", "INJECTED", "EXPECTED", "REVISION", "REASON"},
			[][]string{{"term-plain-wb92t", "reports-5d7f4574f-zq9p9", "no", "no", "-", p.Paint(injection.EffectBlocks, "fail") + " KM-INJ-010: " + reason}})
		for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			if lipgloss.Width(l) > w {
				t.Errorf("at %d columns a line is %d wide: %q", w, lipgloss.Width(l), l)
			}
		}
	}
}
