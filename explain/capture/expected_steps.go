package capture

import (
	"fmt"
	"net/netip"
	"strings"
)

// The steps of ExpectedRules, in the order istio-iptables writes.

// inbound writes the excluded and virtual interfaces, the invalid-packet
// drop, the redirect chains and inbound capture (REDIRECT, or TPROXY's
// mangle rules).
func (b *ruleBuilder) inbound() {
	c := b.c
	tproxy := c.Mode == "TPROXY"
	inTable := "nat"
	if tproxy {
		inTable = "mangle"
	}
	mark := fmt.Sprintf("0x%x", atoiMark(c.TProxyMark))
	for _, nic := range c.ExcludeInterfaces {
		b.add("nat", "-A PREROUTING -i "+nic+" -j RETURN")
		b.add("nat", "-A OUTPUT -o "+nic+" -j RETURN")
		if tproxy {
			b.add("mangle", "-A PREROUTING -i "+nic+" -j RETURN")
			b.add("mangle", "-A OUTPUT -o "+nic+" -j RETURN")
		}
	}
	for _, vif := range c.VirtInterfaces {
		b.insert("nat", "-A PREROUTING -i "+vif+" -j RETURN")
	}
	if c.DropInvalid {
		if c.Model.dropChain() {
			b.add("mangle", "-A PREROUTING -m conntrack --ctstate INVALID -j ISTIO_DROP")
			b.add("mangle", "-A ISTIO_DROP -j DROP")
		} else {
			b.add("mangle", "-A PREROUTING -m conntrack --ctstate INVALID -j DROP")
		}
	}
	// The HBONE tunnel port is let through in nat's ISTIO_INBOUND, in TPROXY
	// mode too, where nothing jumps to that chain (what istio-iptables writes).
	b.add("nat", "-A ISTIO_INBOUND -p tcp -m tcp --dport "+c.TunnelPort+" -j RETURN")
	b.add("nat", "-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports "+c.ProxyPort)
	b.add("nat", "-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports "+c.InboundPort)
	if c.InboundPorts != "" {
		b.add(inTable, "-A PREROUTING -p tcp -j ISTIO_INBOUND")
		if tproxy {
			b.add("mangle", "-A ISTIO_DIVERT -j MARK --set-xmark "+mark+"/0xffffffff")
			b.add("mangle", "-A ISTIO_DIVERT -j ACCEPT")
			onIP := "0.0.0.0"
			if b.v6 {
				onIP = "::"
			}
			b.add("mangle", "-A ISTIO_TPROXY ! -d "+b.lo+" -p tcp -j TPROXY --on-port "+c.InboundPort+" --on-ip "+onIP+" --tproxy-mark "+mark+"/0xffffffff")
		}
		capture := func(port string) {
			dport := ""
			if port != "" {
				dport = " -m tcp --dport " + port
			}
			if tproxy {
				b.add("mangle", "-A ISTIO_INBOUND -p tcp"+dport+" -m conntrack --ctstate RELATED,ESTABLISHED -j ISTIO_DIVERT")
				b.add("mangle", "-A ISTIO_INBOUND -p tcp"+dport+" -j ISTIO_TPROXY")
				return
			}
			b.add("nat", "-A ISTIO_INBOUND -p tcp"+dport+" -j ISTIO_IN_REDIRECT")
		}
		if c.InboundPorts == "*" {
			for _, p := range c.InboundExclude {
				b.add(inTable, "-A ISTIO_INBOUND -p tcp -m tcp --dport "+p+" -j RETURN")
			}
			capture("")
		} else {
			for _, p := range list(c.InboundPorts) {
				capture(p)
			}
		}
	}
	if tproxy {
		b.tproxyMarks(mark)
	}
}

// tproxyMarks writes TPROXY mode's mark rules, and puts its returns at the
// top of mangle's ISTIO_INBOUND.
func (b *ruleBuilder) tproxyMarks(mark string) {
	c := b.c
	b.add("mangle", "-A PREROUTING -p tcp -m mark --mark "+mark+" -j CONNMARK --save-mark --nfmask 0xffffffff --ctmask 0xffffffff")
	b.add("mangle", "-A OUTPUT -o lo -p tcp -m mark --mark "+mark+" -j RETURN")
	for _, u := range c.ProxyUIDs {
		b.add("mangle", "-A OUTPUT ! -d "+b.lo+" -o lo -p tcp -m owner --uid-owner "+u+" -j MARK --set-xmark 0x53a/0xffffffff")
	}
	for _, g := range c.ProxyGIDs {
		b.add("mangle", "-A OUTPUT ! -d "+b.lo+" -o lo -p tcp -m owner --gid-owner "+g+" -j MARK --set-xmark 0x53a/0xffffffff")
	}
	b.add("mangle", "-A OUTPUT -p tcp -m connmark --mark "+mark+" -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff")
	// Inserted at the top of ISTIO_INBOUND, last insert first.
	var ins []string
	ins = append(ins, "-A ISTIO_INBOUND -p tcp -m mark --mark "+mark+" -j RETURN")
	ins = append(ins, "-A ISTIO_INBOUND -s "+b.pass+" -i lo -p tcp -j RETURN")
	ins = append(ins, "-A ISTIO_INBOUND -i lo -p tcp -m mark ! --mark 0x53a -j RETURN")
	var rest, inbound []string
	for _, r := range b.out["mangle"] {
		if strings.HasPrefix(r, "-A ISTIO_INBOUND ") {
			inbound = append(inbound, r)
		} else {
			rest = append(rest, r)
		}
	}
	b.out["mangle"] = append(append(rest, ins...), inbound...)
}

