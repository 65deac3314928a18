package capture

import (
	"fmt"
	"strconv"
	"strings"
)

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
		}
		// None of the matches above: a target, or words kept as unknown.
		if !not && o.target() {
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
