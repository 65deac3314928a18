package capture

import (
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Ambient mode's in-pod rules: istio-cni's node agent writes them into each
// enrolled pod's network namespace (no init container, no sidecar), and
// ztunnel, running on the node, listens inside that namespace on 15001
// (outbound), 15006 (inbound plaintext), 15008 (HBONE) and 15053 (DNS).
// ztunnel's own packets carry mark 0x539/0xfff (1337): they are never
// captured; connections ztunnel accepted get the connection mark
// 0x111/0xfff, restored on their packets so that replies are not captured
// either. The kubelet's probes reach the pod SNATed to 169.254.7.127 (the
// agent's host rule) and are let through.

// Ambient mode's ports, marks and probe source, as istio-cni writes them.
const (
	AmbientOutboundPort  = istio.PortOutbound
	AmbientInboundPort   = istio.PortInbound
	AmbientHBONEPort     = istio.PortHBONE
	AmbientDNSPort       = istio.PortDNS
	ambientMark          = "0x539/0xfff"
	ambientConnMark      = "0x111/0xfff"
	ambientProbeSNAT     = "169.254.7.127"
	ambientProbeSNATv6   = "fd16:9254:7127:1337:ffff:ffff:ffff:ffff"
	ambientPrerouting    = "ISTIO_PRERT"
	ambientOutput        = "ISTIO_OUTPUT"
	ambientRestoreTarget = "CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff"
)

// ambientPorts names ztunnel's ports in a pod ambient mode captures.
var ambientPorts = map[int]string{
	AmbientOutboundPort: "ztunnel outbound",
	AmbientInboundPort:  "ztunnel inbound, plaintext",
	AmbientHBONEPort:    "ztunnel HBONE inbound",
	AmbientDNSPort:      "ztunnel DNS proxy",
}

// AmbientConfig is what istio-cni's agent writes a pod's in-pod rules from:
// its own settings (its ConfigMap) and the pod's annotations.
type AmbientConfig struct {
	// RedirectDNS: AMBIENT_DNS_CAPTURE, unless the pod's
	// ambient.istio.io/dns-capture says otherwise.
	RedirectDNS bool `json:"redirectDNS"`
	// IPv6: AMBIENT_IPV6 (the agent then writes the same rules for IPv6).
	IPv6 bool `json:"ipv6"`
	// BypassInbound: the pod's ambient.istio.io/bypass-inbound-capture
	// (only outbound is captured).
	BypassInbound bool `json:"bypassInbound,omitempty"`
	// VirtualInterfaces: the pod's istio.io/reroute-virtual-interfaces.
	VirtualInterfaces []string `json:"virtualInterfaces,omitempty"`
	// NativeNftables: NATIVE_NFTABLES (Istio's own nftables tables).
	NativeNftables bool `json:"nativeNftables,omitempty"`
	// Source says where each setting came from.
	Source string `json:"source"`
	// Release is the istio-cni release that writes the rules, and
	// ReleaseFrom where it was read. Only the in-pod rules of the release
	// the model was checked against (NewestModelled) are compared: another
	// release, or one unread (Release "", ReleaseFrom saying why), is not.
	// Both empty: taken to be the newest.
	Release     string `json:"release,omitempty"`
	ReleaseFrom string `json:"releaseFrom,omitempty"`
}

// AmbientConfigFor reads the in-pod rules' settings from istio-cni's
// ConfigMap data (nil: the chart's defaults) and the pod's annotations, as
// the agent does.
func AmbientConfigFor(cni map[string]string, annotations map[string]string) *AmbientConfig {
	a := &AmbientConfig{RedirectDNS: true, IPv6: true, Source: "istio-cni's chart defaults"}
	if cni != nil {
		a.RedirectDNS = cni["AMBIENT_DNS_CAPTURE"] == "true"
		a.IPv6 = cni["AMBIENT_IPV6"] == "true"
		a.NativeNftables = cni["NATIVE_NFTABLES"] == "true"
		a.Source = "istio-cni's ConfigMap"
	}
	var from []string
	if v, ok := boolAnnotation(annotations["ambient.istio.io/dns-capture"]); ok {
		a.RedirectDNS = v
		from = append(from, "ambient.istio.io/dns-capture")
	}
	if v, ok := boolAnnotation(annotations["ambient.istio.io/bypass-inbound-capture"]); ok {
		a.BypassInbound = v
		from = append(from, "ambient.istio.io/bypass-inbound-capture")
	}
	if v := annotations["istio.io/reroute-virtual-interfaces"]; v != "" {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				a.VirtualInterfaces = append(a.VirtualInterfaces, s)
			}
		}
		from = append(from, "istio.io/reroute-virtual-interfaces")
	}
	if len(from) > 0 {
		a.Source += " and the pod's annotations " + strings.Join(from, ", ")
	}
	return a
}

