package capture

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// parseErr asserts that ParseDump refuses in with a ParseError on line,
// whose message holds every one of want.
func parseErr(t *testing.T, name, in string, line int, want ...string) {
	t.Helper()
	_, err := ParseDump([]byte(in))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != line {
		t.Errorf("%s: %v, want a refusal on line %d", name, err, line)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q lacks %q", name, err, w)
		}
	}
}

const natS = "-P PREROUTING ACCEPT\n-P INPUT ACCEPT\n-P OUTPUT ACCEPT\n-P POSTROUTING ACCEPT\n-N ISTIO_REDIRECT\n-A OUTPUT -j ISTIO_REDIRECT\n-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001\n"

func TestParseDumpRefusals(t *testing.T) {
	save := "*nat\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j RETURN\nCOMMIT\n"
	row := "Chain OUTPUT (policy ACCEPT 0 packets, 0 bytes)\n pkts bytes target     prot opt in     out     source               destination\n    0     0 RETURN     all  --  any    any     anywhere             anywhere\n"
	// Forms mixed: the first line of the second form is named, with the first.
	parseErr(t, "save then -S", save+natS, 5, "iptables -S output after iptables-save output (from line 1)", "one form at a time")
	parseErr(t, "-S then -L", natS+row, 8, "iptables -L output after iptables -S output (from line 1)")
	parseErr(t, "-L then save", row+save, 4, "iptables-save output after iptables -L output (from line 1)")
	parseErr(t, "-L then -A", row+"-A OUTPUT -j RETURN\n", 4, "an iptables-save or iptables -S rule in iptables -L output")
	parseErr(t, "nft then -S", "table inet istio-proxy-nat {\n}\n"+natS, 3, "iptables -S output after nft output")
	parseErr(t, "nft then junk", "table inet istio-proxy-nat {\n}\nhello\n", 3, "not part of an nft ruleset")
	parseErr(t, "prompt, then save, then -S", "$ iptables-save\n"+save+"$ iptables -t nat -S\n"+natS, 7, "iptables -S output after iptables-save output (from line 2)")

	// Unknown forms: the refusal names what is accepted.
	for _, in := range []string{"hello\n", "Defaulted container \"istio-proxy\" out of: istio-proxy, istio-init\n" + save} {
		parseErr(t, "unknown", in, 1, "not a form of rules kubectl-mesh reads", "iptables-save", "iptables -S", "iptables -L -v", "nft list ruleset")
	}
	if _, err := ParseDump([]byte("# nothing\n\n$ echo hi\n")); err == nil || !strings.Contains(err.Error(), "iptables -S, iptables -L -v") {
		t.Errorf("no rules at all: %v", err)
	}
	parseErr(t, "-A alone", "-A OUTPUT -j RETURN\n", 1, "no table or chain declared")

	// A -S block whose table cannot be told: one built-in chain (nat, mangle,
	// raw and filter all have OUTPUT), or only a user chain.
	parseErr(t, "-S OUTPUT", natS+"-P OUTPUT ACCEPT\n-A OUTPUT -j RETURN\n", 8, "cannot tell which table", "(OUTPUT)", "$ iptables -t nat -S")
	parseErr(t, "-S user chain", "-N ISTIO_OUTPUT\n-A ISTIO_OUTPUT -j RETURN\n", 1, "cannot tell which table", "no built-in chain")
	parseErr(t, "-L user chain", "Chain ISTIO_OUTPUT (1 references)\n pkts bytes target prot opt in out source destination\n", 1, "cannot tell which table", "-L -v -n")
	// ... unless its command line names it.
	d, err := ParseDump([]byte("# nsenter -t 1234 -n iptables -t mangle -S OUTPUT\n-P OUTPUT ACCEPT\n-A OUTPUT -j RETURN\n$ kubectl exec web -c istio-proxy -- iptables -t nat -S ISTIO_OUTPUT\n-N ISTIO_OUTPUT\n-A ISTIO_OUTPUT -j RETURN\n"))
	if err != nil || d.Rulesets[0].Table("mangle").Chain("OUTPUT") == nil || d.Rulesets[0].Table("nat").Chain("ISTIO_OUTPUT") == nil {
		t.Errorf("-S CHAIN after command lines naming the table: %v", err)
	}
	// A command line naming a table the chains do not belong to.
	parseErr(t, "-t raw, nat's chains", "$ iptables -t raw -S\n"+natS, 2, "INPUT is not a built-in chain of table raw, which the command line 1 names")
	// The same table twice.
	parseErr(t, "nat twice", natS+natS, 8, "chain PREROUTING of the IPv4 table nat is listed twice")
	// -L without -v has no interfaces: refused, saying what to paste.
	parseErr(t, "-L without -v", "Chain OUTPUT (policy ACCEPT)\ntarget     prot opt source               destination\nRETURN     all  --  anywhere             anywhere\n", 2, "without -v", "iptables -L -v -n")
	// A row outside a chain, a bad counter, a bad column.
	parseErr(t, "row first", "    0     0 RETURN     all  --  any    any     anywhere             anywhere\n", 1, "without a Chain line")
	parseErr(t, "bad protocol", strings.Replace(row, " all ", " zzz ", 1), 3, "protocol")
	parseErr(t, "-S junk", natS+"hello\n", 8, "not an iptables -S line")
	parseErr(t, "IPv4 and IPv6 in one table", "-P PREROUTING ACCEPT\n-P OUTPUT ACCEPT\n-A OUTPUT -d ::1/128 -j RETURN\n-A OUTPUT -d 127.0.0.1/32 -j RETURN\n", 4, "an IPv4 address in a table listing whose line 3 has an IPv6 one")
}

