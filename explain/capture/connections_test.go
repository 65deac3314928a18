package capture

import (
	"net/netip"
	"testing"
)

// The kernel's tables as a pod's network namespace shows them: a redirected
// flow (replies from 15001), the proxy's upstream for it, an excluded port,
// a closed socket (TIME_WAIT: no owner), IPv6.
func TestParseConnections(t *testing.T) {
	ct := `ipv4     2 tcp      6 117 TIME_WAIT src=10.0.0.5 dst=10.0.0.9 sport=40000 dport=8080 src=127.0.0.1 dst=10.0.0.5 sport=15001 dport=40000 [ASSURED] mark=0 zone=0 use=2
ipv4     2 tcp      6 431999 ESTABLISHED src=10.0.0.5 dst=10.0.0.9 sport=40002 dport=8080 src=10.0.0.9 dst=10.0.0.5 sport=8080 dport=40002 [ASSURED] mark=0 zone=0 use=2
ipv4     2 tcp      6 431999 ESTABLISHED src=10.0.0.5 dst=10.0.0.9 sport=40004 dport=9090 src=10.0.0.9 dst=10.0.0.5 sport=9090 dport=40004 [ASSURED] mark=0 zone=0 use=2
ipv6     10 udp      17 25 src=fd00::5 dst=fd00::a sport=5353 dport=53 src=::1 dst=fd00::5 sport=15053 dport=5353 mark=0 zone=0 use=2
ipv4     2 icmp     1 29 src=10.0.0.5 dst=10.0.0.9 type=8 code=0 id=1 src=10.0.0.9 dst=10.0.0.5 type=0 code=0 id=1 mark=0 zone=0 use=2`
	flows := ParseConntrack(ct)
	if len(flows) != 4 || flows[0].ReplySrc.Port() != 15001 || flows[3].Proto != "udp" || !flows[3].Dst.Addr().Is6() {
		t.Fatalf("flows %+v", flows)
	}
	// 10.0.0.5:40002 -> 10.0.0.9:8080 owned by 1337; :40004 by 0, one TIME_WAIT entry (no owner).
	socks := ParseSockets(`# tcp
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0500000A:9C42 0900000A:1F90 01 00000000:00000000 00:00000000 00000000  1337        0 1 1
   1: 0500000A:9C44 0900000A:2382 01 00000000:00000000 00:00000000 00000000  1000        0 2 1
   2: 0500000A:9C40 0900000A:1F90 06 00000000:00000000 00:00000000 00000000     0        0 0 3
# tcp6
   0: 000080FD000000000000000005000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 3 1`)
	if socks["tcp 10.0.0.5:40002 10.0.0.9:8080"] != 1337 || socks["tcp 10.0.0.5:40004 10.0.0.9:9090"] != 1000 || len(socks) != 3 {
		t.Errorf("sockets %v", socks)
	}
	if _, ok := socks["tcp [fd80::5]:8080 [::]:0"]; !ok {
		t.Errorf("IPv6 socket not decoded: %v", socks)
	}
	rs, err := ParseSave(readDump(t, "istio-default.nft.save"))
	if err != nil {
		t.Fatal(err)
	}
	cs := ClassifyConnections(flows, socks, []*Ruleset{rs}, []netip.Addr{netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("fd00::5")}, 1337)
	classes := map[string]string{}
	for _, c := range cs {
		classes[c.Src.String()+">"+c.Dst.String()] = c.Class + "|" + c.Rule
	}
	for flow, want := range map[string]string{
		"10.0.0.5:40000>10.0.0.9:8080": "captured outbound|",
		"10.0.0.5:40002>10.0.0.9:8080": "proxy upstream|",
		"10.0.0.5:40004>10.0.0.9:9090": Bypassing + "|", // the rules read would redirect it: said, no rule named
		"[fd00::5]:5353>[fd00::a]:53":  "DNS via the proxy|",
	} {
		if classes[flow] != want {
			t.Errorf("%s: %q, want %q", flow, classes[flow], want)
		}
	}
}