// boolAnnotation reads a boolean annotation as Go's strconv.ParseBool does
// (what istio-cni uses); ok is false when it is absent or not a boolean.
func boolAnnotation(v string) (b, ok bool) {
	switch v {
	case "1", "t", "T", "TRUE", "true", "True":
		return true, true
	case "0", "f", "F", "FALSE", "false", "False":
		return false, true
	}
	return false, false
}

// IsAmbientInPod tells whether rs holds ambient mode's in-pod rules: the
// chain ISTIO_PRERT (which sidecar capture never writes), or istio-cni's
// inet istio-ambient-* tables.
func IsAmbientInPod(rs *Ruleset) bool {
	if rs.Ambient {
		return true
	}
	for _, t := range rs.Tables {
		for _, c := range t.Chains {
			if c.Name == ambientPrerouting {
				return true
			}
		}
	}
	return false
}

// ExpectedAmbientRules derives the in-pod rules istio-cni writes for a, for
// one IP family (none for IPv6 unless a.IPv6), as iptables-save prints
// them, table by table in order.
func ExpectedAmbientRules(a *AmbientConfig, v6 bool) map[string][]string {
	out := map[string][]string{}
	if v6 && !a.IPv6 {
		return out
	}
	lo, snat := "127.0.0.1/32", ambientProbeSNAT+"/32"
	if v6 {
		lo, snat = "::1/128", ambientProbeSNATv6+"/128"
	}
	add := func(table, chain, rule string) { out[table] = append(out[table], "-A "+chain+" "+rule) }
	hooks := func(table string) {
		add(table, "PREROUTING", "-j "+ambientPrerouting)
		add(table, "OUTPUT", "-j "+ambientOutput)
	}
	notZtunnel := "-m mark ! --mark " + ambientMark

	hooks("mangle")
	add("mangle", ambientOutput, "-m connmark --mark "+ambientConnMark+" -j "+ambientRestoreTarget)
	add("mangle", ambientPrerouting, "-m mark --mark "+ambientMark+" -j CONNMARK --set-xmark "+ambientConnMark)

	if a.RedirectDNS {
		hooks("raw")
		add("raw", ambientOutput, "-p udp -m mark --mark "+ambientMark+" -m udp --dport 53 -j CT --zone 1")
		add("raw", ambientPrerouting, "-p udp "+notZtunnel+" -m udp --sport 53 -j CT --zone 1")
	}

	hooks("nat")
	add("nat", ambientOutput, "-d "+snat+" -p tcp -m tcp -j ACCEPT")
	if a.RedirectDNS {
		add("nat", ambientOutput, "! -o lo -p udp "+notZtunnel+" -m udp --dport 53 -j REDIRECT --to-ports 15053")
		add("nat", ambientOutput, "! -d "+lo+" -p tcp -m tcp --dport 53 "+notZtunnel+" -j REDIRECT --to-ports 15053")
	}
	add("nat", ambientOutput, "-p tcp -m mark --mark "+ambientConnMark+" -j ACCEPT")
	add("nat", ambientOutput, "! -d "+lo+" -o lo -j ACCEPT")
	add("nat", ambientOutput, "! -d "+lo+" -p tcp "+notZtunnel+" -j REDIRECT --to-ports 15001")
	for _, vif := range a.VirtualInterfaces {
		add("nat", ambientPrerouting, "-i "+vif+" -p tcp -j REDIRECT --to-ports 15001")
		add("nat", ambientPrerouting, "-i "+vif+" -p tcp -j RETURN")
	}
	if !a.BypassInbound {
		add("nat", ambientPrerouting, "-s "+snat+" -p tcp -m tcp -j ACCEPT")
		add("nat", ambientPrerouting, "! -d "+lo+" -p tcp -m tcp ! --dport 15008 "+notZtunnel+" -j REDIRECT --to-ports 15006")
	}
	return out
}

