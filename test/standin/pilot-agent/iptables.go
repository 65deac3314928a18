package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// captureConfig mirrors the flags of Istio's istio-iptables that the
// injection template passes. Only IPv4 rules are written: the local test
// cluster is single-stack IPv4.
type captureConfig struct {
	proxyPort          string // -p
	inboundCapturePort string // -z
	inboundTunnelPort  string // -e
	proxyUID           string // -u
	proxyGID           string // -g
	mode               string // -m
	inboundPorts       string // -b
	localExcludePorts  string // -d
	excludeInterfaces  string // -c
	includeCIDRs       string // -i
	excludeCIDRs       string // -x
	includeOutPorts    string // -q
	excludeOutPorts    string // -o
	virtInterfaces     string // -k
	tproxyMark         string // -t
	tproxyTable        string // -r
	probePort          string
	redirectDNS        bool
	captureAllDNS      bool
	dropInvalid        bool
	runValidation      bool
	skipRuleApply      bool
	dryRun             bool
	forceBinary        string
	dualStack          bool
}

func parseCaptureFlags(args []string) (*captureConfig, error) {
	c := &captureConfig{}
	fs := pflag.NewFlagSet("istio-iptables", pflag.ContinueOnError)
	fs.StringVarP(&c.proxyPort, "envoy-port", "p", "15001", "outbound capture port")
	fs.StringVarP(&c.inboundCapturePort, "inbound-capture-port", "z", "15006", "inbound capture port")
	fs.StringVarP(&c.inboundTunnelPort, "inbound-tunnel-port", "e", "15008", "HBONE tunnel port, never captured")
	fs.StringVarP(&c.proxyUID, "proxy-uid", "u", envOr("ENVOY_USER", "1337"), "proxy uids (comma list)")
	fs.StringVarP(&c.proxyGID, "proxy-gid", "g", "", "proxy gids (comma list, default: the uids)")
	fs.StringVarP(&c.mode, "istio-inbound-interception-mode", "m", "REDIRECT", "REDIRECT or TPROXY")
	fs.StringVarP(&c.inboundPorts, "istio-inbound-ports", "b", "", "inbound ports to capture, * for all")
	fs.StringVarP(&c.localExcludePorts, "istio-local-exclude-ports", "d", "", "inbound ports not captured (with -b *)")
	fs.StringVarP(&c.excludeInterfaces, "istio-exclude-interfaces", "c", "", "interfaces not captured")
	fs.StringVarP(&c.includeCIDRs, "istio-service-cidr", "i", "", "outbound CIDRs to capture, * for all")
	fs.StringVarP(&c.excludeCIDRs, "istio-service-exclude-cidr", "x", "", "outbound CIDRs not captured")
	fs.StringVarP(&c.includeOutPorts, "istio-outbound-ports", "q", "", "outbound ports always captured")
	fs.StringVarP(&c.excludeOutPorts, "istio-local-outbound-ports-exclude", "o", "", "outbound ports not captured")
	fs.StringVarP(&c.virtInterfaces, "kube-virt-interfaces", "k", "", "virtual interfaces whose traffic is outbound")
	fs.StringVarP(&c.tproxyMark, "istio-inbound-tproxy-mark", "t", "1337", "TPROXY mark")
	fs.StringVarP(&c.tproxyTable, "istio-inbound-tproxy-route-table", "r", "133", "TPROXY route table")
	fs.StringVar(&c.probePort, "iptables-probe-port", "15002", "validation probe port")
	fs.BoolVar(&c.redirectDNS, "redirect-dns", envBool("ISTIO_META_DNS_CAPTURE"), "capture DNS to 15053")
	fs.BoolVar(&c.captureAllDNS, "capture-all-dns", false, "capture DNS to every server")
	fs.BoolVar(&c.dropInvalid, "drop-invalid", envBool("INVALID_DROP"), "drop conntrack-invalid packets")
	fs.BoolVar(&c.runValidation, "run-validation", false, "check that the redirect works")
	fs.BoolVar(&c.skipRuleApply, "skip-rule-apply", false, "do not write rules")
	fs.BoolVarP(&c.dryRun, "dry-run", "n", false, "print the rules, change nothing")
	fs.StringVar(&c.forceBinary, "force-iptables-binary", "", "legacy or nft")
	// Accepted and ignored, as the injection template passes them.
	fs.String("log_output_level", "", "")
	fs.Bool("force-apply", false, "")
	fs.BoolVar(&c.dualStack, "dual-stack", envBool("ISTIO_DUAL_STACK"), "also write the IPv6 rules")
	fs.Bool("native-nftables", false, "")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if c.proxyGID == "" {
		c.proxyGID = c.proxyUID
	}
	return c, c.validate()
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envBool(k string) bool { b, _ := strconv.ParseBool(os.Getenv(k)); return b }

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func (c *captureConfig) validate() error {
	var errs []error
	for _, p := range []string{c.proxyPort, c.inboundCapturePort, c.inboundTunnelPort, c.probePort} {
		errs = append(errs, checkPort(p))
	}
	for _, list := range []string{c.localExcludePorts, c.includeOutPorts, c.excludeOutPorts} {
		for _, p := range splitList(list) {
			errs = append(errs, checkPort(p))
		}
	}
	if c.inboundPorts != "*" {
		for _, p := range splitList(c.inboundPorts) {
			errs = append(errs, checkPort(p))
		}
	}
	if c.includeCIDRs != "*" {
		for _, n := range splitList(c.includeCIDRs) {
			errs = append(errs, checkCIDR(n))
		}
	}
	for _, n := range splitList(c.excludeCIDRs) {
		if n == "*" {
			errs = append(errs, errors.New("exclude CIDR '*' is not supported"))
			continue
		}
		errs = append(errs, checkCIDR(n))
	}
	for _, u := range append(splitList(c.proxyUID), splitList(c.proxyGID)...) {
		if _, err := strconv.ParseUint(u, 10, 32); err != nil {
			errs = append(errs, fmt.Errorf("invalid uid/gid %q", u))
		}
	}
	if c.mode != "REDIRECT" && c.mode != "TPROXY" {
		errs = append(errs, fmt.Errorf("invalid interception mode %q: want REDIRECT or TPROXY", c.mode))
	}
	return errors.Join(errs...)
}

func checkPort(p string) error {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("invalid port %q", p)
	}
	return nil
}

