package capture

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// A block is one table's listing in `iptables -S` or `iptables -L` output:
// what one `iptables -t TABLE -S` (or -L) printed. Several may be pasted one
// after the other; a block starts at a pasted command line, or where the
// built-in chains start over.
type block struct {
	start     int    // its first line
	startText string // and that line's text
	// cmd is the last command line pasted before the block (nil: none); it
	// names the family and backend of every block until the next one, and
	// the table of the first (tableCmd).
	cmd      *command
	tableCmd bool
	builtins []string
	chains   []*Chain
	byName   map[string]*Chain
	// family is the family its addresses show ("" when none does), first
	// shown on famLine.
	family  string
	famLine int
	table   string
	rules   []*Rule    // iptables -S: the rules, in order
	rows    []*listRow // iptables -L: the rows, read into rules once the family is known
	sawUser bool       // a user chain was listed
	sawRule bool
	// lastHook is the hook order of the last built-in chain listed.
	lastHook int
}

// hookOrder is the order iptables lists built-in chains in: a built-in
// chain that does not come after the last one starts another table.
var hookOrder = map[string]int{"PREROUTING": 0, "INPUT": 1, "FORWARD": 2, "OUTPUT": 3, "POSTROUTING": 4}

// builtinChains are each table's built-in chains.
var builtinChains = map[string][]string{
	"nat":      {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
	"mangle":   {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"raw":      {"PREROUTING", "OUTPUT"},
	"filter":   {"INPUT", "FORWARD", "OUTPUT"},
	"security": {"INPUT", "FORWARD", "OUTPUT"},
}

// tableOfBuiltins is the table whose built-in chains are exactly these
// (filter for INPUT, FORWARD and OUTPUT: security has the same, but is not
// what a listing without -t shows); "" when none is.
func tableOfBuiltins(names []string) string {
	have := append([]string(nil), names...)
	sort.Strings(have)
	for _, t := range []string{"nat", "mangle", "raw", "filter"} {
		want := append([]string(nil), builtinChains[t]...)
		sort.Strings(want)
		if strings.Join(have, " ") == strings.Join(want, " ") {
			return t
		}
	}
	return ""
}

func (b *block) noteFamily(fam string, line int, text string) error {
	switch {
	case fam == "":
	case b.family == "":
		b.family, b.famLine = fam, line
	case b.family != fam:
		return &ParseError{line, text, fmt.Sprintf("an %s address in a table listing whose line %d has an %s one", familyWord(fam), b.famLine, familyWord(b.family))}
	}
	return nil
}

func familyWord(f string) string {
	if f == "ipv6" {
		return "IPv6"
	}
	return "IPv4"
}

// addChain declares a chain of the block; ok is false when it already is.
func (b *block) addChain(c *Chain) bool {
	if b.byName[c.Name] != nil {
		return false
	}
	b.byName[c.Name] = c
	b.chains = append(b.chains, c)
	return true
}

// blockReader keeps the blocks of a listing as its lines are read.
type blockReader struct {
	blocks   []*block
	cur      *block
	cmd      *command
	cmdFresh bool
}

func (br *blockReader) command(c *command, n int) {
	c.Line = n
	br.cmd, br.cmdFresh, br.cur = c, c.Form == FormListRules || c.Form == FormList, nil
}

func (br *blockReader) newBlock(n int, text string) *block {
	br.cur = &block{start: n, startText: text, cmd: br.cmd, tableCmd: br.cmdFresh, byName: map[string]*Chain{}, lastHook: -1}
	br.cmdFresh = false
	br.blocks = append(br.blocks, br.cur)
	return br.cur
}

// builtin starts the block a built-in chain belongs to: the current one,
// unless it already listed user chains or rules, that chain, or a chain
// that comes later.
func (br *blockReader) builtin(name string, n int, text string, afterRules bool) *block {
	b := br.cur
	hook, ok := hookOrder[name]
	if !ok {
		hook = -1
	}
	if b == nil || b.sawUser || afterRules || b.byName[name] != nil || hook <= b.lastHook {
		b = br.newBlock(n, text)
	}
	b.builtins = append(b.builtins, name)
	b.lastHook = hook
	return b
}

// user starts the block a user chain belongs to.
func (br *blockReader) user(name string, n int, text string, afterRules bool) *block {
	b := br.cur
	if b == nil || afterRules || b.byName[name] != nil {
		b = br.newBlock(n, text)
	}
	b.sawUser = true
	return b
}

// parseListRules reads `iptables -S` output: -P (built-in chains and their
// policies), -N (user chains) and -A lines, the rules as iptables-save
// prints them; `iptables -v -S` adds "-c PACKETS BYTES".
func parseListRules(lines []string) ([]*block, error) {
	br := &blockReader{}
	for i, raw := range lines {
		n := i + 1
		line := strings.TrimSpace(raw)
		k, c := classifyLine(line)
		switch k {
		case kindBlank, kindComment, kindWarning, kindPrompt:
			continue
		case kindCommand:
			br.command(c, n)
			continue
		case kindRules, kindAppend:
		default:
			return nil, &ParseError{n, line, "not an iptables -S line"}
		}
		toks, err := tokenize(line)
		if err != nil {
			return nil, &ParseError{n, line, err.Error()}
		}
		text, p, b, counted, err := cutListCounters(line, toks)
		if err != nil {
			return nil, &ParseError{n, line, err.Error()}
		}
		if counted {
			if toks, err = tokenize(text); err != nil {
				return nil, &ParseError{n, line, err.Error()}
			}
		}
		if len(toks) < 2 {
			return nil, &ParseError{n, line, toks[0] + " needs a chain"}
		}
		name := toks[1]
		switch toks[0] {
		case "-P", "--policy":
			if len(toks) != 3 {
				return nil, &ParseError{n, line, "-P needs a chain and a policy"}
			}
			blk := br.builtin(name, n, line, br.cur != nil && br.cur.sawRule)
			if !blk.addChain(&Chain{Name: name, Policy: toks[2], Packets: p, Bytes: b}) {
				return nil, &ParseError{n, line, "chain listed twice"}
			}
		case "-N", "--new-chain":
			if len(toks) != 2 {
				return nil, &ParseError{n, line, "-N needs a chain name only"}
			}
			blk := br.user(name, n, line, br.cur != nil && br.cur.sawRule)
			if !blk.addChain(&Chain{Name: name}) {
				return nil, &ParseError{n, line, "chain listed twice"}
			}
		default: // -A
			blk := br.cur
			if blk == nil || blk.byName[name] == nil {
				return nil, &ParseError{n, line, "rule in a chain not listed before it (-P or -N " + name + ")"}
			}
			r := &Rule{Chain: name, Line: n, Spec: text, Packets: p, Bytes: b, HasCounters: counted}
			if err := parseRuleArgs(r, toks[2:]); err != nil {
				return nil, &ParseError{n, line, err.Error()}
			}
			if err := blk.noteFamily(prefixFamily(r), n, line); err != nil {
				return nil, err
			}
			blk.sawRule = true
			blk.rules = append(blk.rules, r)
		}
	}
	return br.blocks, nil
}

// prefixFamily is the family a rule's addresses are of, "" when it has none.
func prefixFamily(r *Rule) string {
	for _, p := range []bool{r.Match.Src != nil && r.Match.Src.Addr().Is6(), r.Match.Dst != nil && r.Match.Dst.Addr().Is6()} {
		if p {
			return "ipv6"
		}
	}
	if r.Match.Src != nil || r.Match.Dst != nil {
		return "ipv4"
	}
	return ""
}

// cutListCounters takes `iptables -v -S`'s "-c PACKETS BYTES" out of a line.
func cutListCounters(line string, toks []string) (text string, p, b uint64, ok bool, err error) {
	for i, t := range toks {
		if t != "-c" && t != "--set-counters" {
			continue
		}
		if i+2 >= len(toks) {
			return "", 0, 0, false, fmt.Errorf("%s needs packets and bytes", t)
		}
		var err1, err2 error
		p, err1 = strconv.ParseUint(toks[i+1], 10, 64)
		b, err2 = strconv.ParseUint(toks[i+2], 10, 64)
		if err1 != nil || err2 != nil {
			return "", 0, 0, false, fmt.Errorf("bad counters %s %s", toks[i+1], toks[i+2])
		}
		cut := " " + t + " " + toks[i+1] + " " + toks[i+2]
		j := strings.Index(line, cut)
		if j < 0 {
			return "", 0, 0, false, fmt.Errorf("counters not where expected")
		}
		return line[:j] + line[j+len(cut):], p, b, true, nil
	}
	return line, 0, 0, false, nil
}

// assembleBlocks gives each block its table and family, reads iptables -L's
// rows into rules, and gathers the blocks into one ruleset per family.
func assembleBlocks(form string, blocks []*block, lines []string) (*Dump, error) {
	if len(blocks) == 0 {
		return nil, fmt.Errorf("no chains in the %s output (%s)", form, acceptedForms)
	}
	// Tables.
	for _, b := range blocks {
		if b.tableCmd && b.cmd.Table != "" {
			b.table = b.cmd.Table
			allowed := map[string]bool{}
			for _, c := range builtinChains[b.table] {
				allowed[c] = true
			}
			for _, c := range b.builtins {
				if !allowed[c] {
					return nil, &ParseError{b.start, b.startText, fmt.Sprintf("%s is not a built-in chain of table %s, which the command line %d names", c, b.table, b.cmd.Line)}
				}
			}
			continue
		}
		if b.table = tableOfBuiltins(b.builtins); b.table == "" {
			what := "it lists no built-in chain"
			if len(b.builtins) > 0 {
				what = "its built-in chains (" + strings.Join(b.builtins, ", ") + ") are no table's exactly"
			}
			return nil, &ParseError{b.start, b.startText, "cannot tell which table this listing is: " + what + "; paste it with the command line that printed it (e.g. `$ iptables -t nat " + map[string]string{FormListRules: "-S", FormList: "-L -v -n"}[form] + "`)"}
		}
	}
	// Families: the command line's, else the addresses', else that of the
	// other blocks when they agree.
	seen := map[string]bool{}
	for _, b := range blocks {
		if b.cmd != nil && b.cmd.Family != "" {
			if b.family != "" && b.family != b.cmd.Family {
				return nil, &ParseError{b.famLine, strings.TrimSpace(lines[b.famLine-1]), fmt.Sprintf("an %s address in the output of the command on line %d", familyWord(b.family), b.cmd.Line)}
			}
			b.family = b.cmd.Family
		}
		if b.family != "" {
			seen[b.family] = true
		}
	}
	for _, b := range blocks {
		if b.family != "" {
			continue
		}
		switch {
		case len(seen) == 2:
			return nil, &ParseError{b.start, b.startText, "cannot tell whether this listing is IPv4 or IPv6 (others are of each): paste it with the command line that printed it"}
		case seen["ipv6"]:
			b.family = "ipv6"
		default:
			b.family = "ipv4"
		}
	}
	// One ruleset per family, a table per name.
	var sets []*Ruleset
	byFamily := map[string]*Ruleset{}
	for _, fam := range []string{"ipv4", "ipv6"} {
		for _, b := range blocks {
			if b.family != fam {
				continue
			}
			rs := byFamily[fam]
			if rs == nil {
				rs = &Ruleset{Family: fam, Form: form}
				byFamily[fam] = rs
				sets = append(sets, rs)
			}
			if b.cmd != nil && rs.Backend == "" {
				rs.Backend = b.cmd.Backend
			}
			if err := b.readRows(); err != nil {
				return nil, err
			}
			t := rs.Table(b.table)
			if t == nil {
				t = &Table{Name: b.table}
				rs.Tables = append(rs.Tables, t)
			}
			for _, c := range b.chains {
				if t.Chain(c.Name) != nil {
					return nil, &ParseError{b.start, b.startText, fmt.Sprintf("chain %s of the %s table %s is listed twice", c.Name, familyWord(fam), b.table)}
				}
				t.Chains = append(t.Chains, c)
			}
			for _, r := range b.rules {
				r.Table = b.table
				b.byName[r.Chain].Rules = append(b.byName[r.Chain].Rules, r)
				if r.Rounded {
					rs.CountersRounded = true
				}
			}
			for _, c := range b.chains {
				if c.Rounded {
					rs.CountersRounded = true
				}
			}
		}
	}
	var warnings []string
	have := map[string]bool{}
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if k, _ := classifyLine(l); k == kindWarning {
			w := strings.TrimSpace(strings.TrimPrefix(l, "#"))
			if !have[w] {
				have[w] = true
				warnings = append(warnings, w)
			}
		}
	}
	for _, rs := range sets {
		rs.Warnings = warnings
		if rs.Backend == "" {
			for _, w := range warnings {
				// Only iptables-nft says that legacy tables exist too.
				if strings.Contains(w, "-legacy tables present") {
					rs.Backend = "nft"
				}
			}
		}
	}
	return &Dump{Form: form, Rulesets: sets}, nil
}