// outputStart writes the jump to ISTIO_OUTPUT, the excluded outbound ports
// and the passthrough address's return.
func (b *ruleBuilder) outputStart() {
	c, m := b.c, b.c.Model
	if m.tcpOutputJump() {
		b.add("nat", "-A OUTPUT -p tcp -j ISTIO_OUTPUT")
	} else {
		b.add("nat", "-A OUTPUT -j ISTIO_OUTPUT")
	}
	for _, p := range c.ExcludeOutPorts {
		b.add("nat", "-A ISTIO_OUTPUT -p tcp -m tcp --dport "+p+" -j RETURN")
		if m.udpExcludedPorts() {
			b.add("nat", "-A ISTIO_OUTPUT -p udp -m udp --dport "+p+" -j RETURN")
		}
	}
	b.add("nat", "-A ISTIO_OUTPUT -s "+b.pass+" -o lo -j RETURN")
}

// dnsServers decides DNS capture: on when there is a DNS server of either
// family (or all DNS is captured): then both families get the proxy-owner
// and conntrack zone rules; the jumps and server rules of one family only
// where it has a server.
func (b *ruleBuilder) dnsServers(nameservers []string) {
	c := b.c
	anyServer := false
	for _, ns := range nameservers {
		if a, err := netip.ParseAddr(ns); err == nil {
			a = a.WithZone("") // istio-iptables drops a zone (fe80::1%eth0)
			anyServer = true
			if a.Is6() == b.v6 {
				b.servers = append(b.servers, a.String())
			}
		}
	}
	b.dns = c.RedirectDNS && (c.CaptureAllDNS || anyServer)
	if !c.Model.dnsChain() {
		// Before 1.25 DNS capture is on with --redirect-dns, servers or not.
		b.dns = c.RedirectDNS
	}
	b.familyDNS = b.dns && (c.CaptureAllDNS || len(b.servers) > 0)
}

// owners writes the proxy's own traffic's rules, by uid and by gid.
func (b *ruleBuilder) owners() {
	c := b.c
	loopbackIncluded := false
	for _, n := range list(c.IncludeCIDRs) {
		if p, err := netip.ParsePrefix(n); err == nil && p.Addr().IsLoopback() {
			loopbackIncluded = true
		}
	}
	owner := func(flag string, ids []string) {
		for _, id := range ids {
			// Under DNS capture the proxy's own loopback DNS is spared by uid only;
			// the gid rule keeps the tunnel-port match alone.
			if b.dns && flag == "--uid-owner" {
				b.add("nat", "-A ISTIO_OUTPUT ! -d "+b.lo+" -o lo -p tcp -m multiport ! --dports 53,"+c.TunnelPort+" -m owner "+flag+" "+id+" -j ISTIO_IN_REDIRECT")
			} else {
				b.add("nat", "-A ISTIO_OUTPUT ! -d "+b.lo+" -o lo -p tcp -m tcp ! --dport "+c.TunnelPort+" -m owner "+flag+" "+id+" -j ISTIO_IN_REDIRECT")
			}
			if !loopbackIncluded {
				if b.dns {
					b.add("nat", "-A ISTIO_OUTPUT -o lo -p tcp -m tcp ! --dport 53 -m owner ! "+flag+" "+id+" -j RETURN")
				} else {
					b.add("nat", "-A ISTIO_OUTPUT -o lo -m owner ! "+flag+" "+id+" -j RETURN")
				}
			}
			b.add("nat", "-A ISTIO_OUTPUT -m owner "+flag+" "+id+" -j RETURN")
		}
	}
	owner("--uid-owner", c.ProxyUIDs)
	owner("--gid-owner", c.ProxyGIDs)
}

