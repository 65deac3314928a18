package capture

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Ruleset is a parsed iptables-save (or ip6tables-save) dump, of either
// backend, with or without counters.
type Ruleset struct {
	Tables []*Table `json:"tables"`
	// Backend is "nft" or "legacy" when the dump's header says so.
	Backend string `json:"backend,omitempty"`
	// Family is "ipv4" or "ipv6".
	Family string `json:"family"`
	// Warnings are the dump's "# Warning: …" lines (e.g. iptables-nft-save
	// saying that legacy tables exist too).
	Warnings []string `json:"warnings,omitempty"`
	// Ambient is set for ambient mode's in-pod rules (IsAmbientInPod).
	Ambient bool `json:"ambient,omitempty"`
	// Form is the form the rules were read from: FormSave, FormListRules,
	// FormList or FormNft.
	Form string `json:"form,omitempty"`
	// CountersRounded says some counters are iptables -L's rounded ones
	// (206K), read as approximate numbers.
	CountersRounded bool `json:"countersRounded,omitempty"`
	// Foreign are the tables of an nft listing that are not Istio's own,
	// with rules (one line each): none of them is what the native mode
	// writes.
	Foreign []string `json:"foreign,omitempty"`
}

// Table is one table (nat, mangle, raw, filter) of a dump.
type Table struct {
	Name string `json:"name"`
	// Native is the table's own name in a native nftables ruleset ("inet
	// istio-proxy-nat"), "" for iptables.
	Native string   `json:"nftName,omitempty"`
	Chains []*Chain `json:"chains"`
}

// Chain is one chain with its rules, in order.
type Chain struct {
	Name string `json:"name"`
	// Native is the chain's own name in a native nftables ruleset
	// ("prerouting", "istio-inbound"), "" for iptables.
	Native  string  `json:"nftName,omitempty"`
	Policy  string  `json:"policy,omitempty"` // ACCEPT/DROP for built-in chains, "" for user chains
	Packets uint64  `json:"packets"`
	Bytes   uint64  `json:"bytes"`
	Rules   []*Rule `json:"rules"`
	// Rounded: the counters are iptables -L's rounded ones, approximate.
	Rounded bool `json:"rounded,omitempty"`
}

// Rule is one rule as iptables-save printed it, parsed.
type Rule struct {
	Table string `json:"table"`
	Chain string `json:"chain"`
	// Spec is the rule as iptables-save prints it, without counters.
	Spec        string `json:"rule"`
	Packets     uint64 `json:"packets"`
	Bytes       uint64 `json:"bytes"`
	HasCounters bool   `json:"-"`
	// Rounded: the counters are iptables -L's rounded ones (206K, 12M),
	// approximate.
	Rounded bool `json:"rounded,omitempty"`
	Line    int  `json:"line"`

	Match      RuleMatch `json:"-"`
	Target     string    `json:"target"`
	Goto       bool      `json:"-"`
	TargetArgs []string  `json:"-"`
	// Annotation is the rule in plain language, filled by Annotate.
	Annotation string `json:"annotation,omitempty"`
	// PacketsDelta and BytesDelta are what the rule counted between two
	// dumps (--interval).
	PacketsDelta *uint64 `json:"packetsDelta,omitempty"`
	BytesDelta   *uint64 `json:"bytesDelta,omitempty"`
}

// RuleMatch holds what a rule matches on; unset fields match anything.
type RuleMatch struct {
	Proto             string
	NotProto          bool
	Src, Dst          *netip.Prefix
	NotSrc, NotDst    bool
	In, Out           string
	NotIn, NotOut     bool
	DPorts, SPorts    []portRange
	NotDPort, NotSPrt bool
	UID, GID          string
	NotUID, NotGID    bool
	Mark              string // value[/mask], as printed
	NotMark           bool
	ConnMark          string
	NotConnMark       bool
	CTState           []string
	NotCTState        bool
	Comment           string
	// Unknown lists match options this parser does not evaluate; a trace
	// through such a rule says so.
	Unknown []string
}

type portRange struct{ lo, hi uint16 }

