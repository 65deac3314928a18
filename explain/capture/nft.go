package capture

import (
	"bufio"
	"bytes"
	"fmt"
	"strconv"
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
					t4, t6 = &Table{Name: name}, &Table{Name: name}
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
					c4, c6 = &Chain{Name: nftChainName(f[1])}, &Chain{Name: nftChainName(f[1])}
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
	r := &Rule{}
	m := &r.Match
	family := ""
	var spec []string
	setFamily := func(f string) error {
		if family != "" && family != f {
			return fmt.Errorf("matches both IPv4 and IPv6 addresses")
		}
		family = f
		return nil
	}
	// value reads "[!=] VALUE" after a selector.
	value := func(i *int) (string, bool, error) {
		neg := false
		if *i+3 < len(toks) && toks[*i+1] == "&" {
			// "& MASK [==|!=] VALUE": a masked mark, as iptables' VALUE/MASK.
			mask := toks[*i+2]
			*i += 2
			if toks[*i+1] == "==" || toks[*i+1] == "!=" {
				neg = toks[*i+1] == "!="
				*i++
			}
			if *i+1 >= len(toks) {
				return "", false, fmt.Errorf("%s & %s needs a value", toks[*i-2], mask)
			}
			*i++
			return nftMark(toks[*i]) + "/" + nftMark(mask), neg, nil
		}
		if *i+1 < len(toks) && toks[*i+1] == "!=" {
			neg = true
			*i++
		}
		if *i+1 >= len(toks) {
			return "", false, fmt.Errorf("%s needs a value", toks[*i])
		}
		*i++
		return toks[*i], neg, nil
	}
	target := func(name string, args ...string) {
		if r.Target == "" || r.Target == "MARK" || r.Target == "ACCEPT" {
			r.Target, r.TargetArgs = name, args
		}
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		start := i
		switch {
		case t == "counter":
			// counter packets N bytes M
			if i+4 < len(toks) && toks[i+1] == "packets" && toks[i+3] == "bytes" {
				p, b, ok := parseCounters("[" + toks[i+2] + ":" + toks[i+4] + "]")
				if !ok {
					return nil, "", fmt.Errorf("bad counter")
				}
				r.Packets, r.Bytes, r.HasCounters = p, b, true
				i += 4
			}
			continue // not part of the rule's text
		case t == "meta" && i+1 < len(toks) && toks[i+1] == "l4proto":
			i++
			v, neg, err := value(&i)
			if err != nil {
				return nil, "", err
			}
			m.Proto, m.NotProto = v, neg
		case (t == "tcp" || t == "udp") && i+1 < len(toks) && (toks[i+1] == "dport" || toks[i+1] == "sport"):
			which := toks[i+1]
			i++
			v, neg, err := value(&i)
			if err != nil {
				return nil, "", err
			}
			ports, err := parsePorts(strings.ReplaceAll(v, "-", ":"))
			if err != nil {
				return nil, "", err
			}
			m.Proto = t
			if which == "dport" {
				m.DPorts, m.NotDPort = ports, neg
			} else {
				m.SPorts, m.NotSPrt = ports, neg
			}
		case (t == "ip" || t == "ip6") && i+1 < len(toks) && (toks[i+1] == "saddr" || toks[i+1] == "daddr"):
			which := toks[i+1]
			i++
			v, neg, err := value(&i)
			if err != nil {
				return nil, "", err
			}
			p, err := parsePrefix(v)
			if err != nil {
				return nil, "", err
			}
			if err := setFamily(map[string]string{"ip": "ipv4", "ip6": "ipv6"}[t]); err != nil {
				return nil, "", err
			}
			if which == "saddr" {
				m.Src, m.NotSrc = p, neg
			} else {
				m.Dst, m.NotDst = p, neg
			}
		case t == "iifname" || t == "oifname":
			v, neg, err := value(&i)
			if err != nil {
				return nil, "", err
			}
			if t == "iifname" {
				m.In, m.NotIn = v, neg
			} else {
				m.Out, m.NotOut = v, neg
			}
			toks[i] = `"` + v + `"`
		case t == "skuid" || t == "skgid" || t == "meta" && i+1 < len(toks) && (toks[i+1] == "skuid" || toks[i+1] == "skgid"):
			// (nft lists "meta skuid"; Istio's generator writes "skuid")
			which := t
			if t == "meta" {
				which = toks[i+1]
				i++
			}
			v, neg, err := value(&i)
			if err != nil {
				return nil, "", err
			}
			if which == "skuid" {
				m.UID, m.NotUID = v, neg
			} else {
				m.GID, m.NotGID = v, neg
			}
		case t == "meta" && i+2 < len(toks) && toks[i+1] == "mark" && toks[i+2] == "set":
			// meta mark set VALUE | meta mark set ct mark
			if i+4 < len(toks) && toks[i+3] == "ct" && toks[i+4] == "mark" {
				target("CONNMARK", "--restore-mark")
				i += 4
			} else if i+3 < len(toks) {
				target("MARK", "--set-xmark", nftMark(toks[i+3])+"/0xffffffff")
				i += 3
			} else {
				return nil, "", fmt.Errorf("meta mark set needs a value")
			}
		case t == "mark" || t == "meta" && i+1 < len(toks) && toks[i+1] == "mark":
			if t == "meta" {
				i++
			}
			v, neg, err := value(&i)
			if err != nil {
				return nil, "", err
			}
			m.Mark, m.NotMark = nftMark(v), neg
		case t == "ct" && i+8 < len(toks) && toks[i+1] == "mark" && toks[i+2] == "set" && toks[i+3] == "ct" && toks[i+4] == "mark" && toks[i+5] == "&" && toks[i+7] == "|":
			// ct mark set ct mark & KEEP | SET: iptables' CONNMARK --set-xmark
			// SET/MASK, MASK the bits not kept or set.
			keep, err1 := strconv.ParseUint(toks[i+6], 0, 32)
			set, err2 := strconv.ParseUint(toks[i+8], 0, 32)
			if err1 != nil || err2 != nil {
				return nil, "", fmt.Errorf("ct mark set: %s & %s | %s", toks[i+4], toks[i+6], toks[i+8])
			}
			target("CONNMARK", "--set-xmark", fmt.Sprintf("0x%x/0x%x", set, (^keep|set)&0xffffffff))
			i += 8
		case t == "ct" && i+2 < len(toks) && toks[i+1] == "mark" && toks[i+2] == "set":
			// ct mark set meta mark | ct mark set mark
			j := i + 3
			if j < len(toks) && toks[j] == "meta" {
				j++
			}
			if j >= len(toks) || toks[j] != "mark" {
				return nil, "", fmt.Errorf("ct mark set: only the packet's mark is understood")
			}
			target("CONNMARK", "--save-mark")
			i = j
		case t == "ct" && i+1 < len(toks) && toks[i+1] == "mark":
			i++
			v, neg, err := value(&i)
			if err != nil {
				return nil, "", err
			}
			m.ConnMark, m.NotConnMark = nftMark(v), neg
		case t == "ct" && i+1 < len(toks) && toks[i+1] == "state":
			i++
			v, neg, err := value(&i)
			if err != nil {
				return nil, "", err
			}
			m.CTState, m.NotCTState = strings.Split(strings.ToUpper(v), ","), neg
		case t == "ct" && i+3 < len(toks) && toks[i+1] == "zone" && toks[i+2] == "set":
			target("CT", "--zone", toks[i+3])
			i += 3
		case t == "redirect":
			// redirect to :PORT
			if i+2 < len(toks) && toks[i+1] == "to" {
				target("REDIRECT", "--to-ports", strings.TrimPrefix(toks[i+2], ":"))
				i += 2
			} else {
				target("REDIRECT")
			}
		case t == "tproxy":
			// tproxy [ip|ip6] to [ADDR]:PORT
			j := i + 1
			if j < len(toks) && (toks[j] == "ip" || toks[j] == "ip6") {
				if err := setFamily(map[string]string{"ip": "ipv4", "ip6": "ipv6"}[toks[j]]); err != nil {
					return nil, "", err
				}
				j++
			}
			if j+1 >= len(toks) || toks[j] != "to" {
				return nil, "", fmt.Errorf("tproxy needs to :PORT")
			}
			port := toks[j+1][strings.LastIndex(toks[j+1], ":")+1:]
			r.Target, r.TargetArgs = "TPROXY", []string{"--on-port", port}
			i = j + 1
		case t == "return" || t == "accept" || t == "drop" || t == "reject":
			if t == "accept" && r.Target == "TPROXY" {
				break // tproxy … meta mark set … accept: one TPROXY target
			}
			if t == "accept" && r.Target == "MARK" {
				r.TargetArgs = append(r.TargetArgs, "then accept")
				break
			}
			target(strings.ToUpper(t))
		case (t == "jump" || t == "goto") && i+1 < len(toks):
			r.Target, r.Goto = nftChainName(toks[i+1]), t == "goto"
			i++
		default:
			m.Unknown = append(m.Unknown, "nft "+t)
		}
		spec = append(spec, toks[start:i+1]...)
	}
	if r.Target == "TPROXY" {
		// The mark tproxy sets travels with it, as iptables' --tproxy-mark.
		for k := 0; k+3 < len(toks); k++ {
			if toks[k] == "meta" && toks[k+1] == "mark" && toks[k+2] == "set" {
				r.TargetArgs = append(r.TargetArgs, "--tproxy-mark", nftMark(toks[k+3])+"/0xffffffff")
			}
		}
	}
	r.Spec = strings.Join(spec, " ")
	return r, family, nil
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
