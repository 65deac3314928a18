package render

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"charm.land/lipgloss/v2"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"golang.org/x/term"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// printer renders human output: tables through the one tablewriter wrapper
// below, colour through lipgloss. Colour follows --color: auto (the default)
// colours only a terminal without NO_COLOR set (to any value) and whose TERM
// is not "dumb"; always and never do what they say. lipgloss v2 styles always
// render escape codes, so without colour no style is applied at all. On a
// terminal the output fits its width (tables wrap their long cells inside
// their column, text wraps under itself); piped output is never wrapped.
type Printer struct {
	Out   io.Writer
	Color bool
	// width is the terminal's width in columns, 0 when not a terminal.
	Width int
}

// colorMode is --color: auto, always or never.
var ColorMode = ColorAuto

const (
	ColorAuto   = "auto"
	ColorAlways = "always"
	ColorNever  = "never"
)

// isTerminal reports whether out is a terminal.
func IsTerminal(out io.Writer) bool {
	f, ok := out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// terminalWidth is the terminal's width (TIOCGWINSZ), else $COLUMNS, else 80.
func TerminalWidth(out io.Writer) int {
	if f, ok := out.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			return w
		}
	}
	if w, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && w > 0 {
		return w
	}
	return 80
}

func NewPrinter(out io.Writer) *Printer {
	tty := IsTerminal(out)
	color := false
	switch ColorMode {
	case ColorAlways:
		color = true
	case ColorNever:
	default:
		if tty {
			_, noColor := os.LookupEnv("NO_COLOR")
			color = !noColor && os.Getenv("TERM") != "dumb"
		}
	}
	p := &Printer{Out: out, Color: color}
	switch {
	case ForceWidth > 0:
		p.Width = ForceWidth
	case tty:
		p.Width = TerminalWidth(out)
	}
	return p
}

// forceWidth, when set (tests), renders as on a terminal that wide.
var ForceWidth int

// colSep is the space between two columns, as kubectl's tables have.
const colSep = "   "

// table prints rows under headers, kubectl style: no borders, left aligned,
// three spaces between columns. Text from the cluster must have gone
// through escape() before it is styled and handed in. When the printer has a
// width and the table is wider, the widest columns are narrowed and their
// cells wrapped at word, comma or slash boundaries inside the column; when
// even that cannot fit, each row is printed as "KEY: value" lines, as
// kubectl describe does.
func (p *Printer) Table(headers []string, rows [][]string) {
	// Each cell's width, measured once.
	n := len(headers)
	cellW := make([][]int, len(rows)+1)
	natural := make([]int, n)
	multiline := false
	for j, r := range append([][]string{headers}, rows...) {
		cellW[j] = make([]int, n)
		for i := 0; i < n && i < len(r); i++ {
			cellW[j][i] = TextWidth(r[i])
			natural[i] = max(natural[i], cellW[j][i])
			multiline = multiline || strings.Contains(r[i], "\n")
		}
	}
	widths := p.FitColumns(headers, rows, natural)
	if widths == nil {
		p.KeyValues(headers, rows)
		return
	}
	if !multiline && slices.Equal(widths, natural) {
		p.Padded(headers, rows, widths, cellW)
		return
	}
	p.Wrapped(headers, rows, widths, cellW)
}

// Lines prints a table one line per row whatever the terminal's width, as
// kubectl get does: each cell padded to its column, nothing wrapped, so no
// name or address is ever broken.
func (p *Printer) Lines(headers []string, rows [][]string) {
	n := len(headers)
	cellW := make([][]int, len(rows)+1)
	widths := make([]int, n)
	all := append([][]string{headers}, rows...)
	for j, r := range all {
		cellW[j] = make([]int, n)
		for i := 0; i < n && i < len(r); i++ {
			cellW[j][i] = TextWidth(r[i])
			widths[i] = max(widths[i], cellW[j][i])
		}
	}
	// Too wide for the terminal: the last column (prose, not names) is
	// cut at a word's end, marked with "…"; the others stay whole (names
	// that leave it under 16 columns make the line as long as kubectl get's).
	if p.Width > 0 && n > 0 {
		used := len(linesSep) * (n - 1)
		for _, w := range widths[:n-1] {
			used += w
		}
		if room := max(p.Width-used, 16); widths[n-1] > room {
			rows = slices.Clone(rows)
			widths[n-1] = 0
			for j, r := range all {
				if j > 0 && n-1 < len(r) && cellW[j][n-1] > room {
					r = slices.Clone(r)
					r[n-1] = CutAtWord(r[n-1], room)
					rows[j-1] = r
					cellW[j][n-1] = TextWidth(r[n-1])
				}
				widths[n-1] = max(widths[n-1], cellW[j][n-1])
			}
		}
	}
	p.padded(headers, rows, widths, cellW, linesSep)
}

