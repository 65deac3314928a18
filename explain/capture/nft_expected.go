package capture

import (
	"fmt"
	"net/netip"
	"strings"
)

// nftRule is one rule of Istio's native nftables mode as its generator
// spells it, before it is written: the table (nat, mangle, raw), the chain
// (nft's name) and, for a rule inserted rather than appended, its position.
type nftRule struct {
	table, chain, text string
	at                 int // -1: appended
}

// ExpectedNftRules derives the rules istio-iptables --native-nftables writes
// for c, with the pod's DNS servers, as the IPv4 and IPv6 views of its inet
// tables (a rule with IPv4 addresses belongs to the IPv4 view only, one with
// IPv6 addresses to the IPv6 view only, any other to both), table → rules in
// order. The mode differs from the iptables one in places: one inet table
// serves both families, so family-less rules apply to IPv6 whatever
// --dual-stack says; DNS capture is on or off for both families at once;
// the proxy's gid rules keep the tunnel-port match under DNS capture; the
// IPv6 variants of address rules are written only when IPv6 is enabled.
func ExpectedNftRules(c *CaptureConfig, nameservers []string) (v4, v6 map[string][]*Rule, err error) {
	var rules []nftRule
	add := func(table, chain string, parts ...string) {
		rules = append(rules, nftRule{table, chain, strings.Join(parts, " "), -1})
	}
	insert := func(table, chain string, at int, parts ...string) {
		rules = append(rules, nftRule{table, chain, strings.Join(parts, " "), at})
	}
	ipv6 := c.ipv6Enabled()
	add6 := func(table, chain string, parts ...string) {
		if ipv6 {
			add(table, chain, parts...)
		}
	}
	insert6 := func(table, chain string, at int, parts ...string) {
		if ipv6 {
			insert(table, chain, at, parts...)
		}
	}
	tproxy := c.Mode == "TPROXY"
	mark := fmt.Sprintf("0x%x", atoiMark(c.TProxyMark))
	const outMark = "0x53a"
	const lo4, lo6 = "127.0.0.1/32", "::1/128"

	// Include and exclude ranges, by family.
	var inc4, inc6, exc4, exc6 []netip.Prefix
	incAll := c.IncludeCIDRs == "*"
	loopbackIncluded := false
	if !incAll {
		for _, n := range list(c.IncludeCIDRs) {
			p, err := netip.ParsePrefix(n)
			if err != nil {
				return nil, nil, fmt.Errorf("include range %q: %v", n, err)
			}
			if p.Addr().IsLoopback() {
				loopbackIncluded = true
			}
			if p.Addr().Is4() {
				inc4 = append(inc4, p)
			} else {
				inc6 = append(inc6, p)
			}
		}
	}
	for _, n := range c.ExcludeCIDRs {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			return nil, nil, fmt.Errorf("exclude range %q: %v", n, err)
		}
		if p.Addr().Is4() {
			exc4 = append(exc4, p)
		} else {
			exc6 = append(exc6, p)
		}
	}
	var dns4, dns6 []string
	for _, ns := range nameservers {
		if a, err := netip.ParseAddr(ns); err == nil {
			a = a.WithZone("")
			if a.Is4() {
				dns4 = append(dns4, a.String())
			} else {
				dns6 = append(dns6, a.String())
			}
		}
	}
	// DNS capture is on for both families when all DNS is captured or the
	// pod has a DNS server of either family.
	dns := c.RedirectDNS && (c.CaptureAllDNS || len(dns4)+len(dns6) > 0)

	for _, nic := range c.ExcludeInterfaces {
		add("nat", "prerouting", "iifname", nic, "return")
		add("nat", "output", "oifname", nic, "return")
	}
	if tproxy {
		for _, nic := range c.ExcludeInterfaces {
			add("mangle", "prerouting", "iifname", nic, "return")
			add("mangle", "output", "oifname", nic, "return")
		}
	}
	for _, vif := range c.VirtInterfaces {
		insert("nat", "prerouting", 0, "iifname", vif, "return")
	}
	if c.DropInvalid {
		add("mangle", "prerouting", "meta l4proto tcp ct state invalid jump istio-drop")
		add("mangle", "istio-drop", "drop")
	}
	add("nat", "istio-inbound", "meta l4proto tcp tcp dport", c.TunnelPort, "return")
	add("nat", "istio-redirect", "meta l4proto tcp redirect to :"+c.ProxyPort)
	add("nat", "istio-in-redirect", "meta l4proto tcp redirect to :"+c.InboundPort)

	if c.InboundPorts != "" {
		if tproxy {
			add("mangle", "istio-divert", "meta mark set", mark)
			add("mangle", "istio-divert", "accept")
			add("mangle", "istio-tproxy", "meta l4proto tcp ip daddr !=", lo4, "tproxy ip to :"+c.InboundPort, "meta mark set", mark, "accept")
			add6("mangle", "istio-tproxy", "meta l4proto tcp ip6 daddr !=", lo6, "tproxy ip6 to :"+c.InboundPort, "meta mark set", mark, "accept")
			add("mangle", "prerouting", "meta l4proto tcp jump istio-inbound")
			if c.InboundPorts == "*" {
				for _, p := range c.InboundExclude {
					add("mangle", "istio-inbound", "meta l4proto tcp tcp dport", p, "return")
				}
				add("mangle", "istio-inbound", "meta l4proto tcp ct state related,established jump istio-divert")
				add("mangle", "istio-inbound", "meta l4proto tcp jump istio-tproxy")
			} else {
				for _, p := range list(c.InboundPorts) {
					add("mangle", "istio-inbound", "meta l4proto tcp ct state related,established tcp dport", p, "jump istio-divert")
					add("mangle", "istio-inbound", "meta l4proto tcp tcp dport", p, "jump istio-tproxy")
				}
			}
		} else {
			add("nat", "prerouting", "meta l4proto tcp jump istio-inbound")
			if c.InboundPorts == "*" {
				for _, p := range c.InboundExclude {
					add("nat", "istio-inbound", "meta l4proto tcp tcp dport", p, "return")
				}
				add("nat", "istio-inbound", "meta l4proto tcp jump istio-in-redirect")
			} else {
				for _, p := range list(c.InboundPorts) {
					add("nat", "istio-inbound", "meta l4proto tcp tcp dport", p, "jump istio-in-redirect")
				}
			}
		}
	}

	add("nat", "output", "jump istio-output")
	for _, p := range c.ExcludeOutPorts {
		add("nat", "istio-output", "tcp dport", p, "return")
		add("nat", "istio-output", "udp dport", p, "return")
	}
	add("nat", "istio-output", "oifname lo ip saddr 127.0.0.6/32 return")
	add6("nat", "istio-output", "oifname lo ip6 saddr ::6/128 return")
	owner := func(sel string, ids []string) {
		for _, id := range ids {
			// Under DNS capture the proxy's loopback DNS is spared by uid only.
			tunnel := c.TunnelPort
			if dns && sel == "skuid" {
				tunnel = "{ 53, " + c.TunnelPort + " }"
			}
			add("nat", "istio-output", "oifname lo meta l4proto tcp ip daddr !=", lo4, "tcp dport !=", tunnel, sel, id, "jump istio-in-redirect")
			add6("nat", "istio-output", "oifname lo meta l4proto tcp ip6 daddr !=", lo6, "tcp dport !=", tunnel, sel, id, "jump istio-in-redirect")
			if !loopbackIncluded {
				if dns {
					add("nat", "istio-output", "oifname lo meta l4proto tcp tcp dport != 53", sel, "!=", id, "return")
				} else {
					add("nat", "istio-output", "oifname lo", sel, "!=", id, "return")
				}
			}
			add("nat", "istio-output", sel, id, "return")
		}
	}
	owner("skuid", c.ProxyUIDs)
	owner("skgid", c.ProxyGIDs)

	if dns {
		add("raw", "output", "jump istio-output-dns")
		add("nat", "istio-output", "jump istio-output-dns")
		for _, proto := range []string{"tcp", "udp"} {
			if c.CaptureAllDNS {
				add("nat", "istio-output-dns", proto, "dport 53 redirect to :15053")
				continue
			}
			for _, s := range dns4 {
				add("nat", "istio-output-dns", "ip daddr", s+"/32", proto, "dport 53 redirect to :15053")
			}
			for _, s := range dns6 {
				add6("nat", "istio-output-dns", "ip6 daddr", s+"/128", proto, "dport 53 redirect to :15053")
			}
		}
		for _, u := range c.ProxyUIDs {
			add("raw", "istio-output-dns", "udp dport 53 meta skuid", u, "ct zone set 1")
			add("raw", "istio-output-dns", "udp sport 15053 meta skuid", u, "ct zone set 2")
		}
		for _, g := range c.ProxyGIDs {
			add("raw", "istio-output-dns", "udp dport 53 meta skgid", g, "ct zone set 1")
			add("raw", "istio-output-dns", "udp sport 15053 meta skgid", g, "ct zone set 2")
		}
		add("raw", "prerouting", "jump istio-inbound")
		if c.CaptureAllDNS {
			add("raw", "istio-output-dns", "udp dport 53 ct zone set 2")
			add("raw", "istio-inbound", "udp sport 53 ct zone set 1")
		} else {
			for _, s := range dns4 {
				add("raw", "istio-output-dns", "udp dport 53 ip daddr", s+"/32", "ct zone set 2")
				add("raw", "istio-inbound", "udp sport 53 ip saddr", s+"/32", "ct zone set 1")
			}
			for _, s := range dns6 {
				add6("raw", "istio-output-dns", "udp dport 53 ip6 daddr", s+"/128", "ct zone set 2")
				add6("raw", "istio-inbound", "udp sport 53 ip6 saddr", s+"/128", "ct zone set 1")
			}
		}
	}

	add("nat", "istio-output", "ip daddr", lo4, "return")
	add6("nat", "istio-output", "ip6 daddr", lo6, "return")
	for _, p := range exc4 {
		add("nat", "istio-output", "ip daddr", p.String(), "return")
	}
	for _, p := range exc6 {
		add6("nat", "istio-output", "ip6 daddr", p.String(), "return")
	}
	for _, p := range c.IncludeOutPorts {
		add("nat", "istio-output", "tcp dport", p, "jump istio-redirect")
	}
	if incAll {
		add("nat", "istio-output", "jump istio-redirect")
		for _, vif := range c.VirtInterfaces {
			insert("nat", "prerouting", 0, "iifname", vif, "jump istio-redirect")
		}
	} else {
		for _, p := range inc4 {
			for _, vif := range c.VirtInterfaces {
				insert("nat", "prerouting", 0, "iifname", vif, "ip daddr", p.String(), "jump istio-redirect")
			}
			add("nat", "istio-output", "ip daddr", p.String(), "jump istio-redirect")
		}
		for _, p := range inc6 {
			for _, vif := range c.VirtInterfaces {
				insert6("nat", "prerouting", 0, "iifname", vif, "ip6 daddr", p.String(), "jump istio-redirect")
			}
			add6("nat", "istio-output", "ip6 daddr", p.String(), "jump istio-redirect")
		}
	}

	if tproxy {
		add("mangle", "prerouting", "meta l4proto tcp mark", mark, "ct mark set mark")
		add("mangle", "output", "oifname lo meta l4proto tcp mark", mark, "return")
		for _, sel := range []struct {
			name string
			ids  []string
		}{{"skuid", c.ProxyUIDs}, {"skgid", c.ProxyGIDs}} {
			for _, id := range sel.ids {
				add("mangle", "output", "oifname lo meta l4proto tcp ip daddr !=", lo4, sel.name, id, "meta mark set", outMark)
				add6("mangle", "output", "oifname lo meta l4proto tcp ip6 daddr !=", lo6, sel.name, id, "meta mark set", outMark)
			}
		}
		add("mangle", "output", "meta l4proto tcp ct mark", mark, "meta mark set ct mark")
		insert("mangle", "istio-inbound", 0, "meta l4proto tcp mark", mark, "return")
		insert("mangle", "istio-inbound", 1, "iifname lo meta l4proto tcp ip saddr 127.0.0.6/32 return")
		insert6("mangle", "istio-inbound", 1, "iifname lo meta l4proto tcp ip6 saddr ::6/128 return")
		insert("mangle", "istio-inbound", 2, "iifname lo meta l4proto tcp mark !=", outMark, "return")
	}

	// Written in that order, per chain: an insert at a position the chain
	// already has goes before the rule there; past its end, it is appended.
	type key struct{ table, chain string }
	chains := map[key][]string{}
	var order []key
	for _, r := range rules {
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
	// Only chains with rules are created: a jump to one without any makes nft
	// refuse the whole transaction, and istio-iptables fails (it happens: DNS
	// capture with only IPv6 DNS servers and IPv6 not enabled).
	for _, k := range order {
		for _, text := range chains[k] {
			f := strings.Fields(text)
			for i := 0; i+1 < len(f); i++ {
				if f[i] == "jump" || f[i] == "goto" {
					if len(chains[key{k.table, f[i+1]}]) == 0 {
						return nil, nil, &NftRefusal{Table: k.table, Chain: k.chain, Target: f[i+1]}
					}
				}
			}
		}
	}
	written := make([]nftChainRules, 0, len(order))
	for _, k := range order {
		written = append(written, nftChainRules{k.table, k.chain, chains[k]})
	}
	return nftViews(written)
}