func (p portRange) String() string {
	if p.lo == p.hi {
		return strconv.Itoa(int(p.lo))
	}
	return fmt.Sprintf("%d:%d", p.lo, p.hi)
}

func (p portRange) contains(port uint16) bool { return port >= p.lo && port <= p.hi }

// ParseError is a line iptables-save would not have printed.
type ParseError struct {
	Line int
	Text string
	Msg  string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("line %d: %s: %q", e.Line, e.Msg, truncate(e.Text, 80))
}

// truncate cuts s to n bytes, marking the cut with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ParseSave parses iptables-save output. It accepts both backends' dialects
// (iptables-nft-save and iptables-legacy-save), with counters (-c) or
// without, and keeps "# Warning" lines.
func ParseSave(data []byte) (*Ruleset, error) {
	rs := &Ruleset{Family: "ipv4", Form: FormSave}
	var table *Table
	chains := map[string]*Chain{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	n := 0
	sawAny := false
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "#"):
			body := strings.TrimSpace(strings.TrimPrefix(line, "#"))
			switch {
			case strings.HasPrefix(body, "Warning"):
				rs.Warnings = append(rs.Warnings, body)
			case strings.HasPrefix(body, "Generated by"):
				if strings.Contains(body, "ip6tables") {
					rs.Family = "ipv6"
				}
				// iptables-nft-save says "(nf_tables)"; the legacy tool says
				// "(legacy)" or, in 1.8.9, nothing at all.
				if strings.Contains(body, "nf_tables") || strings.Contains(body, "-nft-") {
					rs.Backend = "nft"
				} else {
					rs.Backend = "legacy"
				}
			}
			continue
		case strings.HasPrefix(line, "*"):
			name := strings.TrimSpace(line[1:])
			if name == "" {
				return nil, &ParseError{n, line, "table name missing"}
			}
			if rs.Table(name) != nil {
				return nil, &ParseError{n, line, "table " + name + " a second time: two dumps pasted together (both backends?); give each with its own --from-file"}
			}
			table = &Table{Name: name}
			rs.Tables = append(rs.Tables, table)
			chains = map[string]*Chain{}
			sawAny = true
		case line == "COMMIT":
			if table == nil {
				return nil, &ParseError{n, line, "COMMIT outside a table"}
			}
			table = nil
		case strings.HasPrefix(line, ":"):
			if table == nil {
				return nil, &ParseError{n, line, "chain outside a table"}
			}
			f := strings.Fields(line[1:])
			if len(f) < 2 {
				return nil, &ParseError{n, line, "chain line needs a name and a policy"}
			}
			c := &Chain{Name: f[0]}
			if f[1] != "-" {
				c.Policy = f[1]
			}
			if len(f) >= 3 {
				p, b, ok := parseCounters(f[2])
				if !ok {
					return nil, &ParseError{n, line, "bad counters"}
				}
				c.Packets, c.Bytes = p, b
			}
			if _, dup := chains[c.Name]; dup {
				return nil, &ParseError{n, line, "chain declared twice"}
			}
			chains[c.Name] = c
			table.Chains = append(table.Chains, c)
		default:
			if table == nil {
				return nil, &ParseError{n, line, "not an iptables-save line"}
			}
			r := &Rule{Table: table.Name, Line: n}
			rest := line
			if strings.HasPrefix(rest, "[") {
				end := strings.IndexByte(rest, ']')
				if end < 0 {
					return nil, &ParseError{n, line, "unterminated counters"}
				}
				p, b, ok := parseCounters(rest[:end+1])
				if !ok {
					return nil, &ParseError{n, line, "bad counters"}
				}
				r.Packets, r.Bytes, r.HasCounters = p, b, true
				rest = strings.TrimSpace(rest[end+1:])
			}
			toks, err := tokenize(rest)
			if err != nil {
				return nil, &ParseError{n, line, err.Error()}
			}
			if len(toks) < 2 || (toks[0] != "-A" && toks[0] != "--append") {
				return nil, &ParseError{n, line, "expected -A CHAIN"}
			}
			r.Chain = toks[1]
			c := chains[r.Chain]
			if c == nil {
				return nil, &ParseError{n, line, "rule in undeclared chain " + r.Chain}
			}
			r.Spec = rest
			if err := parseRuleArgs(r, toks[2:]); err != nil {
				return nil, &ParseError{n, line, err.Error()}
			}
			c.Rules = append(c.Rules, r)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if table != nil {
		return nil, &ParseError{n, "*" + table.Name, "table without COMMIT (truncated dump?)"}
	}
	if !sawAny {
		return nil, fmt.Errorf("no iptables tables in the input (is it iptables-save output?)")
	}
	for _, t := range rs.Tables {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				if r.Match.Src != nil && r.Match.Src.Addr().Is6() || r.Match.Dst != nil && r.Match.Dst.Addr().Is6() {
					rs.Family = "ipv6"
				}
			}
		}
	}
	return rs, nil
}