func checkCIDR(s string) error {
	if _, err := netip.ParsePrefix(s); err != nil {
		return fmt.Errorf("failed parsing CIDR %q: %v", s, err)
	}
	return nil
}

// ruleSet collects iptables-restore input, table by table, chain order kept.
type ruleSet struct {
	tables map[string]*tableRules
	order  []string
}

type tableRules struct {
	chains []string // custom chains, in creation order
	rules  []string // "-A CHAIN …" / "-I CHAIN 1 …" lines, in order
}

func newRuleSet() *ruleSet { return &ruleSet{tables: map[string]*tableRules{}} }

func (r *ruleSet) table(name string) *tableRules {
	t, ok := r.tables[name]
	if !ok {
		t = &tableRules{}
		r.tables[name] = t
		r.order = append(r.order, name)
	}
	return t
}

var builtinChains = map[string]bool{"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true}

func (r *ruleSet) chain(table, chain string) {
	t := r.table(table)
	if builtinChains[chain] {
		return
	}
	for _, c := range t.chains {
		if c == chain {
			return
		}
	}
	t.chains = append(t.chains, chain)
}

// add appends a rule to table/chain; target chains are created on the way.
func (r *ruleSet) add(table, chain string, spec ...string) {
	r.chain(table, chain)
	r.refChain(table, spec)
	r.table(table).rules = append(r.table(table).rules, "-A "+chain+" "+strings.Join(spec, " "))
}

// insert puts a rule at position 1 of table/chain.
func (r *ruleSet) insert(table, chain string, spec ...string) {
	r.chain(table, chain)
	r.refChain(table, spec)
	r.table(table).rules = append(r.table(table).rules, "-I "+chain+" 1 "+strings.Join(spec, " "))
}

func (r *ruleSet) refChain(table string, spec []string) {
	for i := 0; i+1 < len(spec); i++ {
		if spec[i] == "-j" && strings.HasPrefix(spec[i+1], "ISTIO_") {
			r.chain(table, spec[i+1])
		}
	}
}

// restoreInput renders the rules as iptables-restore input.
func (r *ruleSet) restoreInput() string {
	var b strings.Builder
	for _, name := range r.order {
		t := r.tables[name]
		fmt.Fprintf(&b, "* %s\n", name)
		for _, c := range t.chains {
			fmt.Fprintf(&b, "-N %s\n", c)
		}
		for _, rule := range t.rules {
			b.WriteString(rule + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// buildRules derives the rules Istio's istio-iptables writes for c, for IPv4
// or IPv6, in the same order. nameservers are the pod's DNS servers of that
// family (for DNS capture).
func buildRules(c *captureConfig, nameservers []string, v6 bool) *ruleSet {
	lo, pass, onIP, host := "127.0.0.1/32", "127.0.0.6/32", "0.0.0.0", "/32"
	if v6 {
		lo, pass, onIP, host = "::1/128", "::6/128", "::", "/128"
	}
	family := func(cidr string) bool {
		p, err := netip.ParsePrefix(cidr)
		return err == nil && p.Addr().Is6() == v6
	}
	r := newRuleSet()
	tproxy := c.mode == "TPROXY"
	inTable := "nat"
	if tproxy {
		inTable = "mangle"
	}
	r.table("nat")
	for _, nic := range splitList(c.excludeInterfaces) {
		r.add("nat", "PREROUTING", "-i", nic, "-j", "RETURN")
		r.add("nat", "OUTPUT", "-o", nic, "-j", "RETURN")
		if tproxy {
			r.add("mangle", "PREROUTING", "-i", nic, "-j", "RETURN")
			r.add("mangle", "OUTPUT", "-o", nic, "-j", "RETURN")
		}
	}
	for _, vif := range splitList(c.virtInterfaces) {
		r.insert("nat", "PREROUTING", "-i", vif, "-j", "RETURN")
	}
	if c.dropInvalid {
		r.add("mangle", "PREROUTING", "-m", "conntrack", "--ctstate", "INVALID", "-j", "ISTIO_DROP")
		r.add("mangle", "ISTIO_DROP", "-j", "DROP")
	}
	r.add(inTable, "ISTIO_INBOUND", "-p", "tcp", "--dport", c.inboundTunnelPort, "-j", "RETURN")
	r.add("nat", "ISTIO_REDIRECT", "-p", "tcp", "-j", "REDIRECT", "--to-ports", c.proxyPort)
	r.add("nat", "ISTIO_IN_REDIRECT", "-p", "tcp", "-j", "REDIRECT", "--to-ports", c.inboundCapturePort)

	if c.inboundPorts != "" {
		r.add(inTable, "PREROUTING", "-p", "tcp", "-j", "ISTIO_INBOUND")
		if tproxy {
			r.add("mangle", "ISTIO_DIVERT", "-j", "MARK", "--set-mark", c.tproxyMark)
			r.add("mangle", "ISTIO_DIVERT", "-j", "ACCEPT")
			r.add("mangle", "ISTIO_TPROXY", "!", "-d", lo, "-p", "tcp", "-j", "TPROXY",
				"--tproxy-mark", c.tproxyMark+"/0xffffffff", "--on-port", c.inboundCapturePort, "--on-ip", onIP)
		}
		capture := func(port ...string) {
			if tproxy {
				r.add("mangle", "ISTIO_INBOUND", append(append([]string{"-p", "tcp"}, port...), "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ISTIO_DIVERT")...)
				r.add("mangle", "ISTIO_INBOUND", append(append([]string{"-p", "tcp"}, port...), "-j", "ISTIO_TPROXY")...)
				return
			}
			r.add("nat", "ISTIO_INBOUND", append(append([]string{"-p", "tcp"}, port...), "-j", "ISTIO_IN_REDIRECT")...)
		}
		if c.inboundPorts == "*" {
			for _, p := range splitList(c.localExcludePorts) {
				r.add(inTable, "ISTIO_INBOUND", "-p", "tcp", "--dport", p, "-j", "RETURN")
			}
			capture()
		} else {
			for _, p := range splitList(c.inboundPorts) {
				capture("--dport", p)
			}
		}
	}
	if tproxy {
		r.add("mangle", "PREROUTING", "-p", "tcp", "-m", "mark", "--mark", c.tproxyMark, "-j", "CONNMARK", "--save-mark")
		r.add("mangle", "OUTPUT", "-p", "tcp", "-o", "lo", "-m", "mark", "--mark", c.tproxyMark, "-j", "RETURN")
		for _, u := range splitList(c.proxyUID) {
			r.add("mangle", "OUTPUT", "!", "-d", lo, "-p", "tcp", "-o", "lo", "-m", "owner", "--uid-owner", u, "-j", "MARK", "--set-mark", "1338")
		}
		for _, g := range splitList(c.proxyGID) {
			r.add("mangle", "OUTPUT", "!", "-d", lo, "-p", "tcp", "-o", "lo", "-m", "owner", "--gid-owner", g, "-j", "MARK", "--set-mark", "1338")
		}
		r.add("mangle", "OUTPUT", "-p", "tcp", "-m", "connmark", "--mark", c.tproxyMark, "-j", "CONNMARK", "--restore-mark")
		r.insert("mangle", "ISTIO_INBOUND", "-p", "tcp", "-i", "lo", "-m", "mark", "!", "--mark", "1338", "-j", "RETURN")
		r.insert("mangle", "ISTIO_INBOUND", "-p", "tcp", "-s", pass, "-i", "lo", "-j", "RETURN")
		r.insert("mangle", "ISTIO_INBOUND", "-p", "tcp", "-m", "mark", "--mark", c.tproxyMark, "-j", "RETURN")
	}

	r.add("nat", "OUTPUT", "-j", "ISTIO_OUTPUT")
	for _, p := range splitList(c.excludeOutPorts) {
		r.add("nat", "ISTIO_OUTPUT", "-p", "tcp", "--dport", p, "-j", "RETURN")
		r.add("nat", "ISTIO_OUTPUT", "-p", "udp", "--dport", p, "-j", "RETURN")
	}
	r.add("nat", "ISTIO_OUTPUT", "-o", "lo", "-s", pass, "-j", "RETURN")

	dns := c.redirectDNS && (c.captureAllDNS || len(nameservers) > 0)
	loopbackIncluded := false
	for _, n := range splitList(c.includeCIDRs) {
		if p, err := netip.ParsePrefix(n); err == nil && p.Addr().IsLoopback() {
			loopbackIncluded = true
		}
	}
	owner := func(flag string, ids []string) {
		for _, id := range ids {
			if dns {
				r.add("nat", "ISTIO_OUTPUT", "-o", "lo", "!", "-d", lo, "-p", "tcp", "-m", "multiport", "!", "--dports", "53,"+c.inboundTunnelPort, "-m", "owner", flag, id, "-j", "ISTIO_IN_REDIRECT")
			} else {
				r.add("nat", "ISTIO_OUTPUT", "-o", "lo", "!", "-d", lo, "-p", "tcp", "!", "--dport", c.inboundTunnelPort, "-m", "owner", flag, id, "-j", "ISTIO_IN_REDIRECT")
			}
			if !loopbackIncluded {
				if dns {
					r.add("nat", "ISTIO_OUTPUT", "-o", "lo", "-p", "tcp", "!", "--dport", "53", "-m", "owner", "!", flag, id, "-j", "RETURN")
				} else {
					r.add("nat", "ISTIO_OUTPUT", "-o", "lo", "-m", "owner", "!", flag, id, "-j", "RETURN")
				}
			}
			r.add("nat", "ISTIO_OUTPUT", "-m", "owner", flag, id, "-j", "RETURN")
		}
	}
	owner("--uid-owner", splitList(c.proxyUID))
	owner("--gid-owner", splitList(c.proxyGID))

	if dns {
		r.add("nat", "ISTIO_OUTPUT", "-j", "ISTIO_OUTPUT_DNS")
		r.add("raw", "OUTPUT", "-j", "ISTIO_OUTPUT_DNS")
		r.add("raw", "PREROUTING", "-j", "ISTIO_INBOUND")
		for _, u := range splitList(c.proxyUID) {
			r.add("raw", "ISTIO_OUTPUT_DNS", "-p", "udp", "--dport", "53", "-m", "owner", "--uid-owner", u, "-j", "CT", "--zone", "1")
			r.add("raw", "ISTIO_OUTPUT_DNS", "-p", "udp", "--sport", "15053", "-m", "owner", "--uid-owner", u, "-j", "CT", "--zone", "2")
		}
		for _, g := range splitList(c.proxyGID) {
			r.add("raw", "ISTIO_OUTPUT_DNS", "-p", "udp", "--dport", "53", "-m", "owner", "--gid-owner", g, "-j", "CT", "--zone", "1")
			r.add("raw", "ISTIO_OUTPUT_DNS", "-p", "udp", "--sport", "15053", "-m", "owner", "--gid-owner", g, "-j", "CT", "--zone", "2")
		}
		servers := nameservers
		if c.captureAllDNS {
			servers = []string{""}
		}
		for _, ns := range servers {
			dst, src := []string{}, []string{}
			if ns != "" {
				dst, src = []string{"-d", ns + host}, []string{"-s", ns + host}
			}
			r.add("nat", "ISTIO_OUTPUT_DNS", append(append([]string{"-p", "tcp", "--dport", "53"}, dst...), "-j", "REDIRECT", "--to-ports", "15053")...)
			r.add("nat", "ISTIO_OUTPUT_DNS", append(append([]string{"-p", "udp", "--dport", "53"}, dst...), "-j", "REDIRECT", "--to-ports", "15053")...)
			r.add("raw", "ISTIO_OUTPUT_DNS", append(append([]string{"-p", "udp", "--dport", "53"}, dst...), "-j", "CT", "--zone", "2")...)
			r.add("raw", "ISTIO_INBOUND", append(append([]string{"-p", "udp", "--sport", "53"}, src...), "-j", "CT", "--zone", "1")...)
		}
	}

	r.add("nat", "ISTIO_OUTPUT", "-d", lo, "-j", "RETURN")
	for _, n := range splitList(c.excludeCIDRs) {
		if family(n) {
			r.add("nat", "ISTIO_OUTPUT", "-d", n, "-j", "RETURN")
		}
	}
	for _, p := range splitList(c.includeOutPorts) {
		r.add("nat", "ISTIO_OUTPUT", "-p", "tcp", "--dport", p, "-j", "ISTIO_REDIRECT")
	}
	if c.includeCIDRs == "*" {
		r.add("nat", "ISTIO_OUTPUT", "-j", "ISTIO_REDIRECT")
		for _, vif := range splitList(c.virtInterfaces) {
			r.insert("nat", "PREROUTING", "-i", vif, "-j", "ISTIO_REDIRECT")
		}
	} else {
		for _, n := range splitList(c.includeCIDRs) {
			if !family(n) {
				continue
			}
			r.add("nat", "ISTIO_OUTPUT", "-d", n, "-j", "ISTIO_REDIRECT")
			for _, vif := range splitList(c.virtInterfaces) {
				r.insert("nat", "PREROUTING", "-i", vif, "-d", n, "-j", "ISTIO_REDIRECT")
			}
		}
	}
	return r
}

// nameserversFrom reads the nameservers of one family from a resolv.conf.
func nameserversFrom(path string, v6 bool) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil && a.Is6() == v6 {
				out = append(out, a.String())
			}
		}
	}
	return out
}

// pickBackend chooses legacy when legacy tables already hold rules in this
// netns, else nft, as istio-iptables does.
func pickBackend(force string) string {
	switch force {
	case "legacy", "nft":
		return force
	}
	out, err := exec.Command("iptables-legacy-save").Output()
	if err == nil && bytes.Contains(out, []byte("\n-A ")) {
		return "legacy"
	}
	return "nft"
}

func runIstioIptables(args []string) int {
	c, err := parseCaptureFlags(args)
	if err != nil {
		logf("error: %v", err)
		return 1
	}
	logf("istio-iptables (kubectl-mesh stand-in) config: mode=%s -p %s -z %s -u %s -g %s -b %q -d %q -i %q -x %q -q %q -o %q -c %q -k %q dns=%v",
		c.mode, c.proxyPort, c.inboundCapturePort, c.proxyUID, c.proxyGID, c.inboundPorts, c.localExcludePorts,
		c.includeCIDRs, c.excludeCIDRs, c.includeOutPorts, c.excludeOutPorts, c.excludeInterfaces, c.virtInterfaces, c.redirectDNS)
	if !c.skipRuleApply {
		families := []bool{false}
		if c.dualStack {
			families = append(families, true)
		}
		backend := pickBackend(c.forceBinary)
		for _, v6 := range families {
			input := buildRules(c, nameserversFrom("/etc/resolv.conf", v6), v6).restoreInput()
			prefix := "iptables-"
			if v6 {
				prefix = "ip6tables-"
			}
			if c.dryRun {
				fmt.Print(input)
				continue
			}
			logf("Running %s%s-restore with:\n%s", prefix, backend, input)
			restore := exec.Command(prefix+backend+"-restore", "--noflush")
			restore.Stdin = strings.NewReader(input)
			if out, err := restore.CombinedOutput(); err != nil {
				logf("%s%s-restore failed: %v\n%s", prefix, backend, err, out)
				return 1
			}
			if c.mode == "TPROXY" {
				ip := []string{"ip"}
				if v6 {
					ip = []string{"ip", "-6"}
				}
				for _, cmd := range [][]string{
					append(append([]string{}, ip...), "rule", "add", "fwmark", c.tproxyMark, "lookup", c.tproxyTable),
					append(append([]string{}, ip...), "route", "add", "local", "default", "dev", "lo", "table", c.tproxyTable),
				} {
					if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
						logf("%s failed: %v\n%s", strings.Join(cmd, " "), err, out)
						return 1
					}
				}
			}
			if out, err := exec.Command(prefix + backend + "-save").CombinedOutput(); err == nil {
				logf("Final %s state:\n%s", strings.TrimSuffix(prefix, "-"), out)
			}
		}
	}
	if c.runValidation {
		return runValidation(c)
	}
	return 0
}
