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
	b := &nftBuilder{c: c, ipv6: c.ipv6Enabled(), tproxy: c.Mode == "TPROXY", mark: fmt.Sprintf("0x%x", atoiMark(c.TProxyMark))}
	if err := b.ranges(nameservers); err != nil {
		return nil, nil, err
	}
	b.inbound()
	b.output()
	b.dnsRules()
	b.destinations()
	if b.tproxy {
		b.tproxyMarks()
	}
	written, err := b.chains()
	if err != nil {
		return nil, nil, err
	}
	return nftViews(written)
}

// nftBuilder holds what ExpectedNftRules's steps share: the configuration,
// the rules so far, and the ranges and DNS servers by family.
type nftBuilder struct {
	c                      *CaptureConfig
	rules                  []nftRule
	ipv6, tproxy, dns      bool
	mark                   string
	inc4, inc6, exc4, exc6 []netip.Prefix
	incAll                 bool
	loopbackIncluded       bool
	dns4, dns6             []string
}

const (
	nftOutMark     = "0x53a"
	nftLo4, nftLo6 = "127.0.0.1/32", "::1/128"
)

func (b *nftBuilder) add(table, chain string, parts ...string) {
	b.rules = append(b.rules, nftRule{table, chain, strings.Join(parts, " "), -1})
}

func (b *nftBuilder) insert(table, chain string, at int, parts ...string) {
	b.rules = append(b.rules, nftRule{table, chain, strings.Join(parts, " "), at})
}

// add6 and insert6 write an IPv6 rule, only when IPv6 is enabled.
func (b *nftBuilder) add6(table, chain string, parts ...string) {
	if b.ipv6 {
		b.add(table, chain, parts...)
	}
}

func (b *nftBuilder) insert6(table, chain string, at int, parts ...string) {
	if b.ipv6 {
		b.insert(table, chain, at, parts...)
	}
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
