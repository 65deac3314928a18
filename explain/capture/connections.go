package capture

import (
	"encoding/hex"
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Flow is one live connection of the pod's network namespace, from its
// connection-tracking table: the tuple as it was sent, and the tuple the
// replies carry (which differs when NAT redirected it).
type Flow struct {
	Proto string         `json:"proto"` // tcp or udp
	State string         `json:"state,omitempty"`
	Src   netip.AddrPort `json:"src"`
	Dst   netip.AddrPort `json:"dst"`
	// ReplySrc is where replies come from: the proxy's port when captured.
	ReplySrc netip.AddrPort `json:"replySrc"`
	// Expires is the seconds the table keeps the flow without traffic;
	// -1 when the line did not say.
	Expires int `json:"-"`
}

// ParseConntrack reads /proc/net/nf_conntrack (or `conntrack -L`) lines:
// TCP and UDP flows; other protocols and unparsable lines are skipped.
func ParseConntrack(text string) []Flow {
	var out []Flow
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		fl := Flow{Expires: -1}
		var tuples []map[string]string
		cur := map[string]string{}
		for i, w := range f {
			switch w {
			case "tcp", "udp":
				if fl.Proto == "" {
					fl.Proto = w
					// The protocol's number, then the seconds left.
					if i+2 < len(f) {
						if n, err := strconv.Atoi(f[i+2]); err == nil {
							fl.Expires = n
						}
					}
				}
				continue
			case "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT", "CLOSE_WAIT", "LAST_ACK", "TIME_WAIT", "CLOSE":
				fl.State = w
				continue
			}
			k, v, ok := strings.Cut(w, "=")
			if !ok {
				continue
			}
			if _, dup := cur[k]; dup && (k == "src" || k == "dst" || k == "sport" || k == "dport") {
				tuples = append(tuples, cur)
				cur = map[string]string{}
			}
			cur[k] = v
		}
		tuples = append(tuples, cur)
		if fl.Proto == "" || len(tuples) < 2 {
			continue
		}
		ap := func(t map[string]string, a, p string) (netip.AddrPort, bool) {
			addr, err := netip.ParseAddr(t[a])
			port, err2 := strconv.ParseUint(t[p], 10, 16)
			if err != nil || err2 != nil {
				return netip.AddrPort{}, false
			}
			return netip.AddrPortFrom(addr.Unmap(), uint16(port)), true
		}
		var ok1, ok2, ok3 bool
		fl.Src, ok1 = ap(tuples[0], "src", "sport")
		fl.Dst, ok2 = ap(tuples[0], "dst", "dport")
		fl.ReplySrc, ok3 = ap(tuples[1], "src", "sport")
		if ok1 && ok2 && ok3 {
			out = append(out, fl)
		}
	}
	return out
}

// Sockets maps a connected socket ("proto local remote") to its owner's uid,
// from /proc/net/{tcp,tcp6,udp,udp6}.
type Sockets map[string]int

func socketKey(proto string, local, remote netip.AddrPort) string {
	return proto + " " + local.String() + " " + remote.String()
}

// ParseSockets reads /proc/net/tcp-style tables; each table is preceded by a
// line "# tcp", "# tcp6", "# udp" or "# udp6" naming it.
func ParseSockets(text string) Sockets {
	out := Sockets{}
	eachSocketRow(text, func(proto string, f []string) {
		if proto == "tcp" && (f[3] == "06" || f[3] == "07") {
			return // TIME_WAIT and CLOSE sockets have no owner left (uid 0)
		}
		local, ok1 := procAddr(f[1])
		remote, ok2 := procAddr(f[2])
		uid, err := strconv.Atoi(f[7])
		if ok1 && ok2 && err == nil {
			out[socketKey(proto, local, remote)] = uid
		}
	})
	return out
}

// eachSocketRow calls fn with each socket row of /proc/net/tcp-style
// tables (its fields) and its table's protocol ("tcp" or "udp", the same
// for both families), read off the "# tcp6"-style line before each table.
func eachSocketRow(text string, fn func(proto string, f []string)) {
	proto := ""
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "#" {
			proto = strings.TrimSuffix(f[1], "6")
			continue
		}
		if len(f) >= 8 && proto != "" && strings.HasSuffix(f[0], ":") {
			fn(proto, f)
		}
	}
}

