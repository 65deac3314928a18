package capture

import (
	"fmt"
	"net/netip"
	"strings"
)

// The steps of ExpectedNftRules, in the order istio-iptables writes.

// ranges reads the include and exclude ranges and the DNS servers by
// family, and whether DNS capture is on: for both families when all DNS is
// captured or the pod has a DNS server of either family.
func (b *nftBuilder) ranges(nameservers []string) error {
	c := b.c
	b.incAll = c.IncludeCIDRs == "*"
	if !b.incAll {
		for _, n := range list(c.IncludeCIDRs) {
			p, err := netip.ParsePrefix(n)
			if err != nil {
				return fmt.Errorf("include range %q: %v", n, err)
			}
			if p.Addr().IsLoopback() {
				b.loopbackIncluded = true
			}
			if p.Addr().Is4() {
				b.inc4 = append(b.inc4, p)
			} else {
				b.inc6 = append(b.inc6, p)
			}
		}
	}
	for _, n := range c.ExcludeCIDRs {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			return fmt.Errorf("exclude range %q: %v", n, err)
		}
		if p.Addr().Is4() {
			b.exc4 = append(b.exc4, p)
		} else {
			b.exc6 = append(b.exc6, p)
		}
	}
	for _, ns := range nameservers {
		if a, err := netip.ParseAddr(ns); err == nil {
			a = a.WithZone("")
			if a.Is4() {
				b.dns4 = append(b.dns4, a.String())
			} else {
				b.dns6 = append(b.dns6, a.String())
			}
		}
	}
	b.dns = c.RedirectDNS && (c.CaptureAllDNS || len(b.dns4)+len(b.dns6) > 0)
	return nil
}

// inbound writes the excluded and virtual interfaces, the invalid-packet
// drop, the redirect chains and inbound capture.
func (b *nftBuilder) inbound() {
	c, mark := b.c, b.mark
	for _, nic := range c.ExcludeInterfaces {
		b.add("nat", "prerouting", "iifname", nic, "return")
		b.add("nat", "output", "oifname", nic, "return")
	}
	if b.tproxy {
		for _, nic := range c.ExcludeInterfaces {
			b.add("mangle", "prerouting", "iifname", nic, "return")
			b.add("mangle", "output", "oifname", nic, "return")
		}
	}
	for _, vif := range c.VirtInterfaces {
		b.insert("nat", "prerouting", 0, "iifname", vif, "return")
	}
	if c.DropInvalid {
		b.add("mangle", "prerouting", "meta l4proto tcp ct state invalid jump istio-drop")
		b.add("mangle", "istio-drop", "drop")
	}
	b.add("nat", "istio-inbound", "meta l4proto tcp tcp dport", c.TunnelPort, "return")
	b.add("nat", "istio-redirect", "meta l4proto tcp redirect to :"+c.ProxyPort)
	b.add("nat", "istio-in-redirect", "meta l4proto tcp redirect to :"+c.InboundPort)
	if c.InboundPorts == "" {
		return
	}
	if !b.tproxy {
		b.add("nat", "prerouting", "meta l4proto tcp jump istio-inbound")
		if c.InboundPorts == "*" {
			for _, p := range c.InboundExclude {
				b.add("nat", "istio-inbound", "meta l4proto tcp tcp dport", p, "return")
			}
			b.add("nat", "istio-inbound", "meta l4proto tcp jump istio-in-redirect")
			return
		}
		for _, p := range list(c.InboundPorts) {
			b.add("nat", "istio-inbound", "meta l4proto tcp tcp dport", p, "jump istio-in-redirect")
		}
		return
	}
	b.add("mangle", "istio-divert", "meta mark set", mark)
	b.add("mangle", "istio-divert", "accept")
	b.add("mangle", "istio-tproxy", "meta l4proto tcp ip daddr !=", nftLo4, "tproxy ip to :"+c.InboundPort, "meta mark set", mark, "accept")
	b.add6("mangle", "istio-tproxy", "meta l4proto tcp ip6 daddr !=", nftLo6, "tproxy ip6 to :"+c.InboundPort, "meta mark set", mark, "accept")
	b.add("mangle", "prerouting", "meta l4proto tcp jump istio-inbound")
	if c.InboundPorts == "*" {
		for _, p := range c.InboundExclude {
			b.add("mangle", "istio-inbound", "meta l4proto tcp tcp dport", p, "return")
		}
		b.add("mangle", "istio-inbound", "meta l4proto tcp ct state related,established jump istio-divert")
		b.add("mangle", "istio-inbound", "meta l4proto tcp jump istio-tproxy")
		return
	}
	for _, p := range list(c.InboundPorts) {
		b.add("mangle", "istio-inbound", "meta l4proto tcp ct state related,established tcp dport", p, "jump istio-divert")
		b.add("mangle", "istio-inbound", "meta l4proto tcp tcp dport", p, "jump istio-tproxy")
	}
}