// TestParseDumpListNames: iptables -L -v without -n names addresses, ports
// and owners and rounds counters; what it names is read when every machine
// would name it so, else kept as an unknown match a trace reports.
func TestParseDumpListNames(t *testing.T) {
	in := `Chain PREROUTING (policy ACCEPT 206K packets, 12M bytes)
 pkts bytes target     prot opt in     out     source               destination
 206K   12M ISTIO_INBOUND  tcp  --  any    any     anywhere             anywhere

Chain INPUT (policy ACCEPT 0 packets, 0 bytes)
 pkts bytes target     prot opt in     out     source               destination

Chain OUTPUT (policy ACCEPT 5120 packets, 307K bytes)
 pkts bytes target     prot opt in     out     source               destination
 5120  307K ISTIO_OUTPUT  all  --  any    any     anywhere             anywhere

Chain POSTROUTING (policy ACCEPT 0 packets, 0 bytes)
 pkts bytes target     prot opt in     out     source               destination

Chain ISTIO_INBOUND (1 references)
 pkts bytes target     prot opt in     out     source               destination
    0     0 RETURN     tcp  --  any    any     anywhere             anywhere             tcp dpt:15008
 206K   12M REDIRECT   tcp  --  any    any     anywhere             anywhere             redir ports 15006

Chain ISTIO_OUTPUT (1 references)
 pkts bytes target     prot opt in     out     source               destination
   12   720 RETURN     all  --  any    lo      127.0.0.6            anywhere
    3   180 REDIRECT   tcp  --  any    lo      anywhere            !localhost            tcp dpt:!15008 owner UID match 1337 redir ports 15006
    1    60 RETURN     all  --  any    any     anywhere             localhost
    2   120 RETURN     all  --  any    any     anywhere             db-0.db.shop.svc.cluster.local
    4   240 RETURN     tcp  --  any    any     anywhere             anywhere             tcp dpt:http-alt
    5   300 RETURN     all  --  any    any     anywhere             anywhere             owner UID match istio-proxy
    6   360 RETURN     all  --  any    any     anywhere             anywhere             ADDRTYPE match dst-type LOCAL
  100  6000 REDIRECT   udp  --  any    any     anywhere             anywhere             udp dpt:domain redir ports 15053
 5000  300K REDIRECT   tcp  --  any    any     anywhere             anywhere             redir ports 15001
`
	d, err := ParseDump([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if d.Form != FormList || len(d.Rulesets) != 1 {
		t.Fatalf("form %q, %d rulesets", d.Form, len(d.Rulesets))
	}
	rs := d.Rulesets[0]
	if rs.Family != "ipv4" || rs.Form != FormList || !rs.CountersRounded || rs.Table("nat") == nil {
		t.Fatalf("family %q form %q rounded %v tables %v", rs.Family, rs.Form, rs.CountersRounded, rs.Tables)
	}
	nat := rs.Table("nat")
	pre := nat.Chain("PREROUTING")
	if pre.Policy != "ACCEPT" || pre.Packets != 206000 || pre.Bytes != 12000000 || !pre.Rounded {
		t.Errorf("PREROUTING: %+v", pre)
	}
	if r := pre.Rules[0]; r.Packets != 206000 || r.Bytes != 12000000 || !r.Rounded || !r.HasCounters || r.Spec != "-A PREROUTING -p tcp -j ISTIO_INBOUND" {
		t.Errorf("PREROUTING rule: %+v", r)
	}
	out := nat.Chain("ISTIO_OUTPUT").Rules
	lo := netip.MustParsePrefix("127.0.0.1/32")
	if r := out[0]; r.Packets != 12 || r.Rounded || r.Match.Src == nil || *r.Match.Src != netip.MustParsePrefix("127.0.0.6/32") || r.Match.Out != "lo" || r.Match.Dst != nil {
		t.Errorf("anywhere and 127.0.0.6: %+v", r.Match)
	}
	if r := out[1]; r.Match.Dst == nil || *r.Match.Dst != lo || !r.Match.NotDst || !r.Match.NotDPort || r.Match.DPorts[0] != (portRange{15008, 15008}) ||
		r.Match.UID != "1337" || r.TargetArg("--to-ports") != "15006" ||
		r.Spec != "-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -o lo -p tcp -m tcp ! --dport 15008 -m owner --uid-owner 1337 -j REDIRECT --to-ports 15006" {
		t.Errorf("!localhost: %+v %q", r.Match, r.Spec)
	}
	if r := out[2]; r.Match.Dst == nil || *r.Match.Dst != lo || r.Match.NotDst {
		t.Errorf("localhost: %+v", r.Match)
	}
	// Names it cannot know stay visible, as unknown matches.
	for i, want := range map[int]string{3: "destination db-0.db.shop.svc.cluster.local (a name, not resolved", 4: "tcp dpt:http-alt (a service name not known", 5: "owner UID match istio-proxy (a name, not resolved", 6: "iptables -L: ADDRTYPE match dst-type LOCAL"} {
		r := out[i]
		if len(r.Match.Unknown) != 1 || !strings.Contains(r.Match.Unknown[0], want) {
			t.Errorf("rule %d: unknown %q, want %q", i+1, r.Match.Unknown, want)
		}
	}
	if r := out[3]; r.Match.Dst != nil || !strings.Contains(r.Spec, "-d db-0.db.shop.svc.cluster.local") {
		t.Errorf("unresolved destination read as an address: %+v %q", r.Match, r.Spec)
	}
	if r := out[7]; r.Match.Proto != "udp" || len(r.Match.DPorts) != 1 || r.Match.DPorts[0] != (portRange{53, 53}) || r.TargetArg("--to-ports") != "15053" {
		t.Errorf("dpt:domain: %+v", r)
	}
	// The annotation and a trace say what is unknown; a connection the
	// unknown rules could catch is not said to be redirected for sure.
	rs.Annotate(&PodContext{ProxyUID: "1337"})
	if !strings.Contains(out[3].Annotation, "db-0.db.shop.svc.cluster.local") {
		t.Errorf("annotation %q", out[3].Annotation)
	}
	p, err := ParseTraceSpec("out:10.1.2.3:443", []netip.Addr{netip.MustParseAddr("10.1.2.9")})
	if err != nil {
		t.Fatal(err)
	}
	tr := rs.Trace(p)
	if !strings.Contains(strings.Join(tr.Notes, " "), "db-0.db.shop.svc.cluster.local") {
		t.Errorf("trace through an unknown match: %s, notes %q", tr.Summary, tr.Notes)
	}

	// The same from ip6tables: localhost is ::1.
	d, err = ParseDump([]byte("$ ip6tables -t nat -L -v\n" + strings.Replace(in, "127.0.0.6  ", "::6        ", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if rs := d.Rulesets[0]; rs.Family != "ipv6" {
		t.Errorf("ip6tables: family %q", rs.Family)
	}
	if r := d.Rulesets[0].Table("nat").Chain("ISTIO_OUTPUT").Rules[2]; r.Match.Dst == nil || *r.Match.Dst != netip.MustParsePrefix("::1/128") {
		t.Errorf("ip6tables localhost: %+v", r.Match)
	}
}

func TestParseDumpCommandLines(t *testing.T) {
	mangle := "-P PREROUTING ACCEPT\n-P INPUT ACCEPT\n-P FORWARD ACCEPT\n-P OUTPUT ACCEPT\n-P POSTROUTING ACCEPT\n"
	raw := "-P PREROUTING ACCEPT\n-P OUTPUT ACCEPT\n"
	// Several tables concatenated without command lines: told by their
	// built-in chains; a loop's one command line names the tool only.
	for _, in := range []string{natS + mangle + raw, "$ for t in nat mangle raw; do iptables-legacy -t $t -S; done\n" + natS + mangle + raw,
		"% sudo iptables-legacy -t nat -vS; iptables -t mangle -S\n" + natS + mangle + raw} {
		d, err := ParseDump([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		rs := d.Rulesets[0]
		var names []string
		for _, tb := range rs.Tables {
			names = append(names, tb.Name)
		}
		if d.Form != FormListRules || strings.Join(names, " ") != "nat mangle raw" || rs.RuleCount() != 2 || rs.Family != "ipv4" {
			t.Errorf("%q: form %q tables %v rules %d", in[:20], d.Form, names, rs.RuleCount())
		}
		if strings.HasPrefix(in, "$") && rs.Backend != "legacy" {
			t.Errorf("iptables-legacy: backend %q", rs.Backend)
		}
	}
	// Both families, each after its command line: one ruleset each.
	v6 := strings.Replace(natS, "-A OUTPUT -j", "-A OUTPUT ! -d ::1/128 -j", 1)
	d, err := ParseDump([]byte("root@node:/# iptables-nft -t nat -S\n" + natS + "root@node:/# ip6tables-nft -t nat -S\n" + v6))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Rulesets) != 2 || d.Rulesets[0].Family != "ipv4" || d.Rulesets[1].Family != "ipv6" || d.Rulesets[1].Backend != "nft" {
		t.Fatalf("two families: %+v", d.Rulesets)
	}
	// A command line saying iptables before IPv6 addresses is refused.
	parseErr(t, "iptables, IPv6 rules", "$ iptables -t nat -S\n"+v6, 7, "an IPv6 address in the output of the command on line 1")
	// Without command lines, blocks without addresses follow the others.
	d, err = ParseDump([]byte(v6 + mangle))
	if err != nil || d.Rulesets[0].Family != "ipv6" || len(d.Rulesets[0].Tables) != 2 {
		t.Errorf("v6 without command lines: %v", err)
	}
	// ... and cannot when both families are there.
	v4 := strings.Replace(natS, "-A OUTPUT -j", "-A OUTPUT ! -d 127.0.0.1/32 -j", 1)
	parseErr(t, "both families, one unsaid", v4+v6+mangle, 15, "cannot tell whether this listing is IPv4 or IPv6")

	// iptables -v -S: counters.
	d, err = ParseDump([]byte("-P PREROUTING ACCEPT -c 0 0\n-P OUTPUT ACCEPT -c 5 300\n-A OUTPUT -p tcp -c 7 420 -j REDIRECT --to-ports 15001\n"))
	if err != nil {
		t.Fatal(err)
	}
	raw0 := d.Rulesets[0].Table("raw")
	if c := raw0.Chain("OUTPUT"); c.Packets != 5 || c.Bytes != 300 || c.Rules[0].Packets != 7 || !c.Rules[0].HasCounters || c.Rules[0].Spec != "-A OUTPUT -p tcp -j REDIRECT --to-ports 15001" {
		t.Errorf("-v -S: %+v %+v", c, c.Rules[0])
	}

	// iptables-save and nft through ParseDump, with command lines pasted.
	d, err = ParseDump([]byte("$ kubectl exec web -c istio-proxy -- ip6tables-save\n*nat\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -j RETURN\nCOMMIT\n"))
	if err != nil || d.Form != FormSave || d.Rulesets[0].Form != FormSave || d.Rulesets[0].Family != "ipv6" {
		t.Errorf("save with a command line: %v %+v", err, d)
	}
	nft := string(readDump(t, "istio-native.nft"))
	d, err = ParseDump([]byte("# nft list ruleset\n" + nft))
	if err != nil || d.Form != FormNft || len(d.Rulesets) != 2 || d.Rulesets[0].Form != FormNft || !IsNftListing([]byte(nft)) || IsNftListing([]byte(natS)) {
		t.Errorf("nft: %v", err)
	}
	// Without Istio's tables, a listing is no Istio rule at all (every rule
	// of the native mode missing), and another table's rules are named.
	d, err = ParseDump([]byte("table ip nat {\n\tchain ISTIO_OUTPUT {\n\t\tmeta l4proto tcp redirect to :15001\n\t}\n}\n"))
	if err != nil || len(d.Rulesets) != 2 || d.Rulesets[0].RuleCount() != 0 || len(d.Rulesets[0].Foreign) != 1 || !strings.Contains(d.Rulesets[0].Foreign[0], "table ip nat: 1 rules") {
		t.Errorf("nft without Istio's tables: %v %+v", err, d)
	}
	// A comment quoting a command is a rule, not a command line.
	d, err = ParseDump([]byte(natS + `-A ISTIO_REDIRECT -m comment --comment "see iptables -t raw -S" -j RETURN` + "\n"))
	if err != nil || d.Rulesets[0].Table("nat").Chain("ISTIO_REDIRECT").Rules[1].Match.Comment != "see iptables -t raw -S" {
		t.Errorf("a comment quoting a command: %v", err)
	}
}

// An ip6tables older than 1.8.8 leaves the opt column blank; a rule
// without a target has an empty target column.
func TestParseDumpListColumns(t *testing.T) {
	in := "Chain PREROUTING (policy ACCEPT 0 packets, 0 bytes)\n" +
		"num   pkts bytes target     prot opt in     out     source               destination\n" +
		"1        0     0 ISTIO_X    all  --  any    any     anywhere             anywhere            [goto]  mark match ! 0x539\n" +
		"Chain OUTPUT (policy ACCEPT 0 packets, 0 bytes)\n" +
		" pkts bytes target     prot opt in     out     source               destination\n" +
		"    1    80 RETURN     all      any    lo      ::6/128              ::/0\n" +
		"    2    80            tcp      any    any     ::/0                 ::/0\n" +
		"    3    80            tcp  --  any    any     ::/0                 ::/0\n"
	d, err := ParseDump([]byte("$ ip6tables -t raw -L -v\n" + in))
	if err != nil {
		t.Fatal(err)
	}
	raw := d.Rulesets[0].Table("raw")
	rules := raw.Chain("OUTPUT").Rules
	if len(rules) != 3 || rules[0].Target != "RETURN" || rules[0].Match.Out != "lo" || rules[0].Match.Src.String() != "::6/128" ||
		rules[1].Target != "" || rules[1].Match.Proto != "tcp" || rules[2].Target != "" || rules[2].Packets != 3 {
		t.Errorf("rows: %+v", rules)
	}
	if r := raw.Chain("PREROUTING").Rules[0]; !r.Goto || r.Target != "ISTIO_X" || r.Match.Mark != "0x539" || !r.Match.NotMark || r.Spec != "-A PREROUTING -m mark ! --mark 0x539 -g ISTIO_X" {
		t.Errorf("goto: %+v", r)
	}
}

// FuzzParseDump: no input makes form detection, the -S and -L readers, the
// annotator or a trace panic; a dump read is one of the forms, with one or
// two rulesets of distinct families.
func FuzzParseDump(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "pasted", "*", "*"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("$ ip6tables -t nat -L -v\nChain OUTPUT (policy ACCEPT 9T packets, 1G bytes)\nnum pkts bytes target prot opt in out source destination\n1 1K 2M X !tcp !f !lo * !localhost/255.0.255.0 ::/0 [goto] multiport ports !1:2 CONNMARK save nfmask 0x1 ctmask ~0x2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDump(data)
		if err != nil {
			return
		}
		if len(d.Rulesets) == 0 || len(d.Rulesets) > 2 || len(d.Rulesets) == 2 && d.Rulesets[0].Family == d.Rulesets[1].Family && d.Form != FormNft {
			t.Fatalf("form %q: %d rulesets", d.Form, len(d.Rulesets))
		}
		_ = d.Note()
		for _, rs := range d.Rulesets {
			if rs.Form != d.Form {
				t.Fatalf("ruleset form %q in a %q dump", rs.Form, d.Form)
			}
			rs.Annotate(&PodContext{})
			if p, err := ParseTraceSpec("out:10.0.0.1:443", []netip.Addr{netip.MustParseAddr("10.0.0.9")}); err == nil {
				rs.Trace(p)
			}
		}
	})
}
