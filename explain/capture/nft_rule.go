package capture

import (
	"fmt"
	"strconv"
	"strings"
)

// match reads the match at the current token (false when it is none).
func (p *nftRuleParser) match(t string) (bool, error) {
	m := &p.r.Match
	toks, i := p.toks, p.i
	switch {
	case t == "meta" && p.next(1) == "l4proto":
		p.i++
		v, neg, err := p.value()
		if err != nil {
			return true, err
		}
		m.Proto, m.NotProto = v, neg
	case (t == "tcp" || t == "udp") && (p.next(1) == "dport" || p.next(1) == "sport"):
		which := toks[i+1]
		p.i++
		v, neg, err := p.value()
		if err != nil {
			return true, err
		}
		ports, err := parsePorts(strings.ReplaceAll(v, "-", ":"))
		if err != nil {
			return true, err
		}
		m.Proto = t
		if which == "dport" {
			m.DPorts, m.NotDPort = ports, neg
		} else {
			m.SPorts, m.NotSPrt = ports, neg
		}
	case (t == "ip" || t == "ip6") && (p.next(1) == "saddr" || p.next(1) == "daddr"):
		which := toks[i+1]
		p.i++
		v, neg, err := p.value()
		if err != nil {
			return true, err
		}
		pfx, err := parsePrefix(v)
		if err != nil {
			return true, err
		}
		if err := p.setFamily(map[string]string{"ip": "ipv4", "ip6": "ipv6"}[t]); err != nil {
			return true, err
		}
		if which == "saddr" {
			m.Src, m.NotSrc = pfx, neg
		} else {
			m.Dst, m.NotDst = pfx, neg
		}
	case t == "iifname" || t == "oifname":
		v, neg, err := p.value()
		if err != nil {
			return true, err
		}
		if t == "iifname" {
			m.In, m.NotIn = v, neg
		} else {
			m.Out, m.NotOut = v, neg
		}
		p.toks[p.i] = `"` + v + `"`
	case t == "skuid" || t == "skgid" || t == "meta" && (p.next(1) == "skuid" || p.next(1) == "skgid"):
		// (nft lists "meta skuid"; Istio's generator writes "skuid")
		which := t
		if t == "meta" {
			which = toks[i+1]
			p.i++
		}
		v, neg, err := p.value()
		if err != nil {
			return true, err
		}
		if which == "skuid" {
			m.UID, m.NotUID = v, neg
		} else {
			m.GID, m.NotGID = v, neg
		}
	case t == "meta" && p.next(1) == "mark" && p.next(2) == "set":
		return false, nil // a statement
	case t == "mark" || t == "meta" && p.next(1) == "mark":
		if t == "meta" {
			p.i++
		}
		v, neg, err := p.value()
		if err != nil {
			return true, err
		}
		m.Mark, m.NotMark = nftMark(v), neg
	case t == "ct" && p.next(1) == "mark" && p.next(2) != "set":
		p.i++
		v, neg, err := p.value()
		if err != nil {
			return true, err
		}
		m.ConnMark, m.NotConnMark = nftMark(v), neg
	case t == "ct" && p.next(1) == "state":
		p.i++
		v, neg, err := p.value()
		if err != nil {
			return true, err
		}
		m.CTState, m.NotCTState = strings.Split(strings.ToUpper(v), ","), neg
	default:
		return false, nil
	}
	return true, nil
}

// statement reads the statement at the current token (false when it is
// none): a mark or zone set, a redirect, tproxy, a verdict.
func (p *nftRuleParser) statement(t string) (bool, error) {
	toks, i, r := p.toks, p.i, p.r
	switch {
	case t == "meta" && p.next(1) == "mark" && p.next(2) == "set":
		// meta mark set VALUE | meta mark set ct mark
		if i+4 < len(toks) && toks[i+3] == "ct" && toks[i+4] == "mark" {
			p.target("CONNMARK", "--restore-mark")
			p.i += 4
		} else if i+3 < len(toks) {
			p.target("MARK", "--set-xmark", nftMark(toks[i+3])+"/0xffffffff")
			p.i += 3
		} else {
			return true, fmt.Errorf("meta mark set needs a value")
		}
	case t == "ct" && i+8 < len(toks) && toks[i+1] == "mark" && toks[i+2] == "set" && toks[i+3] == "ct" && toks[i+4] == "mark" && toks[i+5] == "&" && toks[i+7] == "|":
		// ct mark set ct mark & KEEP | SET: iptables' CONNMARK --set-xmark
		// SET/MASK, MASK the bits not kept or set.
		keep, err1 := strconv.ParseUint(toks[i+6], 0, 32)
		set, err2 := strconv.ParseUint(toks[i+8], 0, 32)
		if err1 != nil || err2 != nil {
			return true, fmt.Errorf("ct mark set: %s & %s | %s", toks[i+4], toks[i+6], toks[i+8])
		}
		p.target("CONNMARK", "--set-xmark", fmt.Sprintf("0x%x/0x%x", set, (^keep|set)&0xffffffff))
		p.i += 8
	case t == "ct" && p.next(1) == "mark" && p.next(2) == "set":
		// ct mark set meta mark | ct mark set mark
		j := i + 3
		if j < len(toks) && toks[j] == "meta" {
			j++
		}
		if j >= len(toks) || toks[j] != "mark" {
			return true, fmt.Errorf("ct mark set: only the packet's mark is understood")
		}
		p.target("CONNMARK", "--save-mark")
		p.i = j
	case t == "ct" && i+3 < len(toks) && toks[i+1] == "zone" && toks[i+2] == "set":
		p.target("CT", "--zone", toks[i+3])
		p.i += 3
	case t == "redirect":
		// redirect to :PORT
		if i+2 < len(toks) && toks[i+1] == "to" {
			p.target("REDIRECT", "--to-ports", strings.TrimPrefix(toks[i+2], ":"))
			p.i += 2
		} else {
			p.target("REDIRECT")
		}
	case t == "tproxy":
		// tproxy [ip|ip6] to [ADDR]:PORT
		j := i + 1
		if j < len(toks) && (toks[j] == "ip" || toks[j] == "ip6") {
			if err := p.setFamily(map[string]string{"ip": "ipv4", "ip6": "ipv6"}[toks[j]]); err != nil {
				return true, err
			}
			j++
		}
		if j+1 >= len(toks) || toks[j] != "to" {
			return true, fmt.Errorf("tproxy needs to :PORT")
		}
		port := toks[j+1][strings.LastIndex(toks[j+1], ":")+1:]
		r.Target, r.TargetArgs = "TPROXY", []string{"--on-port", port}
		p.i = j + 1
	case t == "return" || t == "accept" || t == "drop" || t == "reject":
		switch {
		case t == "accept" && r.Target == "TPROXY":
			// tproxy … meta mark set … accept: one TPROXY target
		case t == "accept" && r.Target == "MARK":
			r.TargetArgs = append(r.TargetArgs, "then accept")
		default:
			p.target(strings.ToUpper(t))
		}
	case (t == "jump" || t == "goto") && i+1 < len(toks):
		r.Target, r.Goto = nftChainName(toks[i+1]), t == "goto"
		p.i++
	default:
		return false, nil
	}
	return true, nil
}
