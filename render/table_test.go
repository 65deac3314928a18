package render

import (
	"bytes"
	"math/rand"
	"regexp"
	"slices"
	"strings"
	"testing"

	"charm.land/lipgloss/v2"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// sgr is an SGR escape sequence (a colour or style).
var sgr = regexp.MustCompile("\x1b\\[[0-9;]*m")

// display is what a terminal shows of s: an SGR reset while no attribute is
// set changes nothing and is dropped, as are the spaces that end a line.
func display(s string) string {
	var out strings.Builder
	styled := false
	for len(s) > 0 {
		if loc := sgr.FindStringIndex(s); loc != nil && loc[0] == 0 {
			seq := s[:loc[1]]
			reset := seq == "\x1b[0m" || seq == "\x1b[m"
			if !reset || styled {
				out.WriteString(seq)
			}
			styled = !reset
			s = s[loc[1]:]
			continue
		}
		out.WriteByte(s[0])
		s = s[1:]
	}
	lines := strings.Split(out.String(), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return strings.Join(lines, "\n")
}

// A table whose cells all fit is printed by padding the cells (fast) and
// must show on a terminal exactly what tablewriter's print of it shows
// (tablewriter adds no-op resets and trailing spaces, which padded does
// not print): random tables of plain,
// coloured, wide (CJK) and empty cells, rows shorter than the header,
// piped and on terminals wide enough.
func TestPaddedTableIsTablewriters(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	words := []string{"", "-", "pod", "reviews-v1-5f4d8b7c9-x2x8z", "istio-injection=enabled", "名前空間", "\x1b[31mno\x1b[0m",
		"\x1b[1;32myes (native)\x1b[0m", "a b c", "✓", "kube-system", "  lead", "trail  "}
	compared := 0
	for n := 0; n < 500; n++ {
		cols := 1 + rng.Intn(6)
		headers := make([]string, cols)
		for i := range headers {
			headers[i] = []string{"NAMESPACE", "POD", "INJECTED", "WHY", "名前", ""}[rng.Intn(6)]
		}
		rows := make([][]string, rng.Intn(8))
		for j := range rows {
			rows[j] = make([]string, 1+rng.Intn(cols))
			for i := range rows[j] {
				rows[j][i] = words[rng.Intn(len(words))]
			}
		}
		for _, width := range []int{0, 400} {
			p := &Printer{Width: width}
			n := len(headers)
			natural := make([]int, n)
			cellW := make([][]int, len(rows)+1)
			for j, r := range append([][]string{headers}, rows...) {
				cellW[j] = make([]int, n)
				for i := 0; i < n && i < len(r); i++ {
					cellW[j][i] = lipgloss.Width(r[i])
					natural[i] = max(natural[i], cellW[j][i])
				}
			}
			widths := p.FitColumns(headers, rows, natural)
			if !slices.Equal(widths, natural) {
				t.Fatalf("width %d: columns narrowed %v → %v", width, natural, widths)
			}
			var fast, slow bytes.Buffer
			p.Out = &fast
			p.Padded(headers, rows, widths, cellW)
			p.Out = &slow
			p.Wrapped(headers, rows, widths, cellW)
			if display(fast.String()) != display(slow.String()) || fast.String() != display(fast.String()) {
				t.Fatalf("headers %q rows %q width %d:\npadded:\n%s\ntablewriter:\n%s", headers, rows, width, fast.String(), slow.String())
			}
			compared++
		}
	}
	t.Logf("%d tables compared", compared)
}

// textWidth measures as lipgloss.Width does: printable ASCII, colour,
// wide and combining characters, control characters.
func TestTextWidthIsLipglossWidth(t *testing.T) {
	p := &Printer{Color: true}
	for _, s := range []string{"", "shop/web-5d8f-x", "a b ~", p.Effect(injection.EffectWarning) + ": x", "日本語", "e\u0301", "\x7f", "tab\there", "über"} {
		if got, want := TextWidth(s), lipgloss.Width(s); got != want {
			t.Errorf("textWidth(%q) = %d, lipgloss.Width %d", s, got, want)
		}
	}
}