// nftChainRules are the rules of one chain of an inet table, in order, as
// nft prints them.
type nftChainRules struct {
	table, chain string
	rules        []string
}

// nftViews parses the rules of inet tables into their IPv4 and IPv6 views
// (a rule with IPv4 addresses belongs to the IPv4 view only, one with IPv6
// addresses to the IPv6 view only, any other to both), table → rules.
func nftViews(chains []nftChainRules) (v4, v6 map[string][]*Rule, err error) {
	v4, v6 = map[string][]*Rule{}, map[string][]*Rule{}
	for _, c := range chains {
		for _, text := range c.rules {
			r, family, err := parseNftRule(text)
			if err != nil {
				return nil, nil, fmt.Errorf("internal: expected nft rule %q: %v", text, err)
			}
			r.Table, r.Chain = c.table, nftBaseChain(c.chain)
			if family != "ipv6" {
				cp := *r
				v4[c.table] = append(v4[c.table], &cp)
			}
			if family != "ipv4" {
				cp := *r
				v6[c.table] = append(v6[c.table], &cp)
			}
		}
	}
	return v4, v6, nil
}

// NftRefusal is a rule set nft refuses to load, so that istio-iptables
// --native-nftables fails (and istio-init with it): a rule jumps to a chain
// that gets no rules and so is never created.
type NftRefusal struct {
	Table, Chain, Target string
}

func (e *NftRefusal) Error() string {
	return fmt.Sprintf("istio-iptables --native-nftables fails: inet istio-proxy-%s chain %s jumps to %s, which gets no rules and is not created, so nft refuses the rules", e.Table, e.Chain, e.Target)
}

// nftBaseChain names a chain as the parsed listing does: base chains by their
// hook (Istio names them after it), others in iptables' spelling.
func nftBaseChain(name string) string {
	switch name {
	case "prerouting", "output", "input", "postrouting", "forward":
		return strings.ToUpper(name)
	}
	return nftChainName(name)
}