// Listener is a listening TCP socket and its owner's uid.
type Listener struct {
	Addr netip.AddrPort `json:"addr"`
	UID  int            `json:"uid"`
}

// ParseListeners reads the listening TCP sockets (state 0A) of
// /proc/net/tcp-style tables, each preceded by a "# tcp" or "# tcp6" line.
func ParseListeners(text string) []Listener {
	var out []Listener
	eachSocketRow(text, func(proto string, f []string) {
		if proto != "tcp" || f[3] != "0A" {
			return
		}
		local, ok := procAddr(f[1])
		uid, err := strconv.Atoi(f[7])
		if ok && err == nil {
			out = append(out, Listener{Addr: local, UID: uid})
		}
	})
	return out
}

// ListeningOn are the addresses the listeners of a port listen on.
func ListeningOn(ls []Listener, port uint16) []netip.Addr {
	var out []netip.Addr
	for _, l := range ls {
		if l.Addr.Port() == port {
			out = append(out, l.Addr.Addr())
		}
	}
	return out
}

// procAddr reads "0100007F:1F90" (IPv4) or a 32-hex-digit IPv6 address, in
// the kernel's byte order (each 32-bit word little-endian).
func procAddr(s string) (netip.AddrPort, bool) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	b, err := hex.DecodeString(a)
	if err != nil || len(b) != 4 && len(b) != 16 {
		return netip.AddrPort{}, false
	}
	for i := 0; i+4 <= len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), true
}

// Connection is one flow and what it is, as far as the proxy is concerned.
type Connection struct {
	Flow
	// Class is "captured outbound", "captured inbound", "DNS via the proxy",
	// "proxy upstream", "proxy to app", "loopback" or "bypassing the proxy".
	Class string `json:"class"`
	// Port is the proxy port replies come from, when captured.
	Port int `json:"port,omitempty"`
	// UID owns the pod's socket, when it is still open (null otherwise).
	UID *int `json:"uid"`
	// Rule is, for a bypassing flow, the rule that let it through (the trace's last step).
	Rule string `json:"rule,omitempty"`
	Why  string `json:"why,omitempty"`
}

// Bypassing is the class of flows that neither the proxy made nor the proxy took.
const Bypassing = "bypassing the proxy"

// proxyOwnPorts are the proxy's own listeners (health, metrics, admin,
// HBONE): inbound connections to them are meant for the proxy.
var proxyOwnPorts = map[uint16]bool{istio.PortAdmin: true, istio.PortHBONE: true, istio.PortAgent: true, istio.PortHealth: true, istio.PortPrometheus: true}

// Proxy ports replies come from when the rules redirected a flow.
var proxyPorts = map[uint16]string{istio.PortOutbound: "captured outbound", istio.PortInbound: "captured inbound", istio.PortDNS: "DNS via the proxy"}