// linesSep separates the columns of Lines' tables, as kubectl get's.
const linesSep = "  "

// CutAtWord shortens s to at most width columns, at the end of a word,
// with "…" after it (s as it is when it fits).
func CutAtWord(s string, width int) string {
	if TextWidth(s) <= width {
		return s
	}
	plain := AnsiStrip(s)
	runes := []rune(plain)
	if len(runes) > width-1 {
		runes = runes[:width-1]
	}
	cut := string(runes)
	if i := strings.LastIndexByte(cut, ' '); i > 0 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,;:(") + "…"
}

// textWidth is lipgloss.Width(s), the columns s takes on a terminal, without
// its cost for text of printable ASCII only (one column a byte).
func TextWidth(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return lipgloss.Width(s)
		}
	}
	return len(s)
}

// padded prints a table whose every cell fits its column on one line: each
// cell padded to its column's width, the line trimmed at the end — what
// tablewriter prints for it (TestPaddedTableIsTablewriters), at a small part
// of the cost for a sweep's thousands of rows.
func (p *Printer) Padded(headers []string, rows [][]string, widths []int, cellW [][]int) {
	p.padded(headers, rows, widths, cellW, colSep)
}

func (p *Printer) padded(headers []string, rows [][]string, widths []int, cellW [][]int, sep string) {
	w := bufio.NewWriterSize(p.Out, 64<<10)
	var line []byte
	for j, r := range append([][]string{headers}, rows...) {
		if j == 0 && NoHeaders {
			continue
		}
		line = line[:0]
		for i := range widths {
			cell := ""
			if i < len(r) {
				cell = r[i]
			}
			line = append(line, cell...)
			for k := cellW[j][i]; k < widths[i]; k++ {
				line = append(line, ' ')
			}
			line = append(line, sep...)
		}
		trimmed := bytes.TrimRight(line, " ")
		if len(bytes.TrimSpace([]byte(AnsiStrip(string(trimmed))))) == 0 {
			continue
		}
		_, _ = w.Write(trimmed) // a bufio.Writer's error sticks: Flush returns it
		_ = w.WriteByte('\n')
	}
	_ = w.Flush() // the terminal's write error has nowhere to go
}

// wrapped prints a table through tablewriter, the cells wider than their
// column wrapped inside it (cellW: each cell's width, the header row first).
func (p *Printer) Wrapped(headers []string, rows [][]string, widths []int, cellW [][]int) {
	wrapRow := func(j int, row []string) []string {
		out := make([]string, len(row))
		for i, cell := range row {
			out[i] = cell
			if i < len(widths) && cellW[j][i] > widths[i] {
				out[i] = WrapText(cell, widths[i], CellBreaks)
			}
		}
		return out
	}
	var buf bytes.Buffer
	pad := tw.CellPadding{Global: tw.Padding{Left: "", Right: colSep, Overwrite: true}}
	cell := tw.CellConfig{
		Formatting: tw.CellFormatting{AutoFormat: tw.Off, AutoWrap: tw.WrapNone},
		Alignment:  tw.CellAlignment{Global: tw.AlignLeft},
		Padding:    pad,
	}
	t := tablewriter.NewTable(&buf,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders: tw.BorderNone,
			Symbols: tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{
				Separators: tw.Separators{BetweenColumns: tw.Off, BetweenRows: tw.Off, ShowHeader: tw.Off, ShowFooter: tw.Off},
				Lines:      tw.Lines{ShowHeaderLine: tw.Off, ShowFooterLine: tw.Off, ShowTop: tw.Off, ShowBottom: tw.Off},
			},
		})),
		tablewriter.WithConfig(tablewriter.Config{Header: cell, Row: cell}),
		tablewriter.WithTrimSpace(tw.Off),
	)
	if NoHeaders {
		t.Header(make([]string, len(headers))) // a blank line, dropped below
	} else {
		t.Header(wrapRow(0, headers))
	}
	for j, r := range rows {
		_ = t.Append(wrapRow(j+1, r))
	}
	_ = t.Render()
	// tablewriter pads the last column too; kubectl's tables end at the text.
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if strings.TrimSpace(AnsiStrip(line)) == "" {
			continue
		}
		fmt.Fprintln(p.Out, trimEnd(strings.TrimRight(line, "\n")))
	}
}

