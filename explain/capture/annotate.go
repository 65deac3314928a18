package capture

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// meshPorts names the ports Istio's and Linkerd's proxies use: Istio's as
// internal/istio names them.
var meshPorts = func() map[int]string {
	m := map[int]string{
		4140: "Linkerd outbound",
		4143: "Linkerd inbound",
		4190: "Linkerd proxy admin",
		4191: "Linkerd proxy admin/health",
		53:   "DNS",
	}
	for port, role := range istio.PortRoles {
		m[int(port)] = role
	}
	return m
}()

// PodContext is what a rule is annotated against: the pod's container ports
// (port → "name on container"), the proxy's uid and the pod's addresses.
type PodContext struct {
	Ports    map[int]string
	ProxyUID string
	// Ambient: the rules are ambient mode's in-pod rules (IsAmbientInPod):
	// 15001, 15006 and 15053 are ztunnel's, not the sidecar's.
	Ambient bool
}

func portName(port int, ctx *PodContext) string {
	if ctx != nil {
		if n, ok := ctx.Ports[port]; ok {
			return n
		}
		if n, ok := ambientPorts[port]; ok && ctx.Ambient {
			return n
		}
	}
	if n, ok := meshPorts[port]; ok {
		return n
	}
	return "port " + strconv.Itoa(port)
}

func describePorts(rs []portRange, ctx *PodContext) string {
	var parts []string
	for _, r := range rs {
		if r.lo == r.hi {
			name := portName(int(r.lo), ctx)
			if name == "port "+strconv.Itoa(int(r.lo)) {
				parts = append(parts, name)
			} else {
				parts = append(parts, fmt.Sprintf("%d (%s)", r.lo, name))
			}
		} else {
			parts = append(parts, "ports "+r.String())
		}
	}
	return strings.Join(parts, ", ")
}

func describeOwner(kind, id string, ctx *PodContext) string {
	who := kind + " " + id
	uid := istio.ProxyUID
	if ctx != nil && ctx.ProxyUID != "" {
		uid = ctx.ProxyUID
	}
	if id == uid {
		who += " (the proxy)"
	} else if id == "2102" {
		who += " (the Linkerd proxy)"
	}
	return who
}

// Annotate writes every rule's meaning in plain language, in the pod's context.
func (rs *Ruleset) Annotate(ctx *PodContext) {
	for _, t := range rs.Tables {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				r.Annotation = annotateRule(t.Name, r, ctx)
			}
		}
	}
}

// not phrases a possibly negated match: "to X" or "not to X".
func not(b bool, s string) string {
	if b {
		return "not " + s
	}
	return s
}

func annotateRule(table string, r *Rule, ctx *PodContext) string {
	m := &r.Match
	var what []string
	switch {
	case m.Proto != "" && m.Proto != "all":
		what = append(what, not(m.NotProto, strings.ToUpper(m.Proto)))
	}
	if m.Src != nil {
		what = append(what, not(m.NotSrc, "from "+describeAddr(m.Src.String())))
	}
	if m.Dst != nil {
		what = append(what, not(m.NotDst, "to "+describeAddr(m.Dst.String())))
	}
	if len(m.DPorts) > 0 {
		what = append(what, not(m.NotDPort, "to "+describePorts(m.DPorts, ctx)))
	}
	if len(m.SPorts) > 0 {
		what = append(what, not(m.NotSPrt, "from "+describePorts(m.SPorts, ctx)))
	}
	if m.In != "" {
		what = append(what, not(m.NotIn, "arriving on "+m.In))
	}
	if m.Out != "" {
		what = append(what, not(m.NotOut, "leaving through "+m.Out))
	}
	if m.UID != "" {
		what = append(what, not(m.NotUID, "sent by "+describeOwner("uid", m.UID, ctx)))
	}
	if m.GID != "" {
		what = append(what, not(m.NotGID, "sent by "+describeOwner("gid", m.GID, ctx)))
	}
	ambient := ctx != nil && ctx.Ambient
	if m.Mark != "" {
		mark := "marked " + m.Mark
		if ambient && m.Mark == ambientMark {
			mark += " (ztunnel's own)"
		}
		what = append(what, not(m.NotMark, mark))
	}
	if m.ConnMark != "" {
		mark := "on connections marked " + m.ConnMark
		if ambient && m.ConnMark == ambientConnMark {
			mark += " (made by ztunnel)"
		}
		what = append(what, not(m.NotConnMark, mark))
	}
	if len(m.CTState) > 0 {
		what = append(what, not(m.NotCTState, "in state "+strings.Join(m.CTState, "/")))
	}
	for _, u := range m.Unknown {
		what = append(what, "with "+u)
	}
	subject := "every packet"
	if len(what) > 0 {
		subject = strings.Join(what, ", ")
	}
	action := describeTarget(r, ctx)
	s := subject + ": " + action
	if m.Comment != "" {
		s += " [" + m.Comment + "]"
	}
	why := istioMeaning(table, r)
	if ambient {
		why = ambientMeaning(table, r)
	}
	if why != "" {
		s += " — " + why
	}
	return s
}

func describeAddr(cidr string) string {
	switch cidr {
	case "127.0.0.6/32", "::6/128":
		return cidr + " (Envoy's inbound passthrough source)"
	case "127.0.0.1/32", "::1/128":
		return cidr + " (loopback)"
	}
	return cidr
}