// ClassifyConnections says what each flow of the pod is: taken by the proxy
// (replies come from its port), made by the proxy (its uid, to where a
// captured flow was going), the proxy handing inbound traffic to the app
// (from 127.0.0.6), loopback, or bypassing the proxy — then with the rule
// that let it through, traced through rulesets. podIPs tell inbound from
// outbound; proxyUID is the proxy's uid.
func ClassifyConnections(flows []Flow, sockets Sockets, rulesets []*Ruleset, podIPs []netip.Addr, proxyUID int) []Connection {
	isPod := func(a netip.Addr) bool {
		for _, p := range podIPs {
			if p == a {
				return true
			}
		}
		return false
	}
	// Each captured outbound connection makes the proxy open one of its own
	// to the same destination: that many flows there, sent as the proxy's
	// uid, are its upstreams; any more are something else bypassing it.
	upstreams, capturedTo := map[netip.AddrPort]int{}, map[netip.AddrPort]bool{}
	for _, f := range flows {
		if f.ReplySrc.Port() == istio.PortOutbound && f.Dst.Port() != istio.PortOutbound {
			upstreams[f.Dst]++
			capturedTo[f.Dst] = true
		}
	}
	// The tables are read one after the other, and neither at once: a call
	// the app made while the connection-tracking table was being read may
	// be missing from it while the proxy's upstream for it is there. The
	// app's socket (read after the table, not the proxy's uid, its peer the
	// original destination) still shows the call the upstream serves.
	// Only sockets whose own flow the table lacks count: the others are
	// classified by their flow (captured, or bypassing themselves).
	inTable := map[string]bool{}
	for _, f := range flows {
		inTable[socketKey(f.Proto, f.Src, f.Dst)] = true
	}
	appCalls := map[string]int{}
	for key, uid := range sockets {
		if f := strings.Fields(key); len(f) == 3 && uid != proxyUID && !inTable[key] {
			appCalls[f[0]+" "+f[2]]++
		}
	}
	trace := func(spec string) *Trace {
		for _, rs := range rulesets {
			p, err := ParseTraceSpec(spec, podIPs)
			if err != nil {
				return nil
			}
			if (rs.Family == "ipv6") == p.Dst.Is6() {
				return rs.Trace(p)
			}
		}
		return nil
	}
	last := func(tr *Trace) string {
		if tr == nil || len(tr.Path) == 0 {
			return ""
		}
		return tr.Path[len(tr.Path)-1].Rule
	}
	// sender is the uid a flow was sent as: its socket's, or, the socket
	// gone, the proxy's where any other uid would have been redirected.
	sender := func(f Flow) (uid int, known, inferred bool) {
		if uid, ok := sockets[socketKey(f.Proto, f.Src, f.Dst)]; ok {
			return uid, true, false
		}
		if tr := trace(fmt.Sprintf("out:%s/%s", f.Dst, f.Proto)); tr != nil && (tr.Verdict == "redirect" || tr.Verdict == "tproxy") {
			return proxyUID, false, true
		}
		return 0, false, false
	}
	outbound := func(f Flow) bool {
		redirected := f.ReplySrc.Port() != f.Dst.Port() || f.ReplySrc.Addr() != f.Dst.Addr()
		return !(redirected && proxyPorts[f.ReplySrc.Port()] != "") && f.Src.Addr().String() != "127.0.0.6" &&
			!(f.Src.Addr().IsLoopback() && f.Dst.Addr().IsLoopback()) && (isPod(f.Src.Addr()) || f.Src.Addr().IsLoopback())
	}
	paired := pairUpstreams(flows, upstreams, func(f Flow) bool {
		uid, _, _ := sender(f)
		return outbound(f) && uid == proxyUID
	})
	var out []Connection
	for i, f := range flows {
		c := Connection{Flow: f}
		if uid, ok := sockets[socketKey(f.Proto, f.Src, f.Dst)]; ok {
			c.UID = &uid
		}
		redirected := f.ReplySrc.Port() != f.Dst.Port() || f.ReplySrc.Addr() != f.Dst.Addr()
		switch {
		case redirected && proxyPorts[f.ReplySrc.Port()] != "":
			c.Class, c.Port = proxyPorts[f.ReplySrc.Port()], int(f.ReplySrc.Port())
		case f.Src.Addr().String() == "127.0.0.6":
			c.Class = "proxy to app"
		case f.Src.Addr().IsLoopback() && f.Dst.Addr().IsLoopback():
			c.Class = "loopback"
		case isPod(f.Src.Addr()) || f.Src.Addr().IsLoopback():
			uid, _, inferred := sender(f)
			if paired[i] {
				c.Class = "proxy upstream"
				break
			}
			if call := f.Proto + " " + f.Dst.String(); uid == proxyUID && appCalls[call] > 0 && c.UID != nil {
				appCalls[call]--
				c.Class = "proxy upstream"
				break
			}
			if inferred && capturedTo[f.Dst] && f.State == "TIME_WAIT" && f.Expires >= 0 && f.Expires <= expiringSoon {
				c.Class = Unpaired
				c.Why = fmt.Sprintf("closed, sent as uid %d (inferred) to where captured calls go, and leaving the table in %ds: the captured call it served may have left first, or an app running as the proxy's uid made it; not counted as bypassing", uid, f.Expires)
				break
			}
			c.Class = Bypassing
			tr := trace(fmt.Sprintf("out:%s/%s,uid=%d", f.Dst, f.Proto, uid))
			if tr != nil && (tr.Verdict == "redirect" || tr.Verdict == "tproxy") {
				c.Why = "outbound, not redirected, although the rules as read now would redirect it: they changed after it started, or it began before capture was set up"
				break
			}
			c.Rule = last(tr)
			switch {
			case uid == proxyUID && inferred:
				c.Why = fmt.Sprintf("outbound, not redirected, sent as uid %d (inferred: the rules redirect any other uid) with no captured connection it serves: the proxy's own call, or an app running as its uid", uid)
			case uid == proxyUID:
				c.Why = fmt.Sprintf("outbound, not redirected, sent as uid %d, the proxy's, with no captured connection it serves: the proxy's own call, or an app running as its uid", uid)
			case c.UID == nil:
				c.Why = "outbound, not redirected (its socket is closed)"
			default:
				c.Why = "outbound, not redirected"
			}
		case isPod(f.Dst.Addr()) && proxyOwnPorts[f.Dst.Port()]:
			c.Class = "to the proxy's own port"
		case isPod(f.Dst.Addr()):
			c.Class = Bypassing
			c.Rule = last(trace(fmt.Sprintf("in:%d/%s,src=%s", f.Dst.Port(), f.Proto, f.Src.Addr())))
			c.Why = "inbound, not redirected to the proxy"
		default:
			c.Class = "other"
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return classRank(out[i].Class) < classRank(out[j].Class) })
	return out
}