// trailing is a line's end of spaces and SGR sequences.
var trailing = regexp.MustCompile("(?:\x1b\\[[0-9;]*m| )+$")

// trimEnd drops a line's trailing spaces, also those before the SGR
// sequences that end it (a wrapped painted cell's reset), which it keeps.
func trimEnd(line string) string {
	loc := trailing.FindStringIndex(line)
	if loc == nil {
		return line
	}
	return line[:loc[0]] + strings.Join(sgrRE.FindAllString(line[loc[0]:], -1), "")
}

// fitColumns returns each column's width: its widest cell (natural), or
// narrower so that the table fits the printer's width; nil when it cannot fit.
func (p *Printer) FitColumns(headers []string, rows [][]string, natural []int) []int {
	n := len(headers)
	widths := slices.Clone(natural)
	if p.Width == 0 {
		return widths
	}
	avail := p.Width - len(colSep)*(n-1)
	total := 0
	for _, w := range widths {
		total += w
	}
	// No column narrower than its header, or than its longest word (up to
	// 30 columns: a longer one is broken anyway), when it has one.
	mins := make([]int, n)
	for i, h := range headers {
		word := 0
		for _, r := range rows {
			if i < len(r) {
				word = max(word, LongestWord(r[i]))
			}
		}
		mins[i] = min(widths[i], max(lipgloss.Width(h), min(word, 30)))
	}
	// Narrow the column with the most room above its floor first, as far as
	// needed, so that as few columns wrap as can be: first to a soft floor
	// (24 columns, so that no column becomes a ribbon while another has
	// room), then to the minimums.
	for pass := 0; pass < 2 && total > avail; pass++ {
		floor := make([]int, n)
		for i := range floor {
			floor[i] = mins[i]
			if pass == 0 {
				floor[i] = min(widths[i], max(mins[i], 24))
			}
		}
		for total > avail {
			roomiest := -1
			for i := range widths {
				if widths[i] > floor[i] && (roomiest < 0 || widths[i]-floor[i] > widths[roomiest]-floor[roomiest]) {
					roomiest = i
				}
			}
			if roomiest < 0 {
				break
			}
			cut := min(total-avail, widths[roomiest]-floor[roomiest])
			widths[roomiest] -= cut
			total -= cut
		}
	}
	if total > avail {
		return nil
	}
	return widths
}

// keyValues prints each row as "KEY: value" lines, values wrapped, a blank
// line between rows: the layout for tables too wide for any column split.
func (p *Printer) KeyValues(headers []string, rows [][]string) {
	keyW := 0
	for _, h := range headers {
		keyW = max(keyW, lipgloss.Width(h)+1)
	}
	for i, r := range rows {
		if i > 0 {
			fmt.Fprintln(p.Out)
		}
		for j, h := range headers {
			v := ""
			if j < len(r) {
				v = r[j]
			}
			if j > 0 && (v == "" || v == "-") {
				continue // as kubectl describe: nothing to say, no line
			}
			p.Para(fmt.Sprintf("%-*s ", keyW, h+":"), v)
		}
	}
}

