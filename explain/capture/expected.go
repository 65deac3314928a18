package capture

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CaptureConfig is what istio-iptables is told to do: its flags, as the
// injected istio-init (or istio-validation, or the CNI plugin from the
// pod's annotations) passes them.
type CaptureConfig struct {
	ProxyPort, InboundPort, TunnelPort string
	ProxyUIDs, ProxyGIDs               []string
	Mode                               string
	InboundPorts                       string // "*", a list, or ""
	InboundExclude                     []string
	ExcludeInterfaces                  []string
	IncludeCIDRs                       string // "*", a list, or ""
	ExcludeCIDRs                       []string
	IncludeOutPorts, ExcludeOutPorts   []string
	VirtInterfaces                     []string
	TProxyMark                         string
	RedirectDNS, CaptureAllDNS         bool
	DropInvalid                        bool
	DualStack                          bool
	// NativeNftables: the rules are written as Istio's own nftables tables
	// (--native-nftables), not through the iptables tools.
	NativeNftables bool
	// Model is the Istio release whose istio-iptables writes the rules
	// (its rule shape); the zero value is the newest.
	Model RuleModel
	// PodAddrs are the pod's own addresses, when known: not a flag but a
	// fact about the pod, set by whoever knows them. istio-iptables decides
	// from them whether to write IPv6 rules at all (see ipv6Enabled).
	PodAddrs []netip.Addr
}

// ipv6Enabled says whether istio-iptables writes IPv6 rules: it looks at the
// pod's usable addresses (not loopback, not link-local): with --dual-stack,
// when there is an IPv6 one; without, when there is no IPv4 one (its first
// address, IPv4 being listed first, is then IPv6). With the addresses
// unknown, the pod is taken to have an IPv4 address and an IPv6 one.
func (c *CaptureConfig) ipv6Enabled() bool {
	if len(c.PodAddrs) == 0 {
		return c.DualStack
	}
	v4, v6 := false, false
	for _, a := range c.PodAddrs {
		a = a.Unmap()
		if !a.IsValid() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() {
			continue
		}
		if a.Is4() {
			v4 = true
		} else {
			v6 = true
		}
	}
	return v6 && (c.DualStack || !v4)
}

// SplitShell splits a shell-quoted argument string ('-x ""', "-i '*'").
func SplitShell(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	have := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(s) && strings.IndexByte(`"\$`+"`", s[i+1]) >= 0:
				i++
				cur.WriteByte(s[i])
			default:
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, have = c, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			have = true
		case c == ' ' || c == '\t' || c == '\n':
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote", quote)
	}
	if have {
		out = append(out, cur.String())
	}
	return out, nil
}

func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// SplitEnv takes the leading NAME=VALUE words off an argument list, as a
// shell does before a command ("ISTIO_META_DNS_CAPTURE=true -p 15001 …"):
// istio-init's environment, which istio-iptables reads too.
func SplitEnv(args []string) (env map[string]string, rest []string) {
	env = map[string]string{}
	for len(args) > 0 {
		name, value, ok := strings.Cut(args[0], "=")
		if !ok || name == "" || strings.HasPrefix(name, "-") || strings.ToUpper(name) != name || strings.ContainsAny(name, " .:/") {
			break
		}
		env[name], args = value, args[1:]
	}
	return env, args
}

