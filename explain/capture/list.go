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

// listOptionTokens splits the options column into words, a comment
// ("/* … */") being one.
func listOptionTokens(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		switch {
		case s[i] == ' ' || s[i] == '\t':
			i++
		case strings.HasPrefix(s[i:], "/* "):
			end := strings.Index(s[i+3:], " */")
			if end < 0 {
				out = append(out, s[i:])
				return out
			}
			out = append(out, s[i:i+3+end+3])
			i += 3 + end + 3
		default:
			j := i
			for j < len(s) && s[j] != ' ' && s[j] != '\t' {
				j++
			}
			out = append(out, s[i:j])
			i = j
		}
	}
	return out
}

// listOptions reads a row's options column.
type listOptions struct {
	toks    []string
	i       int
	r       *Rule
	family  string
	proto   string
	spec    []string // the matches as iptables-save prints them
	unknown []string // unread words, gathered into one unknown match
}

func (o *listOptions) peek(k int) string {
	if o.i+k < len(o.toks) {
		return o.toks[o.i+k]
	}
	return ""
}

// flushUnknown records the words read as none of the matches below as one
// unknown match.
func (o *listOptions) flushUnknown() {
	if len(o.unknown) == 0 {
		return
	}
	text := strings.Join(o.unknown, " ")
	o.r.Match.Unknown = append(o.r.Match.Unknown, listUnknown+text)
	o.spec = append(o.spec, "("+listUnknown+text+")")
	o.unknown = nil
}

func (o *listOptions) read() error {
	m := &o.r.Match
	for o.i < len(o.toks) {
		t := o.toks[o.i]
		not := false
		if t == "!" && o.i+1 < len(o.toks) {
			switch o.peek(1) {
			case "owner", "ctstate", "state":
				not = true
				o.i++
				t = o.toks[o.i]
			}
		}
		known := true
		switch {
		case (t == "tcp" || t == "udp") && !not:
			o.i++
			o.ports(t)
			continue
		case t == "multiport" && (o.peek(1) == "dports" || o.peek(1) == "sports" || o.peek(1) == "ports"):
			o.flushUnknown()
			which := o.peek(1)
			o.i += 2
			v := o.peek(0)
			if v == "!" {
				o.i++
				v, not = o.peek(0), true
			} else if strings.HasPrefix(v, "!") {
				v, not = v[1:], true
			}
			o.i++
			ports, text, ok := listPorts(v)
			opt := "--" + which
			switch {
			case !ok:
				m.Unknown = append(m.Unknown, listUnknown+"multiport "+which+" "+v+" (a service name not known: paste iptables -L -n output)")
			case which == "dports":
				m.DPorts, m.NotDPort = ports, not
			case which == "sports":
				m.SPorts, m.NotSPrt = ports, not
			default:
				// iptables-save's --ports, which ParseSave does not evaluate either.
				u := "--ports " + text
				if not {
					u = "! " + u
				}
				m.Unknown = append(m.Unknown, u)
			}
			o.spec = append(o.spec, "-m", "multiport")
			o.spec = append(o.spec, negWords(not, opt, text)...)
			continue
		case t == "owner" && (o.peek(1) == "UID" || o.peek(1) == "GID") && o.peek(2) == "match" && o.peek(3) != "":
			o.flushUnknown()
			which, v := o.peek(1), o.peek(3)
			o.i += 4
			id, ok := listOwner(v)
			opt := map[string]string{"UID": "--uid-owner", "GID": "--gid-owner"}[which]
			switch {
			case !ok:
				m.Unknown = append(m.Unknown, strings.Join(negWords(not, listUnknown+"owner "+which+" match "+v+" (a name, not resolved: paste iptables -L -n output)"), " "))
			case which == "UID":
				m.UID, m.NotUID = id, not
			default:
				m.GID, m.NotGID = id, not
			}
			o.spec = append(o.spec, "-m", "owner")
			o.spec = append(o.spec, negWords(not, opt, v)...)
			continue
		case t == "owner" && o.peek(1) == "socket" && o.peek(2) == "exists":
			o.flushUnknown()
			o.i += 3
			m.Unknown = append(m.Unknown, strings.Join(negWords(not, "--socket-exists"), " "))
			o.spec = append(o.spec, "-m", "owner")
			o.spec = append(o.spec, negWords(not, "--socket-exists")...)
			continue
		case (t == "mark" || t == "connmark") && o.peek(1) == "match" && o.peek(2) != "":
			o.flushUnknown()
			o.i += 2
			v := o.peek(0)
			if v == "!" && o.peek(1) != "" {
				o.i++
				v, not = o.peek(0), true
			}
			o.i++
			if t == "mark" {
				m.Mark, m.NotMark = v, not
			} else {
				m.ConnMark, m.NotConnMark = v, not
			}
			o.spec = append(o.spec, "-m", t)
			o.spec = append(o.spec, negWords(not, "--mark", v)...)
			continue
		case (t == "ctstate" || t == "state") && o.peek(1) != "":
			o.flushUnknown()
			v := o.peek(1)
			o.i += 2
			if v == "!" && o.peek(0) != "" {
				v, not = o.peek(0), true
				o.i++
			}
			m.CTState, m.NotCTState = strings.Split(v, ","), not
			if t == "ctstate" {
				o.spec = append(o.spec, "-m", "conntrack")
				o.spec = append(o.spec, negWords(not, "--ctstate", v)...)
			} else {
				o.spec = append(o.spec, "-m", "state")
				o.spec = append(o.spec, negWords(not, "--state", v)...)
			}
			continue
		case strings.HasPrefix(t, "/* ") && strings.HasSuffix(t, " */") && !not:
			o.flushUnknown()
			o.i++
			m.Comment = t[3 : len(t)-3]
			o.spec = append(o.spec, "-m", "comment", "--comment", strconv.Quote(m.Comment))
			continue
		case t == "[goto]" && !not:
			o.flushUnknown()
			o.i++
			o.r.Goto = true
			continue
		default:
			known = false
		}
		if !known && !not && o.target() {
			continue
		}
		if not {
			o.unknown = append(o.unknown, "!")
		}
		o.unknown = append(o.unknown, t)
		o.i++
	}
	o.flushUnknown()
	return nil
}