// ambientMeaning adds what a rule of ambient mode's in-pod set is for.
func ambientMeaning(table string, r *Rule) string {
	m := &r.Match
	isSNAT := func(p interface{ String() string }) bool {
		s := p.String()
		return s == ambientProbeSNAT+"/32" || s == ambientProbeSNATv6+"/128"
	}
	switch {
	case r.Chain != ambientPrerouting && r.Chain != "ISTIO_PREROUTING" && r.Chain != ambientOutput:
		return ""
	case table == "mangle" && r.Target == "CONNMARK" && r.TargetArg("--set-xmark") != "":
		return "connections ztunnel makes into the pod are remembered, so that their replies are not captured"
	case table == "mangle" && r.Target == "CONNMARK":
		return "the connection's mark goes back onto each packet, for the nat rules below"
	case table == "raw" && r.Target == "CT":
		return "DNS between the pod and ztunnel's DNS proxy in a conntrack zone of its own"
	case r.Target == "ACCEPT" && m.Src != nil && isSNAT(m.Src):
		return "the kubelet's health probes (SNATed to this address by istio-cni's host rule) reach the app directly"
	case r.Target == "ACCEPT" && m.Dst != nil && isSNAT(m.Dst):
		return "replies to the kubelet's probes are not captured"
	case r.Target == "ACCEPT" && m.ConnMark == "" && m.Mark != "" && !m.NotMark:
		return "packets of connections ztunnel made are not captured (no loop)"
	case r.Target == "ACCEPT" && m.Out == "lo":
		return "the pod talking to itself over loopback is left alone"
	case r.Target == "REDIRECT" && r.TargetArg("--to-ports") == "15053":
		return "DNS capture: the pod's queries go to ztunnel's DNS proxy"
	case r.Target == "REDIRECT" && r.TargetArg("--to-ports") == "15001" && m.In != "":
		return "TCP from a virtual interface (istio.io/reroute-virtual-interfaces) is captured as outbound"
	case r.Target == "RETURN" && m.In != "":
		return "nothing else from a virtual interface is captured as inbound"
	case r.Target == "REDIRECT" && r.TargetArg("--to-ports") == "15001":
		return "all other outbound TCP goes to ztunnel (ztunnel's own, marked, is not captured)"
	case r.Target == "REDIRECT" && r.TargetArg("--to-ports") == "15006":
		return "all other inbound TCP, except HBONE to 15008, goes to ztunnel's plaintext inbound port"
	}
	return ""
}

// ExpectedAmbientNftRules derives the in-pod rules istio-cni writes for a in
// native nftables mode (inet tables istio-ambient-nat, -mangle, -raw), as
// the IPv4 and IPv6 views ParseNftRuleset gives. One inet table serves both
// families: rules naming no address apply to IPv6 whatever a.IPv6 says;
// only the IPv6 variants of address rules follow it.
func ExpectedAmbientNftRules(a *AmbientConfig) (v4, v6 map[string][]*Rule, err error) {
	var chains []nftChainRules
	chain := func(table, name string, rules ...string) {
		chains = append(chains, nftChainRules{table, name, rules})
	}
	both := func(v4rule, v6rule string) []string {
		if a.IPv6 {
			return []string{v4rule, v6rule}
		}
		return []string{v4rule}
	}
	const notZtunnel = "meta mark & 0x00000fff != 0x00000539"
	hooks := func(table string) {
		chain(table, "prerouting", "jump istio-prerouting")
		chain(table, "output", "jump istio-output")
	}

	hooks("nat")
	var pre []string
	for _, vif := range a.VirtualInterfaces {
		pre = append(pre, `iifname "`+vif+`" meta l4proto tcp redirect to :15001`, `iifname "`+vif+`" meta l4proto tcp return`)
	}
	if !a.BypassInbound {
		pre = append(pre, both("meta l4proto tcp ip saddr "+ambientProbeSNAT+" accept", "meta l4proto tcp ip6 saddr "+ambientProbeSNATv6+" accept")...)
		pre = append(pre, both("ip daddr != 127.0.0.1 tcp dport != 15008 "+notZtunnel+" redirect to :15006",
			"ip6 daddr != ::1 tcp dport != 15008 "+notZtunnel+" redirect to :15006")...)
	}
	chain("nat", "istio-prerouting", pre...)
	out := both("meta l4proto tcp ip daddr "+ambientProbeSNAT+" accept", "meta l4proto tcp ip6 daddr "+ambientProbeSNATv6+" accept")
	if a.RedirectDNS {
		out = append(out, `oifname != "lo" `+notZtunnel+" udp dport 53 redirect to :15053")
		out = append(out, both("ip daddr != 127.0.0.1 tcp dport 53 "+notZtunnel+" redirect to :15053",
			"ip6 daddr != ::1 tcp dport 53 "+notZtunnel+" redirect to :15053")...)
	}
	out = append(out, "meta l4proto tcp meta mark & 0x00000fff == 0x00000111 accept")
	out = append(out, both(`oifname "lo" ip daddr != 127.0.0.1 accept`, `oifname "lo" ip6 daddr != ::1 accept`)...)
	out = append(out, both("meta l4proto tcp ip daddr != 127.0.0.1 "+notZtunnel+" redirect to :15001",
		"meta l4proto tcp ip6 daddr != ::1 "+notZtunnel+" redirect to :15001")...)
	chain("nat", "istio-output", out...)

	hooks("mangle")
	chain("mangle", "istio-prerouting", "meta mark & 0x00000fff == 0x00000539 ct mark set ct mark & 0xfffff111 | 0x00000111")
	chain("mangle", "istio-output", "ct mark & 0x00000fff == 0x00000111 meta mark set ct mark")

	if a.RedirectDNS {
		hooks("raw")
		chain("raw", "istio-prerouting", "udp sport 53 "+notZtunnel+" ct zone set 1")
		chain("raw", "istio-output", "udp dport 53 meta mark & 0x00000fff == 0x00000539 ct zone set 1")
	}
	return nftViews(chains)
}