// The tables are not read at once: a call the app made while the
// connection-tracking table was read can be missing from it while the
// proxy's upstream for it is there. The app's socket, read after, pairs the
// upstream; an upstream that nothing pairs is still said to bypass.
func TestConnectionsReadMidCall(t *testing.T) {
	rs, err := ParseSave(readDump(t, "istio-default.nft.save"))
	if err != nil {
		t.Fatal(err)
	}
	// The proxy's upstream to 10.0.0.9:8080; the app's call to it is not in the table.
	flows := ParseConntrack(`ipv4     2 tcp      6 431999 ESTABLISHED src=10.0.0.5 dst=10.0.0.9 sport=40010 dport=8080 src=10.0.0.9 dst=10.0.0.5 sport=8080 dport=40010 [ASSURED] mark=0 zone=0 use=2`)
	proxy := "   0: 0500000A:9C4A 0900000A:1F90 01 00000000:00000000 00:00000000 00000000  1337        0 1 1\n"
	app := "   1: 0500000A:9C48 0900000A:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 2 1\n"
	pods := []netip.Addr{netip.MustParseAddr("10.0.0.5")}
	checked := 0
	for _, tc := range []struct {
		name, sockets, want string
	}{
		{"the app's socket shows the call", "# tcp\n" + proxy + app, "proxy upstream"},
		{"nothing pairs it", "# tcp\n" + proxy, Bypassing},
	} {
		cs := ClassifyConnections(flows, ParseSockets(tc.sockets), []*Ruleset{rs}, pods, 1337)
		if len(cs) != 1 || cs[0].Class != tc.want {
			t.Errorf("%s: %+v, want one %q", tc.name, cs, tc.want)
		}
		checked++
	}
	// The app (uid 1000) and something as uid 1337 both call 10.0.0.9:9090,
	// both flows in the table: the app's socket has its own flow, so it pairs
	// nothing, and the uid-1337 call stays a bypass.
	both := ParseConntrack(`ipv4     2 tcp      6 431999 ESTABLISHED src=10.0.0.5 dst=10.0.0.9 sport=40020 dport=9090 src=10.0.0.9 dst=10.0.0.5 sport=9090 dport=40020 [ASSURED] mark=0 zone=0 use=2
ipv4     2 tcp      6 431999 ESTABLISHED src=10.0.0.5 dst=10.0.0.9 sport=40022 dport=9090 src=10.0.0.9 dst=10.0.0.5 sport=9090 dport=40022 [ASSURED] mark=0 zone=0 use=2`)
	socks := "# tcp\n   0: 0500000A:9C54 0900000A:2382 01 00000000:00000000 00:00000000 00000000  1000        0 1 1\n" +
		"   1: 0500000A:9C56 0900000A:2382 01 00000000:00000000 00:00000000 00000000  1337        0 2 1\n"
	cs := ClassifyConnections(both, ParseSockets(socks), []*Ruleset{rs}, pods, 1337)
	bypassing := 0
	for _, c := range cs {
		if c.Class == Bypassing {
			bypassing++
		}
	}
	if len(cs) != 2 || bypassing != 2 {
		t.Errorf("two calls to an excluded port, one as the proxy's uid: %+v, want both bypassing", cs)
	}
	checked++
	t.Logf("%d mid-read cases", checked)
}

// Closed flows leave the table one by one: the captured call an upstream
// served can be gone while the upstream (its socket closed too) is still
// there, about to go. The upstreams the table keeps longest take the
// captured calls, whatever order the table lists them in; the one about to
// leave is unpaired, not a bypass; a closed call to where nothing captured
// goes, or one far from leaving, stays a bypass.
func TestConnectionsClosedTwinExpired(t *testing.T) {
	rs, err := ParseSave(readDump(t, "istio-default.nft.save"))
	if err != nil {
		t.Fatal(err)
	}
	flows := ParseConntrack(`ipv4     2 tcp      6 1 TIME_WAIT src=10.0.0.5 dst=10.0.0.9 sport=40033 dport=8080 src=10.0.0.9 dst=10.0.0.5 sport=8080 dport=40033 [ASSURED] mark=0 zone=0 use=2
ipv4     2 tcp      6 90 TIME_WAIT src=10.0.0.5 dst=10.0.0.9 sport=40030 dport=8080 src=127.0.0.1 dst=10.0.0.5 sport=15001 dport=40030 [ASSURED] mark=0 zone=0 use=2
ipv4     2 tcp      6 91 TIME_WAIT src=10.0.0.5 dst=10.0.0.9 sport=40031 dport=8080 src=10.0.0.9 dst=10.0.0.5 sport=8080 dport=40031 [ASSURED] mark=0 zone=0 use=2
ipv4     2 tcp      6 60 TIME_WAIT src=10.0.0.5 dst=10.0.0.9 sport=40037 dport=8080 src=10.0.0.9 dst=10.0.0.5 sport=8080 dport=40037 [ASSURED] mark=0 zone=0 use=2
tcp      6 2 TIME_WAIT src=10.0.0.5 dst=10.0.0.7 sport=40035 dport=8080 src=10.0.0.7 dst=10.0.0.5 sport=8080 dport=40035 [ASSURED] mark=0 use=1`)
	if len(flows) != 5 || flows[0].Expires != 1 || flows[4].Expires != 2 {
		t.Fatalf("seconds left not read from either form: %+v", flows)
	}
	cs := ClassifyConnections(flows, Sockets{}, []*Ruleset{rs}, []netip.Addr{netip.MustParseAddr("10.0.0.5")}, 1337)
	got := map[string]string{}
	for _, c := range cs {
		got[c.Src.String()] = c.Class
	}
	for src, want := range map[string]string{
		"10.0.0.5:40030": "captured outbound",
		"10.0.0.5:40031": "proxy upstream", // kept longest: it takes the one captured call
		"10.0.0.5:40033": Unpaired,         // about to leave, its captured call gone first
		"10.0.0.5:40037": Bypassing,        // a minute from leaving: no captured call left for it
		"10.0.0.5:40035": Bypassing,        // nothing captured goes to 10.0.0.7
	} {
		if got[src] != want {
			t.Errorf("%s: %q, want %q", src, got[src], want)
		}
	}
}
