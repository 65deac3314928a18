package capture

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// BackendNative is the Backend of a ruleset read from `nft list ruleset`:
// the rules istio-iptables --native-nftables (or the CNI plugin with
// native_nftables) writes as nftables tables of its own, not through the
// iptables tools.
const BackendNative = "nftables (native)"

// nftTablePrefix names the tables Istio's native nftables mode writes (inet
// istio-proxy-nat, istio-proxy-mangle, istio-proxy-raw).
const nftTablePrefix = "istio-proxy-"

// nftAmbientPrefix names the tables istio-cni's agent writes in an ambient
// pod in native nftables mode (inet istio-ambient-nat, -mangle, -raw).
const nftAmbientPrefix = "istio-ambient-"

// nftIstioPrefix is the prefix of an Istio table's name, "" for another's.
func nftIstioPrefix(table string) string {
	for _, p := range []string{nftTablePrefix, nftAmbientPrefix} {
		if strings.HasPrefix(table, p) {
			return p
		}
	}
	return ""
}

// ParseNftRuleset reads `nft list ruleset` and returns Istio's native
// nftables tables as two rulesets, one per IP family, in the shape of an
// iptables dump: table istio-proxy-nat is "nat", base chains are named by
// their hook (PREROUTING, OUTPUT), other chains in upper case with
// underscores (istio-inbound is ISTIO_INBOUND). A rule keeps nft's own text
// as its Spec; what it matches and does is read into the same fields an
// iptables rule fills, so that annotations, traces and counters work alike.
// An inet table serves both families: a rule matching ip addresses belongs
// to the IPv4 view only, one matching ip6 addresses to the IPv6 view only.
// Tables of other programs are left out. ok is false when the ruleset holds
// no Istio table.
func ParseNftRuleset(data []byte) (v4, v6 *Ruleset, ok bool, err error) {
	v4 = &Ruleset{Family: "ipv4", Backend: BackendNative, Form: FormNft}
	v6 = &Ruleset{Family: "ipv6", Backend: BackendNative, Form: FormNft}
	var t4, t6 *Table
	var c4, c6 *Chain
	depth := 0
	// Tables not Istio's (iptables-nft's "ip nat", another tool's): their
	// rules are counted, as what the native mode does not write.
	foreign := ""
	foreignRules := map[string]int{}
	var foreignOrder []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		// nft -a and tables of other programs add "# handle N" / "# progname …".
		if i := strings.Index(line, " # "); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case line == "}":
			depth--
			switch depth {
			case 1:
				c4, c6 = nil, nil
			case 0:
				t4, t6, foreign = nil, nil, ""
			case -1:
				return nil, nil, false, &ParseError{n, line, "unbalanced }"}
			}
			continue
		case strings.HasSuffix(line, "{"):
			depth++
			f := strings.Fields(strings.TrimSuffix(line, "{"))
			switch {
			case len(f) == 3 && f[0] == "table" && depth == 1:
				if prefix := nftIstioPrefix(f[2]); f[1] == "inet" && prefix != "" {
					name := strings.TrimPrefix(f[2], prefix)
					v4.Ambient, v6.Ambient = v4.Ambient || prefix == nftAmbientPrefix, v6.Ambient || prefix == nftAmbientPrefix
					t4, t6 = &Table{Name: name, Native: "inet " + f[2]}, &Table{Name: name, Native: "inet " + f[2]}
					v4.Tables = append(v4.Tables, t4)
					v6.Tables = append(v6.Tables, t6)
					ok = true
				} else {
					foreign = f[1] + " " + f[2]
					if _, seen := foreignRules[foreign]; !seen {
						foreignOrder = append(foreignOrder, foreign)
						foreignRules[foreign] = 0
					}
				}
			case len(f) == 2 && f[0] == "chain" && depth == 2:
				if t4 != nil {
					c4, c6 = &Chain{Name: nftChainName(f[1]), Native: f[1]}, &Chain{Name: nftChainName(f[1]), Native: f[1]}
					t4.Chains = append(t4.Chains, c4)
					t6.Chains = append(t6.Chains, c6)
				}
			default:
				// sets, maps, flowtables: nothing Istio writes; skip their body.
			}
			continue
		}
		if foreign != "" && depth == 2 && !strings.HasPrefix(line, "type ") && !strings.HasPrefix(line, "policy ") {
			foreignRules[foreign]++
		}
		if c4 == nil || depth != 2 {
			continue // outside an Istio chain (or inside a set's body)
		}
		if strings.HasPrefix(line, "type ") {
			// type nat hook prerouting priority dstnat; policy accept;
			f := strings.Fields(strings.NewReplacer(";", " ").Replace(line))
			for i := 0; i+1 < len(f); i++ {
				switch f[i] {
				case "hook":
					c4.Name, c6.Name = strings.ToUpper(f[i+1]), strings.ToUpper(f[i+1])
				case "policy":
					c4.Policy, c6.Policy = strings.ToUpper(f[i+1]), strings.ToUpper(f[i+1])
				}
			}
			continue
		}
		r, family, err := parseNftRule(line)
		if err != nil {
			return nil, nil, false, &ParseError{n, line, err.Error()}
		}
		r.Line = n
		for _, v := range []struct {
			fam string
			t   *Table
			c   *Chain
		}{{"ipv4", t4, c4}, {"ipv6", t6, c6}} {
			if family != "" && family != v.fam {
				continue
			}
			cp := *r
			cp.Table, cp.Chain = v.t.Name, v.c.Name
			v.c.Rules = append(v.c.Rules, &cp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, false, err
	}
	if depth != 0 {
		return nil, nil, false, fmt.Errorf("nft ruleset ends inside a block (truncated?)")
	}
	for _, t := range foreignOrder {
		if n := foreignRules[t]; n > 0 {
			v4.Foreign = append(v4.Foreign, fmt.Sprintf("table %s: %d rules outside Istio's own tables (iptables-nft's, or another program's)", t, n))
		}
	}
	return v4, v6, ok, nil
}