// para prints prefix and text, the text wrapped to the printer's width with
// the lines after the first indented under it (the prefix's width); a prefix
// wider than a third of the width gets a line of its own, the text under it.
func (p *Printer) Para(prefix, text string) {
	indent := lipgloss.Width(prefix)
	if p.Width == 0 || indent+lipgloss.Width(text) <= p.Width {
		fmt.Fprintln(p.Out, strings.TrimRight(prefix+text, " "))
		return
	}
	if indent > p.Width/3 {
		// A long prefix gets a line of its own, the text under it, two in.
		fmt.Fprintln(p.Out, strings.TrimRight(prefix, " "))
		for _, l := range strings.Split(WrapText(text, p.Width-2, ""), "\n") {
			fmt.Fprintln(p.Out, "  "+strings.TrimRight(l, " "))
		}
		return
	}
	lines := strings.Split(WrapText(text, p.Width-indent, ""), "\n")
	fmt.Fprintln(p.Out, strings.TrimRight(prefix+lines[0], " "))
	for _, l := range lines[1:] {
		fmt.Fprintln(p.Out, strings.Repeat(" ", indent)+strings.TrimRight(l, " "))
	}
}

// command prints a shell command after prefix, wrapped so that it still runs
// when copied from the terminal: a break outside quotes ends its line with
// " \\", a break inside single quotes (the JSON of a patch) is whitespace
// the argument may hold; later lines are indented under the first.
func (p *Printer) Command(prefix, cmd string) {
	indent := lipgloss.Width(prefix)
	avail := p.Width - indent
	if p.Width == 0 || lipgloss.Width(cmd) <= avail || avail < 20 {
		fmt.Fprintln(p.Out, prefix+cmd)
		return
	}
	words, quoted, glued := commandWords(cmd)
	line := words[0]
	first := true
	emit := func(s string) {
		if first {
			fmt.Fprintln(p.Out, prefix+s)
			first = false
			return
		}
		fmt.Fprintln(p.Out, strings.Repeat(" ", indent)+"  "+s)
	}
	for i, w := range words[1:] {
		inside := quoted[i]
		sep := " "
		if glued[i] {
			sep = ""
		}
		room := avail - 2 // the continuation's indent, or " \\"
		if lipgloss.Width(line)+len(sep)+lipgloss.Width(w) <= room {
			line += sep + w
			continue
		}
		if !inside {
			line += " \\"
		}
		emit(line)
		line = w
	}
	emit(line)
}

// commandWords splits a command where it may be wrapped: at its spaces
// outside quotes, and inside a quoted JSON patch (after -p, --patch or
// <<<) at its spaces and after each comma, colon and opening bracket
// between its tokens (quoted: no backslash there; glued: no space between
// the two words), where a line break is JSON's whitespace, so the patch is
// the same. Other quoted words (a shell script, a JSONPath) are not broken.
func commandWords(cmd string) (words []string, quoted, glued []bool) {
	inQuote, inJSON, inString, escaped, start := false, false, false, false, 0
	cut := func(end, next int, q, g bool) {
		words = append(words, cmd[start:end])
		quoted = append(quoted, q)
		glued = append(glued, g)
		start = next
	}
	for i, r := range cmd {
		switch {
		case inJSON && inString:
			switch {
			case escaped:
				escaped = false
			case r == '\\':
				escaped = true
			case r == '"':
				inString = false
			}
		case r == '\'':
			inQuote = !inQuote
			inJSON = inQuote && strings.HasPrefix(cmd[i+1:], "{") || inQuote && strings.HasPrefix(cmd[i+1:], "[")
			inJSON = inJSON && (strings.HasSuffix(cmd[:i], "-p ") || strings.HasSuffix(cmd[:i], "--patch ") || strings.HasSuffix(cmd[:i], "<<<"))
		case inJSON && r == '"':
			inString = true
		case inJSON && (r == ',' || r == '{' || r == '[' || r == ':') && i+1 < len(cmd) && cmd[i+1] != '\'':
			cut(i+1, i+1, true, true)
		case r == ' ' && (!inQuote || inJSON):
			cut(i, i+1, inQuote, false)
		}
	}
	words = append(words, cmd[start:])
	return words, quoted, glued
}

// cellBreaks are where a table cell may wrap besides spaces and hyphens:
// selector terms, path and name parts.
const CellBreaks = ",/."

