package capture

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// iptables -L -v prints a table as its chains, each a header line
//
//	Chain PREROUTING (policy ACCEPT 206K packets, 12M bytes)
//	Chain ISTIO_INBOUND (1 references)
//
// a column header and one row per rule:
//
//	[num] pkts bytes target prot opt in out source destination [options]
//
// Without -x the counters are rounded (206K); without -n, protocols, ports,
// addresses and owners are names. The options column is each match's and
// then the target's own print ("tcp dpt:15008", "owner UID match 1337",
// "redir ports 15006"): read back here into the fields iptables-save's
// options fill, so that a rule means the same whichever form it came in.

// listRow is one row of iptables -L -v, split into its columns.
type listRow struct {
	line    int
	text    string
	chain   *Chain
	pkts    uint64
	bytes   uint64
	rounded bool
	target  string
	prot    string
	opt     string // "--", "-f", "!f"; "" when the listing has no such column
	in, out string
	src     string
	dst     string
	options string
}

// isListCounter tells a counter as iptables -L prints it: 123, 206K, 12M.
func isListCounter(s string) bool {
	_, _, ok := parseListCounter(s)
	return ok
}

// parseListCounter reads a counter of iptables -L: exact, or rounded to
// thousands (K), millions (M), … when above 99999 (without -x).
func parseListCounter(s string) (n uint64, rounded, ok bool) {
	if s == "" {
		return 0, false, false
	}
	mult := uint64(1)
	switch s[len(s)-1] {
	case 'K':
		mult = 1e3
	case 'M':
		mult = 1e6
	case 'G':
		mult = 1e9
	case 'T':
		mult = 1e12
	}
	digits := s
	if mult > 1 {
		digits = s[:len(s)-1]
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || digits[0] == '+' {
		return 0, false, false
	}
	if mult > 1 && v > ^uint64(0)/mult {
		return 0, false, false
	}
	return v * mult, mult > 1, true
}

// isListHeader tells iptables -L's column header.
func isListHeader(f []string) bool {
	have := map[string]bool{}
	for _, w := range f {
		have[w] = true
	}
	return have["target"] && have["prot"] && have["source"] && have["destination"]
}

// listFormat is what a chain's column header says its rows hold.
type listFormat struct{ num bool }

// parseList reads iptables -L -v output.
func parseList(lines []string) ([]*block, error) {
	br := &blockReader{}
	var chain *Chain
	var format *listFormat
	for i, raw := range lines {
		n := i + 1
		line := strings.TrimSpace(raw)
		k, c := classifyLine(line)
		switch k {
		case kindBlank, kindComment, kindWarning, kindPrompt:
			continue
		case kindCommand:
			br.command(c, n)
			chain, format = nil, nil
			continue
		case kindList:
		default:
			return nil, &ParseError{n, line, "not an iptables -L line"}
		}
		f := strings.Fields(line)
		switch {
		case f[0] == "Chain":
			c, builtin, err := parseChainHeader(line)
			if err != nil {
				return nil, &ParseError{n, line, err.Error()}
			}
			var b *block
			if builtin {
				b = br.builtin(c.Name, n, line, false)
			} else {
				b = br.user(c.Name, n, line, false)
			}
			if !b.addChain(c) {
				return nil, &ParseError{n, line, "chain listed twice"}
			}
			chain, format = c, nil
		case isListHeader(f):
			if chain == nil {
				return nil, &ParseError{n, line, "column header without a Chain line before it"}
			}
			have := map[string]bool{}
			for _, w := range f {
				have[w] = true
			}
			if !have["pkts"] || !have["in"] || !have["out"] {
				return nil, &ParseError{n, line, "iptables -L without -v leaves out the rules' interfaces and counters: paste iptables -L -v -n output"}
			}
			format = &listFormat{num: f[0] == "num"}
		default:
			if chain == nil || format == nil {
				return nil, &ParseError{n, line, "a rule row without a Chain line and column header before it"}
			}
			row, err := parseListRow(raw, format)
			if err != nil {
				return nil, &ParseError{n, line, err.Error()}
			}
			row.line, row.text, row.chain = n, line, chain
			b := br.cur
			for _, a := range []string{row.src, row.dst} {
				if err := b.noteFamily(listAddrFamily(a), n, line); err != nil {
					return nil, err
				}
			}
			if _, after, ok := strings.Cut(row.options, "TPROXY redirect "); ok {
				addr, _, _ := strings.Cut(after, " ")
				if j := strings.LastIndex(addr, ":"); j > 0 {
					if err := b.noteFamily(listAddrFamily(addr[:j]), n, line); err != nil {
						return nil, err
					}
				}
			}
			b.rows = append(b.rows, row)
		}
	}
	return br.blocks, nil
}

// parseChainHeader reads "Chain NAME (policy P [N packets, M bytes])" or
// "Chain NAME (N references)".
func parseChainHeader(line string) (*Chain, bool, error) {
	rest := strings.TrimSpace(strings.TrimPrefix(line, "Chain"))
	name, paren, _ := strings.Cut(rest, " ")
	paren = strings.TrimSpace(paren)
	if name == "" || !strings.HasPrefix(paren, "(") || !strings.HasSuffix(paren, ")") {
		return nil, false, fmt.Errorf("chain header needs a name and (policy …) or (N references)")
	}
	f := strings.Fields(strings.NewReplacer(",", " ").Replace(paren[1 : len(paren)-1]))
	c := &Chain{Name: name}
	if len(f) == 0 || f[0] != "policy" {
		return c, false, nil // (N references)
	}
	if len(f) < 2 {
		return nil, false, fmt.Errorf("policy without its verdict")
	}
	c.Policy = f[1]
	if len(f) >= 6 && f[3] == "packets" && f[5] == "bytes" {
		p, rp, ok1 := parseListCounter(f[2])
		b, rb, ok2 := parseListCounter(f[4])
		if !ok1 || !ok2 {
			return nil, false, fmt.Errorf("bad policy counters")
		}
		c.Packets, c.Bytes, c.Rounded = p, b, rp || rb
	}
	return c, true, nil
}

// listField is a word of a row and where it ends.
type listField struct {
	s   string
	end int
}

func listFields(s string, max int) []listField {
	var out []listField
	for i := 0; i < len(s) && len(out) < max; {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '\t' {
			j++
		}
		if j > i {
			out = append(out, listField{s[i:j], j})
		}
		i = j
	}
	return out
}

func isListOpt(s string) bool { return s == "--" || s == "-f" || s == "!f" }

// parseListRow splits a row into its columns. The target column is empty
// for a rule without one; ip6tables before 1.8.8 leaves the opt column
// blank.
func parseListRow(line string, format *listFormat) (*listRow, error) {
	f := listFields(line, 12)
	i := 0
	if format.num {
		if len(f) == 0 {
			return nil, fmt.Errorf("empty row")
		}
		if _, err := strconv.ParseUint(f[0].s, 10, 32); err != nil {
			return nil, fmt.Errorf("rule number %q", f[0].s)
		}
		i++
	}
	if len(f) < i+7 {
		return nil, fmt.Errorf("a row needs counters, protocol, interfaces, source and destination")
	}
	r := &listRow{}
	var ok1, ok2 bool
	var r1, r2 bool
	r.pkts, r1, ok1 = parseListCounter(f[i].s)
	r.bytes, r2, ok2 = parseListCounter(f[i+1].s)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("bad counters %q %q", f[i].s, f[i+1].s)
	}
	r.rounded = r1 || r2
	i += 2
	word := func(k int) string {
		if k < len(f) {
			return f[k].s
		}
		return ""
	}
	switch {
	case isListOpt(word(i + 1)):
		r.prot, r.opt = f[i].s, f[i+1].s
		i += 2
	case isListOpt(word(i + 2)):
		r.target, r.prot, r.opt = f[i].s, f[i+1].s, f[i+2].s
		i += 3
	case isListProto(word(i + 1)):
		r.target, r.prot = f[i].s, f[i+1].s
		i += 2
	default:
		r.prot = f[i].s
		i++
	}
	if !isListProto(r.prot) {
		return nil, fmt.Errorf("protocol %q", r.prot)
	}
	if len(f) < i+4 {
		return nil, fmt.Errorf("a row needs interfaces, source and destination")
	}
	r.in, r.out, r.src, r.dst = f[i].s, f[i+1].s, f[i+2].s, f[i+3].s
	r.options = strings.TrimSpace(line[f[i+3].end:])
	return r, nil
}