// ParseCaptureArgs reads istio-iptables arguments (the leading
// "istio-iptables" word, as in a pod spec, is allowed). env holds the
// container's environment (ISTIO_META_DNS_CAPTURE, INVALID_DROP, …).
func ParseCaptureArgs(args []string, env map[string]string) (*CaptureConfig, error) {
	if len(args) > 0 && (args[0] == "istio-iptables" || strings.HasSuffix(args[0], "/istio-iptables")) {
		args = args[1:]
	}
	fs := pflag.NewFlagSet("istio-iptables", pflag.ContinueOnError)
	fs.SetOutput(discard{})
	c := &CaptureConfig{}
	var uids, gids, inExcl, exIf, exCIDR, inOut, exOut, virt string
	truthy := func(k string) bool { b, _ := strconv.ParseBool(env[k]); return b }
	fs.StringVarP(&c.ProxyPort, "envoy-port", "p", "15001", "")
	fs.StringVarP(&c.InboundPort, "inbound-capture-port", "z", "15006", "")
	fs.StringVarP(&c.TunnelPort, "inbound-tunnel-port", "e", "15008", "")
	defUID := istio.ProxyUID
	if v := env["ENVOY_USER"]; v != "" {
		defUID = v
	}
	fs.StringVarP(&uids, "proxy-uid", "u", defUID, "")
	fs.StringVarP(&gids, "proxy-gid", "g", "", "")
	fs.StringVarP(&c.Mode, "istio-inbound-interception-mode", "m", "REDIRECT", "")
	fs.StringVarP(&c.InboundPorts, "istio-inbound-ports", "b", "", "")
	fs.StringVarP(&inExcl, "istio-local-exclude-ports", "d", "", "")
	fs.StringVarP(&exIf, "istio-exclude-interfaces", "c", "", "")
	fs.StringVarP(&c.IncludeCIDRs, "istio-service-cidr", "i", "", "")
	fs.StringVarP(&exCIDR, "istio-service-exclude-cidr", "x", "", "")
	fs.StringVarP(&inOut, "istio-outbound-ports", "q", "", "")
	fs.StringVarP(&exOut, "istio-local-outbound-ports-exclude", "o", "", "")
	fs.StringVarP(&virt, "kube-virt-interfaces", "k", "", "")
	fs.StringVarP(&c.TProxyMark, "istio-inbound-tproxy-mark", "t", "1337", "") // istio-iptables' default mark (the same number as the uid, not the uid)
	fs.StringP("istio-inbound-tproxy-route-table", "r", "133", "")
	fs.String("iptables-probe-port", "15002", "")
	fs.String("probe-timeout", "5s", "")
	fs.BoolVar(&c.RedirectDNS, "redirect-dns", truthy("ISTIO_META_DNS_CAPTURE"), "")
	fs.BoolVar(&c.CaptureAllDNS, "capture-all-dns", false, "")
	fs.BoolVar(&c.DropInvalid, "drop-invalid", truthy("INVALID_DROP"), "")
	fs.BoolVar(&c.DualStack, "dual-stack", truthy("ISTIO_DUAL_STACK"), "")
	fs.BoolVar(&c.NativeNftables, "native-nftables", false, "")
	for _, b := range []string{"run-validation", "skip-rule-apply", "force-apply", "cni-mode", "reconcile", "cleanup-only"} {
		fs.Bool(b, false, "")
	}
	fs.BoolP("dry-run", "n", false, "")
	fs.Bool("log_as_json", false, "") // pilot-agent's: a boolean
	fs.String("vklog", "", "")
	for _, s := range []string{"log_output_level", "force-iptables-binary", "network-namespace", "log_caller", "log_stacktrace_level", "log_target"} {
		fs.String(s, "", "")
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("istio-iptables arguments: %w", err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("istio-iptables arguments: unexpected %q", fs.Arg(0))
	}
	c.ProxyUIDs, c.ProxyGIDs = list(uids), list(gids)
	if len(c.ProxyGIDs) == 0 {
		c.ProxyGIDs = c.ProxyUIDs
	}
	c.InboundExclude, c.ExcludeInterfaces, c.ExcludeCIDRs = list(inExcl), list(exIf), list(exCIDR)
	c.IncludeOutPorts, c.ExcludeOutPorts, c.VirtInterfaces = list(inOut), list(exOut), list(virt)
	if c.Mode != "REDIRECT" && c.Mode != "TPROXY" {
		return nil, fmt.Errorf("istio-iptables arguments: interception mode %q: want REDIRECT or TPROXY", c.Mode)
	}
	for _, p := range []string{c.ProxyPort, c.InboundPort, c.TunnelPort} {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("istio-iptables arguments: bad port %q", p)
		}
	}
	// Port lists may hold ranges (8000:8010), written as they are.
	for _, p := range append(append(append([]string{}, c.InboundExclude...), c.IncludeOutPorts...), c.ExcludeOutPorts...) {
		if _, err := parsePorts(p); err != nil || strings.Count(p, ",") > 0 {
			return nil, fmt.Errorf("istio-iptables arguments: bad port %q", p)
		}
	}
	for _, n := range append(list(strings.ReplaceAll(c.IncludeCIDRs, "*", "")), c.ExcludeCIDRs...) {
		if _, err := netip.ParsePrefix(n); err != nil {
			return nil, fmt.Errorf("istio-iptables arguments: bad CIDR %q", n)
		}
	}
	return c, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// ExpectedRules derives the rules istio-iptables writes for c, for one IP
// family, with the pod's DNS servers of that family. Rules come as
// iptables-save would print them, table by table in order.
//
// istio-iptables writes IPv6 rules only when ipv6Enabled; otherwise the IPv6
// expectation is empty.
func ExpectedRules(c *CaptureConfig, v6 bool, nameservers []string) map[string][]string {
	if v6 && !c.ipv6Enabled() {
		return map[string][]string{}
	}
	b := &ruleBuilder{c: c, v6: v6, lo: "127.0.0.1/32", pass: "127.0.0.6/32", host: "/32", out: map[string][]string{}}
	if v6 {
		b.lo, b.pass, b.host = "::1/128", "::6/128", "/128"
	}
	b.inbound()
	b.outputStart()
	b.dnsServers(nameservers)
	b.owners()
	appendUDP := b.dnsRules()
	b.outputDestinations()
	if appendUDP != nil {
		appendUDP()
	}
	return b.out
}

// ruleBuilder holds what ExpectedRules's steps share: the configuration,
// the family, its loopback and passthrough addresses, and the rules so far.
type ruleBuilder struct {
	c              *CaptureConfig
	v6             bool
	lo, pass, host string
	out            map[string][]string
	servers        []string // the DNS servers of this family ("" under --capture-all-dns: any)
	dns, familyDNS bool     // DNS capture on; and for this family
}

func (b *ruleBuilder) add(table, rule string) { b.out[table] = append(b.out[table], rule) }
func (b *ruleBuilder) insert(table, rule string) {
	b.out[table] = append([]string{rule}, b.out[table]...)
}

// dstOf and srcOf match one DNS server ("" under --capture-all-dns: any).
func (b *ruleBuilder) dstOf(ns string) string {
	if ns == "" {
		return ""
	}
	return " -d " + ns + b.host
}

func (b *ruleBuilder) srcOf(ns string) string {
	if ns == "" {
		return ""
	}
	return " -s " + ns + b.host
}

func atoiMark(s string) uint64 {
	n, _ := strconv.ParseUint(s, 0, 32)
	return n
}

// Drift is the difference between the rules a pod should have and those it has.
type Drift struct {
	Missing []string `json:"missing"`
	Extra   []string `json:"extra"`
	// Reordered lists chains whose rules agree but not their order.
	Reordered []string `json:"reordered,omitempty"`
}

// ruleKey is a rule's meaning, independent of how the dialect spells it.
func ruleKey(table string, r *Rule) string {
	m := r.Match
	var atoms []string
	add := func(neg bool, k, v string) {
		if v == "" {
			return
		}
		if neg {
			k = "!" + k
		}
		atoms = append(atoms, k+"="+v)
	}
	if m.Proto != "all" {
		add(m.NotProto, "p", strings.ToLower(m.Proto))
	}
	if m.Src != nil && (m.Src.Bits() != 0 || m.NotSrc) {
		add(m.NotSrc, "s", m.Src.Masked().String())
	}
	// A /0 address matches every packet: iptables-save prints none.
	if m.Dst != nil && (m.Dst.Bits() != 0 || m.NotDst) {
		add(m.NotDst, "d", m.Dst.Masked().String())
	}
	add(m.NotIn, "i", m.In)
	add(m.NotOut, "o", m.Out)
	ports := func(rs []portRange) string {
		var s []string
		for _, r := range rs {
			s = append(s, r.String())
		}
		return strings.Join(s, ",")
	}
	add(m.NotDPort, "dport", ports(m.DPorts))
	add(m.NotSPrt, "sport", ports(m.SPorts))
	add(m.NotUID, "uid", m.UID)
	add(m.NotGID, "gid", m.GID)
	markNorm := func(s string) string {
		if s == "" {
			return ""
		}
		v, mk := parseMark(s)
		return fmt.Sprintf("0x%x/0x%x", v, mk)
	}
	add(m.NotMark, "mark", markNorm(m.Mark))
	add(m.NotConnMark, "connmark", markNorm(m.ConnMark))
	states := append([]string(nil), m.CTState...)
	sort.Strings(states) // nft lists related,established as established,related
	add(m.NotCTState, "ctstate", strings.Join(states, ","))
	add(false, "comment", m.Comment)
	atoms = append(atoms, m.Unknown...)
	sort.Strings(atoms)
	target := r.Target
	switch r.Target {
	case "REDIRECT":
		target += " " + r.TargetArg("--to-ports")
	case "TPROXY":
		target += " " + r.TargetArg("--on-port") + " " + markNorm(r.TargetArg("--tproxy-mark"))
	case "MARK":
		if v := r.TargetArg("--set-xmark"); v != "" {
			target += " " + markNorm(v)
		} else {
			target += " " + markNorm(r.TargetArg("--set-mark")+"/0xffffffff")
		}
	case "CONNMARK":
		switch {
		case strings.Contains(strings.Join(r.TargetArgs, " "), "--save-mark"):
			target += " save"
		case r.TargetArg("--set-xmark") != "":
			target += " set " + markNorm(r.TargetArg("--set-xmark"))
		default:
			target += " restore"
		}
	case "CT":
		target += " zone " + r.TargetArg("--zone")
	}
	return table + " " + r.Chain + " " + strings.Join(atoms, " ") + " -> " + target
}

// CompareRules reports the rules of want (table → rules as iptables-save
// prints them) that rs lacks, and the rules of rs's tables nat, mangle and
// raw that want does not have. Counters are left out.
func CompareRules(rs *Ruleset, want map[string][]string) (*Drift, error) {
	wantBy := map[string][]keyedRule{}
	for table, rules := range want {
		wantBy[table] = wantBy[table][:0:0]
		for _, text := range rules {
			toks, err := tokenize(text)
			if err != nil || len(toks) < 2 {
				return nil, fmt.Errorf("internal: expected rule %q: %v", text, err)
			}
			r := &Rule{Chain: toks[1], Spec: text}
			if err := parseRuleArgs(r, toks[2:]); err != nil {
				return nil, fmt.Errorf("internal: expected rule %q: %v", text, err)
			}
			wantBy[table] = append(wantBy[table], keyedRule{ruleKey(table, r), text, r.Chain})
		}
	}
	return compareKeyed(rs, wantBy), nil
}

// CompareNftRules is CompareRules for Istio's native nftables tables: want
// holds the parsed rules of one family's view (ExpectedNftRules), compared by
// meaning with rs's tables nat, mangle and raw.
func CompareNftRules(rs *Ruleset, want map[string][]*Rule) *Drift {
	wantBy := map[string][]keyedRule{}
	for table, rules := range want {
		for _, r := range rules {
			wantBy[table] = append(wantBy[table], keyedRule{ruleKey(table, r), nftDriftText(table, r), r.Chain})
		}
	}
	return compareKeyed(rs, wantBy)
}

// nftDriftText names where a native rule lives, as nft's text does not.
func nftDriftText(table string, r *Rule) string {
	return table + "/" + r.Chain + ": " + r.Spec
}

// keyedRule is a rule's meaning (ruleKey), its text and chain.
type keyedRule struct {
	key, text string
	chain     string
}

func compareKeyed(rs *Ruleset, wantBy map[string][]keyedRule) *Drift {
	type keyed = keyedRule
	d := &Drift{Missing: []string{}, Extra: []string{}}
	tables := map[string]bool{"nat": true, "mangle": true, "raw": true}
	for table := range wantBy {
		tables[table] = true
	}
	names := make([]string, 0, len(tables))
	for t := range tables {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, table := range names {
		var have []keyed
		if t := rs.Table(table); t != nil {
			for _, c := range t.Chains {
				for _, r := range c.Rules {
					text := r.Spec
					if rs.Backend == BackendNative {
						text = nftDriftText(table, r)
					}
					have = append(have, keyed{ruleKey(table, r), text, r.Chain})
				}
			}
		}
		count := map[string]int{}
		for _, h := range have {
			count[h.key]++
		}
		for _, w := range wantBy[table] {
			if count[w.key] > 0 {
				count[w.key]--
			} else {
				d.Missing = append(d.Missing, w.text)
			}
		}
		wantCount := map[string]int{}
		for _, w := range wantBy[table] {
			wantCount[w.key]++
		}
		for _, h := range have {
			if wantCount[h.key] > 0 {
				wantCount[h.key]--
			} else {
				d.Extra = append(d.Extra, h.text)
			}
		}
		// Same rules, other order?
		chainSeq := func(ks []keyed) map[string][]string {
			out := map[string][]string{}
			for _, k := range ks {
				out[k.chain] = append(out[k.chain], k.key)
			}
			return out
		}
		hs, ws := chainSeq(have), chainSeq(wantBy[table])
		for chain, seq := range ws {
			got := hs[chain]
			if len(got) == len(seq) && strings.Join(got, "\n") != strings.Join(seq, "\n") && sameMultiset(got, seq) {
				d.Reordered = append(d.Reordered, table+"/"+chain)
			}
		}
	}
	sort.Strings(d.Reordered)
	return d
}

func sameMultiset(a, b []string) bool {
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}