// wrapText wraps text to width columns at spaces; a word, a name or an
// address is never broken, unless it is longer than the width: then at its
// hyphens and breaks, else anywhere.
func WrapText(text string, width int, breaks string) string {
	out := wrapWords(text, width, breaks)
	if width < 2 {
		return out
	}
	// lipgloss.Wrap can leave a line one column too wide (a line ending in
	// "…." at the width); then the whole text is wrapped again, narrower,
	// so that no stub of a line is left behind.
	for _, l := range strings.Split(out, "\n") {
		if lipgloss.Width(strings.TrimRight(l, " ")) > width {
			return strings.ReplaceAll(WrapText(text, width-1, breaks), nbHyphen, "-")
		}
	}
	return out
}

// nbHyphen stands in for the hyphens of the words that fit a line while
// they are wrapped, so that no such word is broken at a hyphen.
const nbHyphen = "\u2011"

func wrapWords(text string, width int, breaks string) string {
	if width < 2 {
		return lipgloss.Wrap(text, width, breaks)
	}
	long := false
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		words := strings.Split(line, " ")
		for j, w := range words {
			if lipgloss.Width(w) > width {
				long = true
				continue
			}
			words[j] = strings.ReplaceAll(w, "-", nbHyphen)
		}
		lines[i] = strings.Join(words, " ")
	}
	if !long {
		breaks = ""
	}
	return strings.ReplaceAll(lipgloss.Wrap(strings.Join(lines, "\n"), width, breaks), nbHyphen, "-")
}

// longestWord is the width of the longest run of text a cell wrap cannot break.
func LongestWord(cell string) int {
	longest := 0
	// Names (pod-7d4b9, a.b.c) are words: a column is kept as wide as its
	// longest one; selector terms (a,b) and paths (a/b) may break.
	for _, w := range strings.FieldsFunc(AnsiStrip(cell), func(r rune) bool { return r == ' ' || r == ',' || r == '/' }) {
		longest = max(longest, lipgloss.Width(w)+1)
	}
	return longest
}

// ansiStrip removes SGR sequences (for measuring what is visible).
func AnsiStrip(s string) string { return sgrRE.ReplaceAllString(s, "") }

var sgrRE = regexp.MustCompile("\x1b\\[[0-9;]*m")

// bold and the effect colours; plain text when colour is off.
func (p *Printer) Bold(s string) string {
	if !p.Color {
		return s
	}
	return lipgloss.NewStyle().Bold(true).Render(s)
}

func (p *Printer) Effect(e string) string { return p.Paint(e, e) }

// paint renders text in the colour of an effect.
func (p *Printer) Paint(e, text string) string {
	if !p.Color {
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
func (p *Printer) YesNo(b *bool) string {
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
func Escape(s string) string {
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

func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// escapeLines is escape for text whose line breaks are its own (a fix of
// several commands, an error, a dump): newlines stay, every other control
// character is shown escaped.
func EscapeLines(s string) string {
	if !strings.ContainsRune(s, '\n') {
		return Escape(s)
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	return strings.Join(lines, "\n")
}

// sanitize escapes, in place, every string reachable from v (a pointer to a
// report) before it is rendered for a person: whatever a renderer prints of
// it, no text from the cluster or a dump can act on the terminal. Line
// breaks are kept (a multi-line fix); renderers still escape() single-line
// cells, which changes nothing more on text already sanitized. JSON and YAML
// output are not sanitized: their encoders escape control characters.
func Sanitize(v any) {
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
			v.SetString(EscapeLines(v.String()))
		}
	}
}

// FixLine prints one line of a fix: a kubectl command wrapped so that it
// still runs when copied, its trailing comment ("   # …") on lines of its own;
// any other advice as text.
func (p *Printer) FixLine(prefix, line string) {
	if !strings.HasPrefix(line, "kubectl ") {
		p.Para(prefix, line)
		return
	}
	cmd, comment, hasComment := strings.Cut(line, "   # ")
	if !hasComment || p.Width == 0 || lipgloss.Width(prefix+line) <= p.Width {
		p.Command(prefix, line)
		return
	}
	p.Command(prefix, cmd)
	p.Para(strings.Repeat(" ", lipgloss.Width(prefix))+"# ", comment)
}
