package capture

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// `iptables -L` without -n prints names where iptables -S and iptables-save
// print numbers: protocols, ports (the machine's services file), addresses
// (host and network names), owners (user names). This package reads no file
// of the machine it runs on (that machine is not the one that printed the
// listing): it knows the names below, and a name it does not know stays an
// unknown match, which a trace reports rather than guesses.

// serviceNames are port names that every common services file (Debian's
// netbase, Red Hat's setup, Alpine's) gives the same number, limited to
// ports a mesh's capture rules are likely to name: DNS, the web ports, the
// databases and brokers pods call, the ports Linkerd's proxy-init excludes.
var serviceNames = map[string]uint16{
	"ftp-data": 20, "ftp": 21, "ssh": 22, "telnet": 23, "smtp": 25,
	"domain": 53, "bootps": 67, "bootpc": 68, "tftp": 69, "http": 80, "www": 80,
	"kerberos": 88, "pop3": 110, "sunrpc": 111, "auth": 113, "ntp": 123,
	"imap2": 143, "imap": 143, "snmp": 161, "bgp": 179, "ldap": 389, "https": 443,
	"microsoft-ds": 445, "submissions": 465, "submission": 587, "ldaps": 636,
	"domain-s": 853, "rsync": 873, "imaps": 993, "pop3s": 995, "socks": 1080,
	"ms-sql-s": 1433, "cisco-sccp": 2000, "nfs": 2049, "mysql": 3306,
	"sieve": 4190, "mdns": 5353, "postgresql": 5432, "postgres": 5432,
	"amqp": 5672, "redis": 6379, "webcache": 8080, "git": 9418,
}

// serviceNumber is a port as `iptables -L` printed it: a number or a name.
func serviceNumber(s string) (uint16, bool) {
	if n, err := strconv.ParseUint(s, 10, 16); err == nil {
		return uint16(n), true
	}
	n, ok := serviceNames[s]
	return n, ok
}

// protoNames are the protocols `iptables -L -n` prints by number (the
// names are what the protocols file gives and iptables-save prints).
var protoNames = map[string]string{
	"0": "all", "1": "icmp", "2": "igmp", "4": "ipencap", "6": "tcp", "17": "udp",
	"41": "ipv6", "47": "gre", "50": "esp", "51": "ah", "58": "ipv6-icmp",
	"132": "sctp", "136": "udplite",
}

// isListProto tells a protocol column's value: a known name or a number,
// possibly negated.
func isListProto(s string) bool {
	s = strings.TrimPrefix(s, "!")
	if s == "" {
		return false
	}
	if _, err := strconv.ParseUint(s, 10, 8); err == nil {
		return true
	}
	for _, n := range protoNames {
		if n == s {
			return true
		}
	}
	return false
}

// hostNames are host names iptables prints for loopback addresses (the
// names every hosts file has); "localhost" is the family's loopback.
var hostNames = map[string]string{
	"ip6-localhost": "::1", "ip6-loopback": "::1", "localhost6": "::1",
	"localhost6.localdomain6": "::1",
}

// networkNames are the names of networks files: iptables prints
// "link-local/16" for 169.254.0.0/16.
var networkNames = map[string]string{
	"default": "0.0.0.0", "loopback": "127.0.0.0", "link-local": "169.254.0.0",
}

// resolveListHost is an address as `iptables -L` printed it, without its
// mask: a literal, or a name this package knows. ok is false for a name it
// does not know.
func resolveListHost(s, family string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a, true
	}
	switch s {
	case "localhost", "localhost.localdomain":
		if family == "ipv6" {
			return netip.IPv6Loopback(), true
		}
		return netip.MustParseAddr("127.0.0.1"), true
	}
	if v, ok := hostNames[s]; ok {
		return netip.MustParseAddr(v), true
	}
	if v, ok := networkNames[s]; ok && family != "ipv6" {
		return netip.MustParseAddr(v), true
	}
	return netip.Addr{}, false
}

// listMaskBits reads a mask as iptables prints it: "/24" or, when not
// contiguous, "/255.255.0.255" (ok false: not a prefix).
func listMaskBits(s string, a netip.Addr) (int, bool) {
	if n, err := strconv.Atoi(s); err == nil {
		return n, n >= 0 && n <= a.BitLen()
	}
	m, err := netip.ParseAddr(s)
	if err != nil || m.BitLen() != a.BitLen() {
		return 0, false
	}
	bits, ones, done := 0, true, false
	for _, b := range m.AsSlice() {
		for i := 7; i >= 0; i-- {
			set := b&(1<<i) != 0
			switch {
			case set && done:
				ones = false
			case set:
				bits++
			default:
				done = true
			}
		}
	}
	return bits, ones
}

// NativeNames puts a native nftables ruleset's own table and chain names
// back into text written with the iptables-shaped ones (ISTIO_INBOUND is
// istio-inbound): nil for an iptables ruleset.
func (d *Ruleset) NativeNames() func(string) string {
	var pairs [][2]string
	for _, t := range d.Tables {
		for _, c := range t.Chains {
			if c.Native != "" && c.Native != c.Name {
				pairs = append(pairs, [2]string{c.Name, c.Native})
			}
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	// Longer names first: ISTIO_IN_REDIRECT before ISTIO_INBOUND's prefix.
	sort.Slice(pairs, func(i, j int) bool { return len(pairs[i][0]) > len(pairs[j][0]) })
	var args []string
	seen := map[string]bool{}
	for _, p := range pairs {
		if !seen[p[0]] {
			seen[p[0]] = true
			args = append(args, p[0], p[1])
		}
	}
	r := strings.NewReplacer(args...)
	return r.Replace
}
