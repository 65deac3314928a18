package capture

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Packet is the first packet of a connection, as a trace follows it.
type Packet struct {
	Spec     string
	Outbound bool // opened by the pod (OUTPUT), else arriving (PREROUTING)
	Proto    string
	Src, Dst netip.Addr
	SPort    uint16
	DPort    uint16
	UID, GID string // the sending process (outbound only)
	In, Out  string // interfaces
	mark     uint32
}

// ParseTraceSpec reads a --trace SPEC:
//
//	out:IP:PORT[/tcp|udp][,uid=N][,gid=N][,mark=N] a connection the pod opens
//	                                            (mark: its socket's SO_MARK, as ztunnel's 0x539)
//	in:[IP:]PORT[/tcp|udp][,src=IP][,iface=NAME] a connection into the pod
//
// IPv6 addresses are written in brackets ([fd00::1]:443). podIPs are the
// pod's own addresses: an outbound destination among them (or loopback)
// leaves through lo.
func ParseTraceSpec(spec string, podIPs []netip.Addr) (*Packet, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("--trace %q: %s (want out:IP:PORT[/tcp|udp][,uid=N][,gid=N][,mark=N] or in:[IP:]PORT[/tcp|udp][,src=IP][,iface=NAME])", spec, fmt.Sprintf(format, a...))
	}
	dir, rest, ok := strings.Cut(spec, ":")
	if !ok || (dir != "out" && dir != "in") {
		return nil, bad("it must start with out: or in:")
	}
	p := &Packet{Spec: spec, Outbound: dir == "out", Proto: "tcp", SPort: 40000}
	parts := strings.Split(rest, ",")
	addr := parts[0]
	if i := strings.LastIndex(addr, "/"); i >= 0 {
		p.Proto = strings.ToLower(addr[i+1:])
		addr = addr[:i]
		if p.Proto != "tcp" && p.Proto != "udp" {
			return nil, bad("protocol %q: tcp or udp", p.Proto)
		}
	}
	var host, port string
	if strings.HasPrefix(addr, "[") || strings.Count(addr, ":") == 1 {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			return nil, bad("%v", err)
		}
		p.Dst, port = ap.Addr(), strconv.Itoa(int(ap.Port()))
	} else if p.Outbound {
		return nil, bad("an outbound trace needs IP:PORT")
	} else {
		port = addr
	}
	_ = host
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || n == 0 {
		return nil, bad("port %q", port)
	}
	p.DPort = uint16(n)
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, bad("%q is not key=value", kv)
		}
		switch {
		case k == "uid" && p.Outbound:
			if _, err := strconv.ParseUint(v, 10, 32); err != nil {
				return nil, bad("uid %q", v)
			}
			p.UID = v
		case k == "gid" && p.Outbound:
			if _, err := strconv.ParseUint(v, 10, 32); err != nil {
				return nil, bad("gid %q", v)
			}
			p.GID = v
		case k == "mark" && p.Outbound:
			m, err := strconv.ParseUint(v, 0, 32)
			if err != nil {
				return nil, bad("mark %q", v)
			}
			p.mark = uint32(m)
		case k == "src" && !p.Outbound:
			a, err := netip.ParseAddr(strings.Trim(v, "[]"))
			if err != nil {
				return nil, bad("src %q", v)
			}
			p.Src = a
		case k == "iface" && !p.Outbound:
			p.In = v
		default:
			return nil, bad("unknown option %q", k)
		}
	}
	if p.Outbound {
		if p.UID == "" {
			p.UID = "0"
		}
		if p.GID == "" {
			p.GID = p.UID
		}
		p.Out = "eth0"
		p.Src = firstOfFamily(podIPs, p.Dst.Is4())
		for _, a := range podIPs {
			if a == p.Dst {
				p.Out, p.Src = "lo", a
			}
		}
		if p.Dst.IsLoopback() {
			p.Out, p.Src = "lo", p.Dst
		}
		if !p.Src.IsValid() {
			if p.Dst.Is4() {
				p.Src = netip.MustParseAddr("10.0.0.2")
			} else {
				p.Src = netip.MustParseAddr("fd00::2")
			}
		}
		return p, nil
	}
	if !p.Dst.IsValid() {
		p.Dst = firstOfFamily(podIPs, !p.Src.IsValid() || p.Src.Is4())
		if !p.Dst.IsValid() {
			return nil, bad("no pod address to send to: give in:IP:PORT or --pod-ip")
		}
	}
	if !p.Src.IsValid() {
		if p.Dst.Is4() {
			p.Src = netip.MustParseAddr("192.0.2.10")
		} else {
			p.Src = netip.MustParseAddr("2001:db8::10")
		}
	}
	if p.In == "" {
		p.In = "eth0"
	}
	return p, nil
}