// negWords puts iptables-save's "!" before an option when negated.
func negWords(not bool, w ...string) []string {
	if not {
		return append([]string{"!"}, w...)
	}
	return w
}

// ports reads the tcp or udp match: "tcp dpt:15008", "udp spts:1:2 dpt:!53".
func (o *listOptions) ports(proto string) {
	o.flushUnknown()
	m := &o.r.Match
	spec := []string{"-m", proto}
	for {
		t := o.peek(0)
		key, v, ok := strings.Cut(t, ":")
		if !ok || (key != "dpt" && key != "dpts" && key != "spt" && key != "spts") {
			break
		}
		o.i++
		v, not := strings.CutPrefix(v, "!")
		ports, text, ok := listPorts(v)
		opt := "--dport"
		if key[0] == 's' {
			opt = "--sport"
		}
		switch {
		case !ok:
			m.Unknown = append(m.Unknown, listUnknown+proto+" "+t+" (a service name not known: paste iptables -L -n output)")
		case opt == "--dport":
			m.DPorts, m.NotDPort = ports, not
		default:
			m.SPorts, m.NotSPrt = ports, not
		}
		spec = append(spec, negWords(not, opt, text)...)
	}
	// The other options of tcp (flags:, option=) are not evaluated.
	for t := o.peek(0); strings.HasPrefix(t, "flags:") || strings.HasPrefix(t, "option=") || strings.HasPrefix(t, "!option="); t = o.peek(0) {
		o.unknown = append(o.unknown, proto, t)
		o.i++
		o.flushUnknown()
	}
	o.spec = append(o.spec, spec...)
}

// listPorts reads ports as iptables -L prints them: "53", "domain",
// "15000:15100", "53,15008" (multiport). text is them in numbers when all
// are known, else as printed.
func listPorts(s string) ([]portRange, string, bool) {
	var out []portRange
	var text []string
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, ":")
		a, ok1 := serviceNumber(lo)
		b, ok2 := a, true
		if isRange {
			b, ok2 = serviceNumber(hi)
		}
		if !ok1 || !ok2 {
			return nil, s, false
		}
		pr := portRange{a, b}
		out = append(out, pr)
		text = append(text, pr.String())
	}
	return out, strings.Join(text, ","), true
}

// listOwner reads an owner as iptables -L prints it: a number, a range, or
// a user name (only root's is known everywhere).
func listOwner(s string) (string, bool) {
	if s == "root" {
		return "0", true
	}
	lo, hi, isRange := strings.Cut(s, "-")
	if _, err := strconv.ParseUint(lo, 10, 32); err != nil {
		return "", false
	}
	if isRange {
		if _, err := strconv.ParseUint(hi, 10, 32); err != nil {
			return "", false
		}
	}
	return s, true
}