// output writes the jump to istio-output, the excluded ports, the
// passthrough address's return and the proxy's own traffic's rules.
func (b *nftBuilder) output() {
	c := b.c
	b.add("nat", "output", "jump istio-output")
	for _, p := range c.ExcludeOutPorts {
		b.add("nat", "istio-output", "tcp dport", p, "return")
		b.add("nat", "istio-output", "udp dport", p, "return")
	}
	b.add("nat", "istio-output", "oifname lo ip saddr 127.0.0.6/32 return")
	b.add6("nat", "istio-output", "oifname lo ip6 saddr ::6/128 return")
	owner := func(sel string, ids []string) {
		for _, id := range ids {
			// Under DNS capture the proxy's loopback DNS is spared by uid only.
			tunnel := c.TunnelPort
			if b.dns && sel == "skuid" {
				tunnel = "{ 53, " + c.TunnelPort + " }"
			}
			b.add("nat", "istio-output", "oifname lo meta l4proto tcp ip daddr !=", nftLo4, "tcp dport !=", tunnel, sel, id, "jump istio-in-redirect")
			b.add6("nat", "istio-output", "oifname lo meta l4proto tcp ip6 daddr !=", nftLo6, "tcp dport !=", tunnel, sel, id, "jump istio-in-redirect")
			if !b.loopbackIncluded {
				if b.dns {
					b.add("nat", "istio-output", "oifname lo meta l4proto tcp tcp dport != 53", sel, "!=", id, "return")
				} else {
					b.add("nat", "istio-output", "oifname lo", sel, "!=", id, "return")
				}
			}
			b.add("nat", "istio-output", sel, id, "return")
		}
	}
	owner("skuid", c.ProxyUIDs)
	owner("skgid", c.ProxyGIDs)
}

// dnsRules writes DNS capture's redirects and conntrack zones.
func (b *nftBuilder) dnsRules() {
	c := b.c
	if !b.dns {
		return
	}
	b.add("raw", "output", "jump istio-output-dns")
	b.add("nat", "istio-output", "jump istio-output-dns")
	for _, proto := range []string{"tcp", "udp"} {
		if c.CaptureAllDNS {
			b.add("nat", "istio-output-dns", proto, "dport 53 redirect to :15053")
			continue
		}
		for _, s := range b.dns4 {
			b.add("nat", "istio-output-dns", "ip daddr", s+"/32", proto, "dport 53 redirect to :15053")
		}
		for _, s := range b.dns6 {
			b.add6("nat", "istio-output-dns", "ip6 daddr", s+"/128", proto, "dport 53 redirect to :15053")
		}
	}
	for _, u := range c.ProxyUIDs {
		b.add("raw", "istio-output-dns", "udp dport 53 meta skuid", u, "ct zone set 1")
		b.add("raw", "istio-output-dns", "udp sport 15053 meta skuid", u, "ct zone set 2")
	}
	for _, g := range c.ProxyGIDs {
		b.add("raw", "istio-output-dns", "udp dport 53 meta skgid", g, "ct zone set 1")
		b.add("raw", "istio-output-dns", "udp sport 15053 meta skgid", g, "ct zone set 2")
	}
	b.add("raw", "prerouting", "jump istio-inbound")
	if c.CaptureAllDNS {
		b.add("raw", "istio-output-dns", "udp dport 53 ct zone set 2")
		b.add("raw", "istio-inbound", "udp sport 53 ct zone set 1")
		return
	}
	for _, s := range b.dns4 {
		b.add("raw", "istio-output-dns", "udp dport 53 ip daddr", s+"/32", "ct zone set 2")
		b.add("raw", "istio-inbound", "udp sport 53 ip saddr", s+"/32", "ct zone set 1")
	}
	for _, s := range b.dns6 {
		b.add6("raw", "istio-output-dns", "udp dport 53 ip6 daddr", s+"/128", "ct zone set 2")
		b.add6("raw", "istio-inbound", "udp sport 53 ip6 saddr", s+"/128", "ct zone set 1")
	}
}