func firstOfFamily(addrs []netip.Addr, v4 bool) netip.Addr {
	for _, a := range addrs {
		if a.Is4() == v4 {
			return a
		}
	}
	return netip.Addr{}
}

// TraceStep is one rule a traced packet matched.
type TraceStep struct {
	Table string `json:"table"`
	Chain string `json:"chain"`
	Rule  string `json:"rule"`
	// Packets and Bytes are the rule's counters, null when the dump has
	// none (iptables -S, iptables-save without -c): unknown, not zero.
	Packets *uint64 `json:"packets"`
	Bytes   *uint64 `json:"bytes"`
}

// Trace is where a connection goes.
type Trace struct {
	Spec string `json:"spec"`
	// Verdict is "redirect", "tproxy", "direct" or "drop".
	Verdict string `json:"verdict"`
	// Port is where it is redirected to; 0 when direct.
	Port  int         `json:"port"`
	Path  []TraceStep `json:"path"`
	Notes []string    `json:"notes,omitempty"`
	// Summary says it in words.
	Summary string `json:"summary"`
}

var builtinChain = map[string]bool{"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true}

// Trace follows p through the rules: raw, mangle and nat (and filter for
// drops) of the OUTPUT hook for an outbound connection, of PREROUTING for an
// inbound one.
func (rs *Ruleset) Trace(p *Packet) *Trace {
	tr := &Trace{Spec: p.Spec, Verdict: "direct"}
	hook := "PREROUTING"
	if p.Outbound {
		hook = "OUTPUT"
	}
	pkt := *p
	for _, table := range []string{"raw", "mangle", "nat", "filter"} {
		t := rs.Table(table)
		chain := hook
		if table == "filter" {
			if !p.Outbound {
				chain = "INPUT"
			}
		}
		if t.Chain(chain) == nil {
			continue
		}
		action, port := rs.walk(t, chain, &pkt, tr, 0)
		switch action {
		case "drop":
			tr.Verdict = "drop"
		case "redirect":
			tr.Verdict, tr.Port = "redirect", port
		case "tproxy":
			tr.Verdict, tr.Port = "tproxy", port
		case "dnat":
			tr.Verdict = "dnat"
		}
		if tr.Verdict == "drop" || tr.Verdict == "tproxy" {
			break
		}
	}
	tr.Summary = traceSummary(tr, p, &PodContext{Ambient: IsAmbientInPod(rs)})
	return tr
}

func traceSummary(tr *Trace, p *Packet, ctx *PodContext) string {
	what := fmt.Sprintf("%s %s to %s", map[bool]string{true: "outbound", false: "inbound"}[p.Outbound], strings.ToUpper(p.Proto), netip.AddrPortFrom(p.Dst, p.DPort))
	switch tr.Verdict {
	case "redirect":
		return fmt.Sprintf("%s is redirected to port %d (%s)", what, tr.Port, portName(tr.Port, ctx))
	case "tproxy":
		return fmt.Sprintf("%s is diverted by TPROXY to port %d (%s)", what, tr.Port, portName(tr.Port, ctx))
	case "drop":
		return what + " is dropped"
	case "dnat":
		return what + " is DNATed elsewhere"
	}
	return what + " goes direct (not captured)"
}

const maxDepth = 64

// walk evaluates chain in table for p; it returns "return", "accept",
// "drop", "redirect", "tproxy" or "dnat", and a port.
func (rs *Ruleset) walk(t *Table, chainName string, p *Packet, tr *Trace, depth int) (string, int) {
	c := t.Chain(chainName)
	if c == nil || depth > maxDepth {
		if depth > maxDepth {
			tr.Notes = append(tr.Notes, "chain loop: gave up at "+chainName)
		}
		return "return", 0
	}
	for _, r := range c.Rules {
		ok, unknown := r.matches(p, t.Name)
		if len(unknown) > 0 {
			tr.Notes = append(tr.Notes, fmt.Sprintf("%s/%s: not evaluated: %s (rule treated as not matching)", t.Name, c.Name, strings.Join(unknown, " ")))
		}
		if !ok {
			continue
		}
		step := TraceStep{Table: t.Name, Chain: c.Name, Rule: r.Spec}
		if r.HasCounters {
			pk, by := r.Packets, r.Bytes
			step.Packets, step.Bytes = &pk, &by
		}
		tr.Path = append(tr.Path, step)
		switch r.Target {
		case "RETURN":
			return "return", 0
		case "ACCEPT":
			return "accept", 0
		case "DROP", "REJECT":
			return "drop", 0
		case "REDIRECT":
			port, _ := strconv.Atoi(strings.SplitN(r.TargetArg("--to-ports"), "-", 2)[0])
			if port == 0 {
				port = int(p.DPort)
			}
			return "redirect", port
		case "TPROXY":
			port, _ := strconv.Atoi(r.TargetArg("--on-port"))
			return "tproxy", port
		case "DNAT":
			return "dnat", 0
		case "MARK":
			if v := r.TargetArg("--set-xmark"); v != "" {
				val, mask := parseMark(v)
				p.mark = (p.mark &^ mask) ^ val
			} else if v := r.TargetArg("--set-mark"); v != "" {
				val, mask := parseMark(v)
				p.mark = (p.mark &^ mask) | val
			}
		case "CONNMARK", "CT", "LOG", "NOTRACK", "":
		default:
			if t.Chain(r.Target) == nil {
				tr.Notes = append(tr.Notes, "unknown target "+r.Target+" in "+t.Name+"/"+c.Name)
				continue
			}
			action, port := rs.walk(t, r.Target, p, tr, depth+1)
			if action != "return" || r.Goto {
				if action == "return" {
					action = "accept"
				}
				return action, port
			}
		}
	}
	if builtinChain[c.Name] {
		if c.Policy == "DROP" {
			return "drop", 0
		}
		return "accept", 0
	}
	return "return", 0
}

func parseMark(s string) (uint32, uint32) {
	v, m, hasMask := strings.Cut(s, "/")
	val, _ := strconv.ParseUint(v, 0, 32)
	mask := uint64(0xffffffff)
	if hasMask {
		mask, _ = strconv.ParseUint(m, 0, 32)
	}
	return uint32(val), uint32(mask)
}

func ifaceMatch(pattern, name string) bool {
	if strings.HasSuffix(pattern, "+") {
		return strings.HasPrefix(name, strings.TrimSuffix(pattern, "+"))
	}
	return pattern == name
}

// matches evaluates the rule against p at table's hook; unknown lists match
// options that could not be evaluated.
func (r *Rule) matches(p *Packet, table string) (bool, []string) {
	m := &r.Match
	if len(m.Unknown) > 0 {
		return false, m.Unknown
	}
	check := func(ok, not bool) bool { return ok != not }
	if m.Proto != "" && m.Proto != "all" && !check(strings.EqualFold(m.Proto, p.Proto), m.NotProto) {
		return false, nil
	}
	if m.Src != nil && !check(m.Src.Contains(p.Src), m.NotSrc) {
		return false, nil
	}
	if m.Dst != nil && !check(m.Dst.Contains(p.Dst), m.NotDst) {
		return false, nil
	}
	if m.In != "" && !check(p.In != "" && ifaceMatch(m.In, p.In), m.NotIn) {
		return false, nil
	}
	if m.Out != "" && !check(p.Out != "" && ifaceMatch(m.Out, p.Out), m.NotOut) {
		return false, nil
	}
	inPorts := func(rs []portRange, port uint16) bool {
		for _, r := range rs {
			if r.contains(port) {
				return true
			}
		}
		return false
	}
	if len(m.DPorts) > 0 && !check(inPorts(m.DPorts, p.DPort), m.NotDPort) {
		return false, nil
	}
	if len(m.SPorts) > 0 && !check(inPorts(m.SPorts, p.SPort), m.NotSPrt) {
		return false, nil
	}
	// The owner match only sees locally generated packets.
	if m.UID != "" && (p.UID == "" || !check(m.UID == p.UID, m.NotUID)) {
		return false, nil
	}
	if m.GID != "" && (p.GID == "" || !check(m.GID == p.GID, m.NotGID)) {
		return false, nil
	}
	if m.Mark != "" {
		val, mask := parseMark(m.Mark)
		if !check(p.mark&mask == val, m.NotMark) {
			return false, nil
		}
	}
	if m.ConnMark != "" {
		val, mask := parseMark(m.ConnMark)
		if !check(0&mask == val, m.NotConnMark) { // a new connection carries no connmark
			return false, nil
		}
	}
	if len(m.CTState) > 0 {
		isNew := false
		for _, s := range m.CTState {
			if s == "NEW" {
				isNew = true
			}
		}
		if !check(isNew, m.NotCTState) { // the first packet of a connection is NEW
			return false, nil
		}
	}
	return true, nil
}