func describeTarget(r *Rule, ctx *PodContext) string {
	switch r.Target {
	case "RETURN":
		return "leave this chain (not captured here)"
	case "ACCEPT":
		return "accept"
	case "DROP":
		return "drop"
	case "REDIRECT":
		p, _ := strconv.Atoi(r.TargetArg("--to-ports"))
		return fmt.Sprintf("redirect to local port %d (%s)", p, portName(p, ctx))
	case "TPROXY":
		p, _ := strconv.Atoi(r.TargetArg("--on-port"))
		return fmt.Sprintf("divert with TPROXY to port %d (%s), mark %s", p, portName(p, ctx), r.TargetArg("--tproxy-mark"))
	case "MARK":
		v := r.TargetArg("--set-xmark")
		if v == "" {
			v = r.TargetArg("--set-mark")
		}
		return "set packet mark " + v
	case "CONNMARK":
		switch {
		case strings.Contains(strings.Join(r.TargetArgs, " "), "--save-mark"):
			return "save the packet mark on the connection"
		case r.TargetArg("--set-xmark") != "":
			return "mark the connection " + r.TargetArg("--set-xmark")
		}
		return "restore the connection's mark onto the packet"
	case "CT":
		return "put the connection in conntrack zone " + r.TargetArg("--zone")
	case "":
		return "count only"
	}
	if r.Goto {
		return "go to " + r.Target
	}
	return "jump to " + r.Target
}

// istioMeaning adds what a well-known Istio rule is for.
func istioMeaning(table string, r *Rule) string {
	m := &r.Match
	switch {
	case r.Chain == "ISTIO_OUTPUT" && r.Target == "RETURN" && m.Src != nil && m.Src.String() == "127.0.0.6/32":
		return "the proxy hands inbound connections to the app from 127.0.0.6; they must not be captured again"
	case r.Chain == "ISTIO_OUTPUT" && r.Target == "ISTIO_IN_REDIRECT" && m.Out == "lo" && m.UID != "":
		return "the proxy calling the pod's own address (app → service → back to this pod) goes through inbound capture"
	case r.Chain == "ISTIO_OUTPUT" && r.Target == "RETURN" && m.Out == "lo" && m.NotUID:
		return "the app talking to itself over loopback is left alone"
	case r.Chain == "ISTIO_OUTPUT" && r.Target == "RETURN" && (m.UID != "" || m.GID != "") && !m.NotUID && !m.NotGID && m.Out == "" && (m.UID == "1337" || m.GID == "1337"):
		return "the proxy's own traffic is never captured (no loop)"
	case r.Chain == "ISTIO_OUTPUT" && r.Target == "RETURN" && (m.UID != "" || m.GID != "") && !m.NotUID && !m.NotGID && m.Out == "":
		return "the traffic of this uid or gid leaves uncaptured: the proxy's own when istio-init was given it (-u, -g), else a group an owner-group setting lets out (ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE): it bypasses the proxy"
	case r.Chain == "ISTIO_INBOUND" && r.Target == "RETURN" && len(m.DPorts) == 1 && m.DPorts[0].lo == 15008:
		return "the HBONE tunnel port is never captured"
	case r.Chain == "ISTIO_OUTPUT" && r.Target == "ISTIO_REDIRECT" && m.Dst == nil && len(m.DPorts) == 0:
		return "all remaining outbound traffic goes to the proxy (includeOutboundIPRanges \"*\")"
	case r.Chain == "ISTIO_INBOUND" && (r.Target == "ISTIO_IN_REDIRECT" || r.Target == "ISTIO_TPROXY") && len(m.DPorts) == 0:
		return "all remaining inbound TCP goes to the proxy (includeInboundPorts \"*\")"
	case r.Chain == "ISTIO_OUTPUT_DNS" && r.Target == "REDIRECT":
		return "DNS capture: queries go to the Istio agent's DNS proxy"
	case strings.HasPrefix(m.Comment, "proxy-init/"):
		return linkerdMeaning(m.Comment)
	}
	return ""
}

// linkerdMeaning reads linkerd2-proxy-init's rule comments
// ("proxy-init/<what>/<timestamp>").
func linkerdMeaning(comment string) string {
	what := strings.Split(strings.TrimPrefix(comment, "proxy-init/"), "/")[0]
	switch {
	case what == "redirect-all-incoming-to-proxy-port":
		return "Linkerd: every other inbound TCP connection goes to the proxy's inbound port"
	case what == "redirect-all-outgoing-to-proxy-port":
		return "Linkerd: every other outbound TCP connection goes to the proxy's outbound port"
	case what == "ignore-proxy-user-id":
		return "Linkerd: the proxy's own traffic is never captured (no loop)"
	case what == "ignore-loopback":
		return "Linkerd: loopback traffic is not captured"
	case strings.HasPrefix(what, "ignore-port-"):
		return "Linkerd: these ports are skipped (config.linkerd.io/skip-inbound-ports / skip-outbound-ports)"
	case strings.HasPrefix(what, "ignore-subnet-"):
		return "Linkerd: this subnet is skipped (config.linkerd.io/skip-subnets)"
	case strings.HasPrefix(what, "install-proxy-init-"):
		return "Linkerd: entry into proxy-init's chain"
	}
	return "Linkerd proxy-init rule"
}