func parseCounters(s string) (uint64, uint64, bool) {
	if len(s) < 5 || s[0] != '[' || s[len(s)-1] != ']' {
		return 0, 0, false
	}
	p, b, ok := strings.Cut(s[1:len(s)-1], ":")
	if !ok {
		return 0, 0, false
	}
	pn, err1 := strconv.ParseUint(p, 10, 64)
	bn, err2 := strconv.ParseUint(b, 10, 64)
	return pn, bn, err1 == nil && err2 == nil
}

// tokenize splits a rule like a shell would for iptables-save output: words,
// double-quoted strings with \" escapes.
func tokenize(s string) ([]string, error) {
	if !strings.ContainsAny(s, "\"\\\t") {
		return strings.Fields(s), nil // the common case: no quoting
	}
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case inQuote && ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		case ch == '"':
			inQuote = !inQuote
			have = true
		case !inQuote && (ch == ' ' || ch == '\t'):
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(ch)
			have = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote")
	}
	if have {
		out = append(out, cur.String())
	}
	return out, nil
}

func parsePrefix(s string) (*netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, err
		}
		p := netip.PrefixFrom(a, a.BitLen())
		return &p, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func parsePorts(s string) ([]portRange, error) {
	var out []portRange
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, ":")
		a, err := strconv.ParseUint(lo, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("bad port %q", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(hi, 10, 16); err != nil {
				return nil, fmt.Errorf("bad port range %q", part)
			}
		}
		out = append(out, portRange{uint16(a), uint16(b)})
	}
	return out, nil
}

// parseRuleArgs reads the match and target options after "-A CHAIN".
func parseRuleArgs(r *Rule, toks []string) error {
	m := &r.Match
	neg := false
	module := ""
	next := func(i *int, opt string) (string, error) {
		if *i+1 >= len(toks) {
			return "", fmt.Errorf("%s needs a value", opt)
		}
		*i++
		return toks[*i], nil
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t == "!" {
			neg = true
			continue
		}
		var v string
		var err error
		switch t {
		case "-p", "--protocol":
			if v, err = next(&i, t); err == nil {
				m.Proto, m.NotProto = v, neg
			}
		case "-s", "--source", "-d", "--destination":
			if v, err = next(&i, t); err == nil {
				var p *netip.Prefix
				if p, err = parsePrefix(v); err == nil {
					if t == "-s" || t == "--source" {
						m.Src, m.NotSrc = p, neg
					} else {
						m.Dst, m.NotDst = p, neg
					}
				}
			}
		case "-i", "--in-interface":
			if v, err = next(&i, t); err == nil {
				m.In, m.NotIn = v, neg
			}
		case "-o", "--out-interface":
			if v, err = next(&i, t); err == nil {
				m.Out, m.NotOut = v, neg
			}
		case "-m", "--match":
			module, err = next(&i, t)
		case "--dport", "--destination-port", "--dports", "--destination-ports":
			if v, err = next(&i, t); err == nil {
				m.DPorts, err = parsePorts(v)
				m.NotDPort = neg
			}
		case "--sport", "--source-port", "--sports", "--source-ports":
			if v, err = next(&i, t); err == nil {
				m.SPorts, err = parsePorts(v)
				m.NotSPrt = neg
			}
		case "--uid-owner":
			if v, err = next(&i, t); err == nil {
				m.UID, m.NotUID = v, neg
			}
		case "--gid-owner":
			if v, err = next(&i, t); err == nil {
				m.GID, m.NotGID = v, neg
			}
		case "--mark":
			if v, err = next(&i, t); err == nil {
				if module == "connmark" {
					m.ConnMark, m.NotConnMark = v, neg
				} else {
					m.Mark, m.NotMark = v, neg
				}
			}
		case "--ctstate", "--state":
			if v, err = next(&i, t); err == nil {
				m.CTState, m.NotCTState = strings.Split(v, ","), neg
			}
		case "--comment":
			if v, err = next(&i, t); err == nil {
				m.Comment = v
			}
		case "-j", "--jump", "-g", "--goto":
			if v, err = next(&i, t); err == nil {
				r.Target, r.Goto = v, t == "-g" || t == "--goto"
				r.TargetArgs = toks[i+1:]
				return nil
			}
		default:
			if strings.HasPrefix(t, "-") {
				// An option this parser does not evaluate, with its values
				// if it has any (--tcp-flags FIN,SYN,RST,ACK SYN has two).
				u := t
				for i+1 < len(toks) && !strings.HasPrefix(toks[i+1], "-") && toks[i+1] != "!" {
					i++
					u += " " + toks[i]
				}
				if neg {
					u = "! " + u
				}
				m.Unknown = append(m.Unknown, u)
			} else {
				err = fmt.Errorf("unexpected %q", t)
			}
		}
		if err != nil {
			return err
		}
		neg = false
	}
	return nil
}