// nftChainName spells a native chain as istio-iptables spells its iptables
// twin: istio-in-redirect is ISTIO_IN_REDIRECT.
func nftChainName(s string) string {
	return strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
}

// nftTokens splits a rule: words, "quoted strings" (unquoted), and { a, b }
// sets as one token "a,b".
func nftTokens(s string) ([]string, error) {
	var out []string
	for i := 0; i < len(s); {
		switch {
		case s[i] == ' ' || s[i] == '\t':
			i++
		case s[i] == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote")
			}
			out = append(out, s[i+1:i+1+j])
			i += j + 2
		case s[i] == '{':
			j := strings.IndexByte(s[i:], '}')
			if j < 0 {
				return nil, fmt.Errorf("unterminated set")
			}
			out = append(out, strings.Join(strings.Fields(s[i+1:i+j]), ""))
			i += j + 1
		default:
			j := strings.IndexAny(s[i:], " \t")
			if j < 0 {
				j = len(s) - i
			}
			out = append(out, s[i:i+j])
			i += j
		}
	}
	return out, nil
}

// parseNftRule reads one rule: its matches, counters and statements, into
// the fields of an iptables rule. family is "ipv4" or "ipv6" when the rule
// can only match that family, else "".
func parseNftRule(line string) (*Rule, string, error) {
	toks, err := nftTokens(line)
	if err != nil {
		return nil, "", err
	}
	p := &nftRuleParser{toks: toks, r: &Rule{}}
	var spec []string
	for p.i = 0; p.i < len(toks); p.i++ {
		t := toks[p.i]
		start := p.i
		if t == "counter" {
			// counter packets N bytes M: not part of the rule's text
			if err := p.counter(); err != nil {
				return nil, "", err
			}
			continue
		}
		matched, err := p.match(t)
		if err == nil && !matched {
			matched, err = p.statement(t)
		}
		if err != nil {
			return nil, "", err
		}
		if !matched {
			p.r.Match.Unknown = append(p.r.Match.Unknown, "nft "+t)
		}
		spec = append(spec, toks[start:p.i+1]...)
	}
	r := p.r
	if r.Target == "TPROXY" {
		// The mark tproxy sets travels with it, as iptables' --tproxy-mark.
		for k := 0; k+3 < len(toks); k++ {
			if toks[k] == "meta" && toks[k+1] == "mark" && toks[k+2] == "set" {
				r.TargetArgs = append(r.TargetArgs, "--tproxy-mark", nftMark(toks[k+3])+"/0xffffffff")
			}
		}
	}
	r.Spec = strings.Join(spec, " ")
	return r, p.family, nil
}

// nftRuleParser reads one nft rule's tokens, at i, into r.
type nftRuleParser struct {
	toks   []string
	i      int
	r      *Rule
	family string // "ipv4" or "ipv6" once an address of one is matched
}

func (p *nftRuleParser) setFamily(f string) error {
	if p.family != "" && p.family != f {
		return fmt.Errorf("matches both IPv4 and IPv6 addresses")
	}
	p.family = f
	return nil
}

// value reads "[!=] VALUE" after a selector.
func (p *nftRuleParser) value() (string, bool, error) {
	toks := p.toks
	neg := false
	if p.i+3 < len(toks) && toks[p.i+1] == "&" {
		// "& MASK [==|!=] VALUE": a masked mark, as iptables' VALUE/MASK.
		mask := toks[p.i+2]
		p.i += 2
		if toks[p.i+1] == "==" || toks[p.i+1] == "!=" {
			neg = toks[p.i+1] == "!="
			p.i++
		}
		if p.i+1 >= len(toks) {
			return "", false, fmt.Errorf("%s & %s needs a value", toks[p.i-2], mask)
		}
		p.i++
		return nftMark(toks[p.i]) + "/" + nftMark(mask), neg, nil
	}
	if p.i+1 < len(toks) && toks[p.i+1] == "!=" {
		neg = true
		p.i++
	}
	if p.i+1 >= len(toks) {
		return "", false, fmt.Errorf("%s needs a value", toks[p.i])
	}
	p.i++
	return toks[p.i], neg, nil
}

// target sets the rule's target, unless a statement already set one that
// a later one does not override.
func (p *nftRuleParser) target(name string, args ...string) {
	if p.r.Target == "" || p.r.Target == "MARK" || p.r.Target == "ACCEPT" {
		p.r.Target, p.r.TargetArgs = name, args
	}
}

func (p *nftRuleParser) counter() error {
	toks, i := p.toks, p.i
	if i+4 < len(toks) && toks[i+1] == "packets" && toks[i+3] == "bytes" {
		pk, b, ok := parseCounters("[" + toks[i+2] + ":" + toks[i+4] + "]")
		if !ok {
			return fmt.Errorf("bad counter")
		}
		p.r.Packets, p.r.Bytes, p.r.HasCounters = pk, b, true
		p.i += 4
	}
	return nil
}

// next is the token after the current one ("" at the end).
func (p *nftRuleParser) next(k int) string {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k]
	}
	return ""
}

// nftMark writes a mark as iptables does: 0x00000539 is 0x539.
func nftMark(s string) string {
	if !strings.HasPrefix(s, "0x") {
		return s
	}
	v := strings.TrimLeft(s[2:], "0")
	if v == "" {
		v = "0"
	}
	return "0x" + v
}
