package cmd

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"unicode"

	"charm.land/lipgloss/v2"
	"github.com/olekukonko/tablewriter"
	"golang.org/x/term"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// printer renders human output: tables through the one tablewriter wrapper
// below, colour through lipgloss, and colour only on a terminal without
// NO_COLOR set (to any value) and whose TERM is not "dumb". lipgloss v2 styles always render escape
// codes, so without colour no style is applied at all.
type printer struct {
	out   io.Writer
	color bool
}

// isTerminal reports whether out is a terminal.
func isTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func newPrinter(out io.Writer) *printer {
	color := false
	if isTerminal(out) {
		_, noColor := os.LookupEnv("NO_COLOR")
		color = !noColor && os.Getenv("TERM") != "dumb"
	}
	return &printer{out: out, color: color}
}

// table prints rows under headers, kubectl style: no borders, left aligned,
// three spaces between columns. Text from the cluster must have gone
// through escape() before it is styled and handed in.
func (p *printer) table(headers []string, rows [][]string) {
	var buf bytes.Buffer
	t := tablewriter.NewWriter(&buf)
	t.SetHeader(headers)
	t.SetAutoFormatHeaders(false)
	t.SetHeaderAlignment(tablewriter.ALIGN_LEFT)
	t.SetAlignment(tablewriter.ALIGN_LEFT)
	t.SetAutoWrapText(false)
	t.SetBorder(false)
	t.SetColumnSeparator("")
	t.SetCenterSeparator("")
	t.SetRowSeparator("")
	t.SetHeaderLine(false)
	t.SetTablePadding("   ")
	t.SetNoWhiteSpace(true)
	t.AppendBulk(rows)
	t.Render()
	// tablewriter pads the last column too; kubectl's tables end at the text.
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line == "" {
			continue
		}
		fmt.Fprintln(p.out, strings.TrimRight(line, " \n"))
	}
}

// bold and the effect colours; plain text when colour is off.
func (p *printer) bold(s string) string {
	if !p.color {
		return s
	}
	return lipgloss.NewStyle().Bold(true).Render(s)
}

func (p *printer) effect(e string) string { return p.paint(e, e) }

// paint renders text in the colour of an effect.
func (p *printer) paint(e, text string) string {
	if !p.color {
		return text
	}
	st := lipgloss.NewStyle()
	switch e {
	case injection.EffectInject:
		st = st.Foreground(lipgloss.Color("2"))
	case injection.EffectSkip, injection.EffectBlocks:
		st = st.Foreground(lipgloss.Color("1"))
	case injection.EffectWarning:
		st = st.Foreground(lipgloss.Color("3"))
	case injection.EffectUnknown:
		st = st.Foreground(lipgloss.Color("5"))
	default:
		return text
	}
	return st.Render(text)
}

// yesNo renders a tri-state: yes, no, or "-" when unknown.
func (p *printer) yesNo(b *bool) string {
	switch {
	case b == nil:
		return "-"
	case *b:
		return "yes"
	default:
		return "no"
	}
}

// escape makes text from the cluster (labels, annotations, event messages,
// logs) safe to print: control characters, escape sequences included, are
// shown escaped (\x1b, \n) instead of acting on the terminal; a tab
// becomes a space.
func escape(s string) string {
	clean := true
	for _, r := range s {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteByte(' ')
		case r == unicode.ReplacementChar || unicode.IsControl(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// escapeLines is escape for text whose line breaks are its own (a fix of
// several commands, an error, a dump): newlines stay, every other control
// character is shown escaped.
func escapeLines(s string) string {
	if !strings.ContainsRune(s, '\n') {
		return escape(s)
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = escape(l)
	}
	return strings.Join(lines, "\n")
}

// sanitize escapes, in place, every string reachable from v (a pointer to a
// report) before it is rendered for a person: whatever a renderer prints of
// it, no text from the cluster or a dump can act on the terminal. Line
// breaks are kept (a multi-line fix); renderers still escape() single-line
// cells, which changes nothing more on text already sanitized. JSON and YAML
// output are not sanitized: their encoders escape control characters.
func sanitize(v any) {
	sanitizeValue(reflect.ValueOf(v), 0)
}

func sanitizeValue(v reflect.Value, depth int) {
	if depth > 64 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			sanitizeValue(v.Elem(), depth+1)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); f.CanSet() {
				sanitizeValue(f, depth+1)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			sanitizeValue(v.Index(i), depth+1)
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		iter := v.MapRange()
		type kv struct{ k, v reflect.Value }
		var entries []kv
		for iter.Next() {
			k := reflect.New(v.Type().Key()).Elem()
			k.Set(iter.Key())
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(iter.Value())
			entries = append(entries, kv{k, val})
		}
		for _, e := range entries {
			v.SetMapIndex(e.k, reflect.Value{})
			sanitizeValue(e.k, depth+1)
			sanitizeValue(e.v, depth+1)
			v.SetMapIndex(e.k, e.v)
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(escapeLines(v.String()))
		}
	}
}