// TargetArg returns the value of a target option (e.g. --to-ports), or "".
func (r *Rule) TargetArg(opt string) string {
	for i, a := range r.TargetArgs {
		if a == opt && i+1 < len(r.TargetArgs) {
			return r.TargetArgs[i+1]
		}
	}
	return ""
}

// Table returns the named table, or nil.
func (rs *Ruleset) Table(name string) *Table {
	for _, t := range rs.Tables {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Chain returns the named chain, or nil.
func (t *Table) Chain(name string) *Chain {
	if t == nil {
		return nil
	}
	for _, c := range t.Chains {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// RuleCount is the number of rules in the dump.
func (rs *Ruleset) RuleCount() int {
	n := 0
	for _, t := range rs.Tables {
		for _, c := range t.Chains {
			n += len(c.Rules)
		}
	}
	return n
}

// SetDeltas records, on every rule of rs, how much its counters grew since
// before (an earlier dump of the same rules).
func (rs *Ruleset) SetDeltas(before *Ruleset) {
	// A rule is the same rule in both dumps when its table, chain and text
	// match, and it is the same occurrence of that text in the chain (nft's
	// rule text does not name its chain, and a chain may repeat a rule).
	key := func(t *Table, c *Chain, r *Rule, seen map[string]int) string {
		k := t.Name + " " + c.Name + " " + r.Spec
		seen[k]++
		return fmt.Sprintf("%s #%d", k, seen[k])
	}
	prev := map[string]*Rule{}
	seen := map[string]int{}
	for _, t := range before.Tables {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				prev[key(t, c, r, seen)] = r
			}
		}
	}
	seen = map[string]int{}
	for _, t := range rs.Tables {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				p, b := r.Packets, r.Bytes
				if old, ok := prev[key(t, c, r, seen)]; ok && old.Packets <= p && old.Bytes <= b {
					p, b = p-old.Packets, b-old.Bytes
				}
				r.PacketsDelta, r.BytesDelta = &p, &b
			}
		}
	}
}

// MarshalJSON writes a rule's counters as null when its dump has none
// (iptables -S, iptables-save without -c): unknown, not zero.
func (r *Rule) MarshalJSON() ([]byte, error) {
	type plain Rule
	out := struct {
		*plain
		Packets *uint64 `json:"packets"`
		Bytes   *uint64 `json:"bytes"`
	}{plain: (*plain)(r)}
	if r.HasCounters {
		out.Packets, out.Bytes = &r.Packets, &r.Bytes
	}
	return json.Marshal(out)
}