// target reads the target's own print, which ends the options column, into
// the target options iptables-save prints; false when the word at hand does
// not start the print of the rule's target.
func (o *listOptions) target() bool {
	r := o.r
	t := o.peek(0)
	var args []string
	n := 0 // words read
	switch {
	case r.Target == "REDIRECT" && t == "redir" && o.peek(1) == "ports" && o.peek(2) != "":
		args, n = []string{"--to-ports", o.peek(2)}, 3
	case r.Target == "REDIRECT" && t == "random":
		args, n = []string{"--random"}, 1
	case r.Target == "TPROXY" && t == "TPROXY" && o.peek(1) == "redirect" && o.peek(2) != "":
		// TPROXY redirect 0.0.0.0:15006 mark 0x539/0xffffffff
		addr := o.peek(2)
		j := strings.LastIndex(addr, ":")
		if j < 0 {
			return false
		}
		args, n = []string{"--on-port", addr[j+1:], "--on-ip", addr[:j]}, 3
		if o.peek(3) == "mark" && o.peek(4) != "" {
			args, n = append(args, "--tproxy-mark", o.peek(4)), 5
		}
	case r.Target == "MARK" && t == "MARK" && o.peek(2) != "":
		v, ok := listXmark(o.peek(1), o.peek(2))
		if !ok {
			return false
		}
		args, n = []string{"--set-xmark", v}, 3
	case r.Target == "CONNMARK" && t == "CONNMARK" && o.peek(1) != "":
		var ok bool
		if args, n, ok = o.connmark(); !ok {
			return false
		}
	case r.Target == "CT" && t == "CT" && o.peek(1) != "":
		// CT zone 1, CT notrack, CT helper ftp, …
		n = 1
		for o.peek(n) != "" && o.peek(n) != "[goto]" {
			w := o.peek(n)
			if w == "notrack" {
				args = append(args, "--notrack")
				n++
				continue
			}
			args = append(args, "--"+w)
			if o.peek(n+1) != "" && o.peek(n+1) != "[goto]" {
				args = append(args, o.peek(n+1))
				n++
			}
			n++
		}
	case (r.Target == "DNAT" || r.Target == "SNAT") && strings.HasPrefix(t, "to:"),
		r.Target == "MASQUERADE" && (t == "masq" || t == "random"),
		r.Target == "REJECT" && t == "reject-with",
		r.Target == "LOG" && t == "LOG":
		// Not a capture target: its print is kept as its options, with
		// iptables-save's names where they are plain ("to:X" is DNAT's
		// --to-destination X).
		for n = 0; o.peek(n) != "" && o.peek(n) != "[goto]"; n++ {
			w := o.peek(n)
			switch {
			case strings.HasPrefix(w, "to:") && r.Target == "DNAT":
				args = append(args, "--to-destination", w[3:])
			case strings.HasPrefix(w, "to:") && r.Target == "SNAT":
				args = append(args, "--to-source", w[3:])
			case w == "reject-with":
				args = append(args, "--reject-with")
			case w == "random" || w == "persistent" || w == "fully-random":
				args = append(args, "--"+w)
			default:
				args = append(args, w)
			}
		}
	default:
		return false
	}
	o.flushUnknown()
	o.i += n
	r.TargetArgs = append(r.TargetArgs, args...)
	return true
}

// listXmark reads MARK's or CONNMARK's print of --set-xmark VALUE/MASK:
// "set V" (all bits), "xset V/M", "and V", "or V", "xor V".
func listXmark(op, v string) (string, bool) {
	val, mask, hasMask := strings.Cut(v, "/")
	x, err := strconv.ParseUint(val, 0, 32)
	if err != nil {
		return "", false
	}
	switch op {
	case "set":
		if hasMask {
			return "", false
		}
		return fmt.Sprintf("0x%x/0xffffffff", x), true
	case "xset":
		mk := uint64(0xffffffff)
		if hasMask {
			if mk, err = strconv.ParseUint(mask, 0, 32); err != nil {
				return "", false
			}
		}
		return fmt.Sprintf("0x%x/0x%x", x, mk), true
	case "and":
		return fmt.Sprintf("0x0/0x%x", ^x&0xffffffff), !hasMask
	case "or":
		return fmt.Sprintf("0x%x/0x%x", x, x), !hasMask
	case "xor":
		return fmt.Sprintf("0x%x/0x0", x), !hasMask
	}
	return "", false
}

// connmark reads CONNMARK's print: "save", "restore" (with their masks) or
// one of MARK's operations on the connection's mark.
func (o *listOptions) connmark() ([]string, int, bool) {
	op := o.peek(1)
	full := "0xffffffff"
	switch op {
	case "save", "restore":
		flag := "--" + op + "-mark"
		nf, ct := full, full
		n := 2
		// "save mask M", "save nfmask A ctmask ~B", "restore ctmask A nfmask ~B"
		for {
			k, v := o.peek(n), strings.TrimPrefix(o.peek(n+1), "~")
			if v == "" {
				break
			}
			if _, err := strconv.ParseUint(v, 0, 32); err != nil {
				break
			}
			switch k {
			case "mask":
				nf, ct = v, v
			case "nfmask":
				nf = v
			case "ctmask":
				ct = v
			default:
				return []string{flag, "--nfmask", nf, "--ctmask", ct}, n, true
			}
			n += 2
		}
		return []string{flag, "--nfmask", nf, "--ctmask", ct}, n, true
	}
	v, ok := listXmark(op, o.peek(2))
	if !ok {
		return nil, 0, false
	}
	return []string{"--set-xmark", v}, 3, true
}