// Unpaired is the class of a closed flow sent as the proxy's uid whose
// captured call is not in the table as it leaves it: the table drops closed
// flows one by one, so the call the upstream served may have gone first.
// What made it is not known; it is not counted as bypassing.
const Unpaired = "unpaired proxy flow"

// expiringSoon is how many seconds from leaving the table a closed flow may
// be and its captured twin, closed a moment before, already gone.
const expiringSoon = 3

// pairUpstreams hands each destination's captured-call count to the flows
// isProxy says the proxy sent there, those the table keeps longest first:
// an upstream whose captured call already left the table is among the last
// to leave it, so it is the one left unpaired, not a live upstream.
func pairUpstreams(flows []Flow, counts map[netip.AddrPort]int, isProxy func(Flow) bool) map[int]bool {
	var idx []int
	for i, f := range flows {
		if isProxy(f) {
			idx = append(idx, i)
		}
	}
	keep := func(f Flow) int {
		if f.Expires < 0 || f.State != "TIME_WAIT" {
			return math.MaxInt
		}
		return f.Expires
	}
	sort.SliceStable(idx, func(a, b int) bool { return keep(flows[idx[a]]) > keep(flows[idx[b]]) })
	paired := map[int]bool{}
	for _, i := range idx {
		if counts[flows[i].Dst] > 0 {
			counts[flows[i].Dst]--
			paired[i] = true
		}
	}
	return paired
}

func classRank(c string) int {
	switch c {
	case Bypassing:
		return 0
	case "captured outbound", "captured inbound", "DNS via the proxy":
		return 1
	}
	return 2
}

// ConnectionSummary counts connections per class, bypassing first.
func ConnectionSummary(cs []Connection) string {
	n := map[string]int{}
	var order []string
	for _, c := range cs {
		if n[c.Class] == 0 {
			order = append(order, c.Class)
		}
		n[c.Class]++
	}
	if len(order) == 0 {
		return "no live TCP or UDP flows"
	}
	parts := make([]string, 0, len(order))
	for _, c := range order {
		parts = append(parts, fmt.Sprintf("%d %s", n[c], c))
	}
	return strings.Join(parts, ", ")
}