// dnsRules writes DNS capture's rules: in chains of their own from 1.25,
// before that in OUTPUT or ISTIO_OUTPUT, whose UDP rules come after
// everything else (the func returned, nil when there are none).
func (b *ruleBuilder) dnsRules() (appendUDP func()) {
	c, m := b.c, b.c.Model
	if !b.dns {
		return nil
	}
	if c.CaptureAllDNS {
		b.servers = []string{""}
	}
	zones := func(chain string) {
		for _, u := range c.ProxyUIDs {
			b.add("raw", "-A "+chain+" -p udp -m udp --dport 53 -m owner --uid-owner "+u+" -j CT --zone 1")
			b.add("raw", "-A "+chain+" -p udp -m udp --sport 15053 -m owner --uid-owner "+u+" -j CT --zone 2")
		}
		for _, g := range c.ProxyGIDs {
			b.add("raw", "-A "+chain+" -p udp -m udp --dport 53 -m owner --gid-owner "+g+" -j CT --zone 1")
			b.add("raw", "-A "+chain+" -p udp -m udp --sport 15053 -m owner --gid-owner "+g+" -j CT --zone 2")
		}
	}
	if m.dnsChain() {
		if b.familyDNS {
			b.add("nat", "-A ISTIO_OUTPUT -j ISTIO_OUTPUT_DNS")
		}
		b.add("raw", "-A OUTPUT -j ISTIO_OUTPUT_DNS")
		if b.familyDNS {
			b.add("raw", "-A PREROUTING -j ISTIO_INBOUND")
		}
		zones("ISTIO_OUTPUT_DNS")
		// Every server's TCP redirect, then every server's UDP one.
		for _, ns := range b.servers {
			b.add("nat", "-A ISTIO_OUTPUT_DNS"+b.dstOf(ns)+" -p tcp -m tcp --dport 53 -j REDIRECT --to-ports 15053")
		}
		for _, ns := range b.servers {
			b.add("nat", "-A ISTIO_OUTPUT_DNS"+b.dstOf(ns)+" -p udp -m udp --dport 53 -j REDIRECT --to-ports 15053")
		}
		for _, ns := range b.servers {
			b.add("raw", "-A ISTIO_OUTPUT_DNS"+b.dstOf(ns)+" -p udp -m udp --dport 53 -j CT --zone 2")
			b.add("raw", "-A ISTIO_INBOUND"+b.srcOf(ns)+" -p udp -m udp --sport 53 -j CT --zone 1")
		}
		return nil
	}
	rawChain := "ISTIO_OUTPUT"
	if m.dnsInOutput() {
		rawChain = "OUTPUT"
	} else {
		b.add("raw", "-A OUTPUT -p udp -j ISTIO_OUTPUT")
		b.add("nat", "-A OUTPUT -p udp -j ISTIO_OUTPUT")
	}
	zones(rawChain)
	for _, ns := range b.servers {
		b.add("raw", "-A "+rawChain+b.dstOf(ns)+" -p udp -m udp --dport 53 -j CT --zone 2")
		b.add("raw", "-A PREROUTING"+b.srcOf(ns)+" -p udp -m udp --sport 53 -j CT --zone 1")
	}
	for _, ns := range b.servers {
		b.add("nat", "-A ISTIO_OUTPUT"+b.dstOf(ns)+" -p tcp -m tcp --dport 53 -j REDIRECT --to-ports 15053")
	}
	natChain := "ISTIO_OUTPUT"
	if m.dnsInOutput() {
		natChain = "OUTPUT"
	}
	return func() {
		for _, u := range c.ProxyUIDs {
			b.add("nat", "-A "+natChain+" -p udp -m udp --dport 53 -m owner --uid-owner "+u+" -j RETURN")
		}
		for _, g := range c.ProxyGIDs {
			b.add("nat", "-A "+natChain+" -p udp -m udp --dport 53 -m owner --gid-owner "+g+" -j RETURN")
		}
		for _, ns := range b.servers {
			b.add("nat", "-A "+natChain+b.dstOf(ns)+" -p udp -m udp --dport 53 -j REDIRECT --to-ports 15053")
		}
	}
}

// outputDestinations writes outbound capture by destination: loopback and
// the excluded ranges return, the included ports and ranges redirect.
func (b *ruleBuilder) outputDestinations() {
	c := b.c
	b.add("nat", "-A ISTIO_OUTPUT -d "+b.lo+" -j RETURN")
	for _, n := range c.ExcludeCIDRs {
		if p, err := netip.ParsePrefix(n); err == nil && p.Addr().Is6() == b.v6 {
			b.add("nat", "-A ISTIO_OUTPUT -d "+p.Masked().String()+" -j RETURN")
		}
	}
	for _, p := range c.IncludeOutPorts {
		b.add("nat", "-A ISTIO_OUTPUT -p tcp -m tcp --dport "+p+" -j ISTIO_REDIRECT")
	}
	if c.IncludeCIDRs == "*" {
		b.add("nat", "-A ISTIO_OUTPUT -j ISTIO_REDIRECT")
		for _, vif := range c.VirtInterfaces {
			b.insert("nat", "-A PREROUTING -i "+vif+" -j ISTIO_REDIRECT")
		}
		return
	}
	familyIncluded := false
	for _, n := range list(c.IncludeCIDRs) {
		p, err := netip.ParsePrefix(n)
		if err != nil || p.Addr().Is6() != b.v6 {
			continue
		}
		familyIncluded = true
		b.add("nat", "-A ISTIO_OUTPUT -d "+p.Masked().String()+" -j ISTIO_REDIRECT")
		for _, vif := range c.VirtInterfaces {
			b.insert("nat", "-A PREROUTING -d "+p.Masked().String()+" -i "+vif+" -j ISTIO_REDIRECT")
		}
	}
	if c.Model.finalReturn() && familyIncluded {
		b.add("nat", "-A ISTIO_OUTPUT -j RETURN")
	}
}