// listAddrFamily is the family an address column shows: "" for a name.
func listAddrFamily(s string) string {
	s = strings.TrimPrefix(s, "!")
	host, _, _ := strings.Cut(s, "/")
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Is4() {
			return "ipv4"
		}
		return "ipv6"
	}
	return ""
}

// readRows reads the block's rows into rules, now that its family is known.
func (b *block) readRows() error {
	for _, row := range b.rows {
		r, err := row.rule(b.family)
		if err != nil {
			return &ParseError{row.line, row.text, err.Error()}
		}
		b.rules = append(b.rules, r)
	}
	b.rows = nil
	return nil
}

// listUnknown starts an unknown match read from iptables -L (a trace
// through its rule says it could not evaluate it).
const listUnknown = "iptables -L: "

// rule reads a row into a rule, as iptables-save would have printed it.
func (row *listRow) rule(family string) (*Rule, error) {
	r := &Rule{Chain: row.chain.Name, Line: row.line, Packets: row.pkts, Bytes: row.bytes, HasCounters: true, Rounded: row.rounded, Target: row.target}
	m := &r.Match
	var head []string
	neg := func(b bool, s ...string) []string {
		if b {
			return append([]string{"!"}, s...)
		}
		return s
	}
	// Addresses, interfaces, protocol, fragments: in iptables-save's order.
	for _, a := range []struct {
		col, opt, what string
		p              **netip.Prefix
		not            *bool
	}{{row.src, "-s", "source", &m.Src, &m.NotSrc}, {row.dst, "-d", "destination", &m.Dst, &m.NotDst}} {
		p, not, text, unknown := listAddr(a.col, family)
		switch {
		case unknown:
			m.Unknown = append(m.Unknown, strings.Join(neg(not, listUnknown+a.what+" "+text+" (a name, not resolved: paste iptables -L -n output)"), " "))
			head = append(head, neg(not, a.opt, text)...)
		case p != nil:
			*a.p, *a.not = p, not
			head = append(head, neg(not, a.opt, text)...)
		}
	}
	for _, a := range []struct {
		col, opt string
		v        *string
		not      *bool
	}{{row.in, "-i", &m.In, &m.NotIn}, {row.out, "-o", &m.Out, &m.NotOut}} {
		name, not := strings.CutPrefix(a.col, "!")
		if name == "any" || name == "*" {
			continue
		}
		*a.v, *a.not = name, not
		head = append(head, neg(not, a.opt, name)...)
	}
	proto, notProto := strings.CutPrefix(row.prot, "!")
	if n, ok := protoNames[proto]; ok {
		proto = n
	}
	if proto != "all" {
		m.Proto, m.NotProto = proto, notProto
		head = append(head, neg(notProto, "-p", proto)...)
	}
	switch row.opt {
	case "-f":
		m.Unknown = append(m.Unknown, "-f")
		head = append(head, "-f")
	case "!f":
		m.Unknown = append(m.Unknown, "! -f")
		head = append(head, "!", "-f")
	}
	op := &listOptions{toks: listOptionTokens(row.options), r: r, family: family, proto: proto}
	if err := op.read(); err != nil {
		return nil, err
	}
	spec := append([]string{"-A", r.Chain}, head...)
	spec = append(spec, op.spec...)
	if r.Target != "" {
		jump := "-j"
		if r.Goto {
			jump = "-g"
		}
		spec = append(spec, jump, r.Target)
		spec = append(spec, r.TargetArgs...)
	}
	r.Spec = strings.Join(spec, " ")
	return r, nil
}

// listAddr reads an address column: nil for anywhere; unknown for a name
// this package does not know (text is then the name).
func listAddr(col, family string) (p *netip.Prefix, not bool, text string, unknown bool) {
	s, not := strings.CutPrefix(col, "!")
	if s == "anywhere" || s == "0.0.0.0/0" || s == "::/0" {
		if !not {
			return nil, false, "", false
		}
		if s == "anywhere" {
			s = map[bool]string{true: "::/0", false: "0.0.0.0/0"}[family == "ipv6"]
		}
	}
	host, mask, hasMask := strings.Cut(s, "/")
	a, ok := resolveListHost(host, family)
	if !ok {
		return nil, not, s, true
	}
	bits := a.BitLen()
	if hasMask {
		if bits, ok = listMaskBits(mask, a); !ok {
			return nil, not, s, true
		}
	}
	pf := netip.PrefixFrom(a, bits)
	return &pf, not, pf.String(), false
}