// destinations writes outbound capture by destination: loopback and the
// excluded ranges return, the included ports and ranges redirect.
func (b *nftBuilder) destinations() {
	c := b.c
	b.add("nat", "istio-output", "ip daddr", nftLo4, "return")
	b.add6("nat", "istio-output", "ip6 daddr", nftLo6, "return")
	for _, p := range b.exc4 {
		b.add("nat", "istio-output", "ip daddr", p.String(), "return")
	}
	for _, p := range b.exc6 {
		b.add6("nat", "istio-output", "ip6 daddr", p.String(), "return")
	}
	for _, p := range c.IncludeOutPorts {
		b.add("nat", "istio-output", "tcp dport", p, "jump istio-redirect")
	}
	if b.incAll {
		b.add("nat", "istio-output", "jump istio-redirect")
		for _, vif := range c.VirtInterfaces {
			b.insert("nat", "prerouting", 0, "iifname", vif, "jump istio-redirect")
		}
		return
	}
	for _, p := range b.inc4 {
		for _, vif := range c.VirtInterfaces {
			b.insert("nat", "prerouting", 0, "iifname", vif, "ip daddr", p.String(), "jump istio-redirect")
		}
		b.add("nat", "istio-output", "ip daddr", p.String(), "jump istio-redirect")
	}
	for _, p := range b.inc6 {
		for _, vif := range c.VirtInterfaces {
			b.insert6("nat", "prerouting", 0, "iifname", vif, "ip6 daddr", p.String(), "jump istio-redirect")
		}
		b.add6("nat", "istio-output", "ip6 daddr", p.String(), "jump istio-redirect")
	}
}

// tproxyMarks writes TPROXY mode's mark rules, and its returns at the top
// of mangle's istio-inbound.
func (b *nftBuilder) tproxyMarks() {
	c, mark := b.c, b.mark
	b.add("mangle", "prerouting", "meta l4proto tcp mark", mark, "ct mark set mark")
	b.add("mangle", "output", "oifname lo meta l4proto tcp mark", mark, "return")
	for _, sel := range []struct {
		name string
		ids  []string
	}{{"skuid", c.ProxyUIDs}, {"skgid", c.ProxyGIDs}} {
		for _, id := range sel.ids {
			b.add("mangle", "output", "oifname lo meta l4proto tcp ip daddr !=", nftLo4, sel.name, id, "meta mark set", nftOutMark)
			b.add6("mangle", "output", "oifname lo meta l4proto tcp ip6 daddr !=", nftLo6, sel.name, id, "meta mark set", nftOutMark)
		}
	}
	b.add("mangle", "output", "meta l4proto tcp ct mark", mark, "meta mark set ct mark")
	b.insert("mangle", "istio-inbound", 0, "meta l4proto tcp mark", mark, "return")
	b.insert("mangle", "istio-inbound", 1, "iifname lo meta l4proto tcp ip saddr 127.0.0.6/32 return")
	b.insert6("mangle", "istio-inbound", 1, "iifname lo meta l4proto tcp ip6 saddr ::6/128 return")
	b.insert("mangle", "istio-inbound", 2, "iifname lo meta l4proto tcp mark !=", nftOutMark, "return")
}

// chains puts the rules into their chains in the order written: an insert
// at a position the chain already has goes before the rule there; past its
// end, it is appended. Only chains with rules are created: a jump to one
// without any makes nft refuse the whole transaction, and istio-iptables
// fails (it happens: DNS capture with only IPv6 DNS servers and IPv6 not
// enabled).
func (b *nftBuilder) chains() ([]nftChainRules, error) {
	type key struct{ table, chain string }
	chains := map[key][]string{}
	var order []key
	for _, r := range b.rules {
		k := key{r.table, r.chain}
		if _, seen := chains[k]; !seen {
			order = append(order, k)
		}
		cur := chains[k]
		if r.at >= 0 && r.at < len(cur) {
			cur = append(cur[:r.at], append([]string{r.text}, cur[r.at:]...)...)
		} else {
			cur = append(cur, r.text)
		}
		chains[k] = cur
	}
	for _, k := range order {
		for _, text := range chains[k] {
			f := strings.Fields(text)
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "jump" || f[i] == "goto" {
					if len(chains[key{k.table, f[i+1]}]) == 0 {
						return nil, &NftRefusal{Table: k.table, Chain: k.chain, Target: f[i+1]}
					}
				}
			}
		}
	}
	written := make([]nftChainRules, 0, len(order))
	for _, k := range order {
		written = append(written, nftChainRules{k.table, k.chain, chains[k]})
	}
	return written, nil
}
