package capture

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The dumps in testdata/ are real iptables-save output of rules loaded with
// the real iptables-restore (hack/testdata/iptables-dumps.sh makes them).
func readDump(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseRealDumps(t *testing.T) {
	for _, tc := range []struct {
		file, backend, family string
		rules                 int
		counters              bool
	}{
		{"istio-default.nft.save", "nft", "ipv4", 18, true},
		{"istio-tproxy-dns.legacy.save", "legacy", "ipv4", 39, true},
		{"istio-default.v6.nosave-counters.save", "nft", "ipv6", 18, false},
		{"linkerd-proxy-init.nft.save", "nft", "ipv4", 8, true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			rs, err := ParseSave(readDump(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if rs.Backend != tc.backend || rs.Family != tc.family || rs.RuleCount() != tc.rules {
				t.Errorf("backend %q family %q rules %d; want %q %q %d", rs.Backend, rs.Family, rs.RuleCount(), tc.backend, tc.family, tc.rules)
			}
			for _, tb := range rs.Tables {
				for _, c := range tb.Chains {
					for _, r := range c.Rules {
						if r.HasCounters != tc.counters || len(r.Match.Unknown) > 0 || r.Target == "" {
							t.Errorf("%s: counters %v unknown %q target %q", r.Spec, r.HasCounters, r.Match.Unknown, r.Target)
						}
					}
				}
			}
		})
	}
}

func TestAnnotations(t *testing.T) {
	rs, err := ParseSave(readDump(t, "istio-default.nft.save"))
	if err != nil {
		t.Fatal(err)
	}
	rs.Annotate(&PodContext{Ports: map[int]string{8080: "http on container app"}, ProxyUID: "1337"})
	want := map[string]string{
		"-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006":    "redirect to local port 15006 (Envoy inbound)",
		"-A ISTIO_OUTPUT -s 127.0.0.6/32 -o lo -j RETURN":             "must not be captured again",
		"-A ISTIO_OUTPUT -m owner --uid-owner 1337 -j RETURN":         "sent by uid 1337 (the proxy)",
		"-A ISTIO_INBOUND -p tcp -m tcp --dport 15021 -j RETURN":      "to 15021 (health checks)",
		"-A ISTIO_OUTPUT -o lo -m owner ! --uid-owner 1337 -j RETURN": "not sent by uid 1337",
	}
	found := 0
	for _, c := range rs.Table("nat").Chains {
		for _, r := range c.Rules {
			if w, ok := want[r.Spec]; ok {
				found++
				if !strings.Contains(r.Annotation, w) {
					t.Errorf("%s: annotation %q lacks %q", r.Spec, r.Annotation, w)
				}
			}
		}
	}
	if found != len(want) {
		t.Errorf("found %d of %d rules", found, len(want))
	}
	lk, err := ParseSave(readDump(t, "linkerd-proxy-init.nft.save"))
	if err != nil {
		t.Fatal(err)
	}
	lk.Annotate(nil)
	r := lk.Table("nat").Chain("PROXY_INIT_REDIRECT").Rules[1]
	if !strings.Contains(r.Annotation, "4143 (Linkerd inbound)") || !strings.Contains(r.Annotation, "Linkerd: every other inbound TCP") {
		t.Errorf("linkerd annotation %q", r.Annotation)
	}
}

func TestTraceLinkerd(t *testing.T) {
	rs, err := ParseSave(readDump(t, "linkerd-proxy-init.nft.save"))
	if err != nil {
		t.Fatal(err)
	}
	pod := []netip.Addr{netip.MustParseAddr("10.1.0.7")}
	for spec, want := range map[string]string{
		"out:10.2.0.9:8080":          "redirect 4140",
		"out:10.2.0.9:443":           "direct 0",
		"out:10.2.0.9:8080,uid=2102": "direct 0",
		"in:8080":                    "redirect 4143",
		"in:4191":                    "direct 0",
	} {
		p, err := ParseTraceSpec(spec, pod)
		if err != nil {
			t.Fatal(err)
		}
		tr := rs.Trace(p)
		if got := fmt.Sprintf("%s %d", tr.Verdict, tr.Port); got != want {
			t.Errorf("%s: %s, want %s", spec, got, want)
		}
	}
}

func TestExpectedMatchesRealDumps(t *testing.T) {
	for file, args := range map[string]string{
		"istio-default.nft.save":                `-p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x "" -b '*' -d 15090,15021,15020`,
		"istio-tproxy-dns.legacy.save":          `-m TPROXY -b '*' -i '*' -d 15020 --redirect-dns --capture-all-dns --force-iptables-binary legacy`,
		"istio-default.v6.nosave-counters.save": `istio-iptables -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x "" -b '*' -d 15090,15021,15020 --dual-stack`,
	} {
		rs, err := ParseSave(readDump(t, file))
		if err != nil {
			t.Fatal(err)
		}
		words, err := SplitShell(args)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := ParseCaptureArgs(words, nil)
		if err != nil {
			t.Fatal(err)
		}
		d, err := CompareRules(rs, ExpectedRules(cfg, rs.Family == "ipv6", nil))
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Missing)+len(d.Extra) > 0 {
			t.Errorf("%s: missing %q extra %q", file, d.Missing, d.Extra)
		}
		// One flag more: the drift names exactly the rule it adds.
		words = append(words, "-x", "10.96.0.0/12")
		cfg, _ = ParseCaptureArgs(words, nil)
		d, _ = CompareRules(rs, ExpectedRules(cfg, rs.Family == "ipv6", nil))
		wantMissing := 1
		if rs.Family == "ipv6" {
			wantMissing = 0 // an IPv4 CIDR adds nothing to the IPv6 rules
		}
		if len(d.Missing) != wantMissing || len(d.Extra) != 0 || (wantMissing == 1 && d.Missing[0] != "-A ISTIO_OUTPUT -d 10.96.0.0/12 -j RETURN") {
			t.Errorf("%s with -x: missing %q extra %q", file, d.Missing, d.Extra)
		}
	}
}

func TestBadInput(t *testing.T) {
	full := string(readDump(t, "istio-default.nft.save"))
	for name, in := range map[string]string{
		"empty":           "",
		"not iptables":    "hello world\nthis is not a dump\n",
		"truncated":       full[:len(full)/2],
		"rule outside":    "-A OUTPUT -j ACCEPT\n",
		"undeclared":      "*nat\n:OUTPUT ACCEPT [0:0]\n-A NOPE -j RETURN\nCOMMIT\n",
		"bad counters":    "*nat\n:OUTPUT ACCEPT [x:0]\nCOMMIT\n",
		"unterminated \"": "*nat\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -m comment --comment \"oops -j RETURN\nCOMMIT\n",
		"bad port":        "*nat\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -p tcp --dport http -j RETURN\nCOMMIT\n",
		"bad address":     "*nat\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -d 10.0.0.0/99 -j RETURN\nCOMMIT\n",
	} {
		if _, err := ParseSave([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for _, args := range []string{"--no-such-flag", "-m BRIDGE", "-p seventy", "-x 10.0.0.0/99", "extra-word"} {
		words, _ := SplitShell(args)
		if _, err := ParseCaptureArgs(words, nil); err == nil {
			t.Errorf("--expect-args %q: no error", args)
		}
	}
	for _, spec := range []string{"sideways:1.2.3.4:80", "out:1.2.3.4", "out:1.2.3.4:0", "out:1.2.3.4:80/sctp", "in:80,bogus=1", "out:1.2.3.4:80,uid=x", "in:abc"} {
		if _, err := ParseTraceSpec(spec, nil); err == nil {
			t.Errorf("--trace %q: no error", spec)
		}
	}
}

// FuzzParseSave: no input makes the parser, the annotator, the trace or the
// comparison panic.
func FuzzParseSave(f *testing.F) {
	for _, name := range []string{"istio-default.nft.save", "istio-tproxy-dns.legacy.save", "istio-default.v6.nosave-counters.save", "linkerd-proxy-init.nft.save"} {
		f.Add(readDump(f, name))
	}
	f.Add([]byte("*nat\n:OUTPUT ACCEPT [0:0]\n[1:2] -A OUTPUT ! -p tcp -m multiport ! --dports 1:2,3 -m mark ! --mark 0x1/0xf -j MARK --set-xmark 0x2/0x3\nCOMMIT\n"))
	f.Add([]byte("*mangle\n:X - [0:0]\n:PREROUTING DROP [0:0]\n-A PREROUTING -g X\n-A X -j X\nCOMMIT\n"))
	cfg, _ := ParseCaptureArgs([]string{"-m", "TPROXY", "-b", "*", "-i", "*", "--redirect-dns", "--capture-all-dns"}, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := ParseSave(data)
		if err != nil {
			return
		}
		rs.Annotate(&PodContext{})
		for _, spec := range []string{"out:10.0.0.1:443", "out:[fd00::1]:53/udp,uid=1337", "in:8080", "in:[fd00::2]:80"} {
			if p, err := ParseTraceSpec(spec, []netip.Addr{netip.MustParseAddr("10.0.0.9")}); err == nil {
				rs.Trace(p)
			}
		}
		_, _ = CompareRules(rs, ExpectedRules(cfg, rs.Family == "ipv6", []string{"10.0.0.10"}))
	})
}

// synthetic100k is a 100,000-rule dump shaped as Istio's: the real default
// rules, then inbound port rules and exclusions until 100,000.
func synthetic100k(b testing.TB) []byte {
	base := string(readDump(b, "istio-default.nft.save"))
	head, _, _ := strings.Cut(base, "COMMIT")
	var sb strings.Builder
	sb.WriteString(head)
	n := 18
	for i := 0; n < 100000; i++ {
		fmt.Fprintf(&sb, "[%d:%d] -A ISTIO_INBOUND -p tcp -m tcp --dport %d -j ISTIO_IN_REDIRECT\n", i, i*60, 1024+i%60000)
		fmt.Fprintf(&sb, "[0:0] -A ISTIO_OUTPUT -d 10.%d.%d.0/24 -j RETURN\n", (i/256)%256, i%256)
		n += 2
	}
	sb.WriteString("COMMIT\n")
	return []byte(sb.String())
}

func BenchmarkParseAnnotate100k(b *testing.B) {
	data := synthetic100k(b)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rs, err := ParseSave(data)
		if err != nil {
			b.Fatal(err)
		}
		rs.Annotate(&PodContext{ProxyUID: "1337"})
		if rs.RuleCount() < 100000 {
			b.Fatal("short")
		}
	}
}

func TestCaptureArgsFromPod(t *testing.T) {
	uid := int64(1337)
	initPod := &corev1.Pod{Spec: corev1.PodSpec{InitContainers: []corev1.Container{{Name: "istio-init",
		Args: []string{"istio-iptables", "-p", "15001", "-x", "10.0.0.0/8"}, Env: []corev1.EnvVar{{Name: "ISTIO_META_DNS_CAPTURE", Value: "true"}}}}}}
	args, env, src, ok := CaptureArgsFromPod(initPod)
	if !ok || strings.Join(args, " ") != "-p 15001 -x 10.0.0.0/8" || env["ISTIO_META_DNS_CAPTURE"] != "true" || !strings.Contains(src, "istio-init") {
		t.Errorf("istio-init: %q %v %q %v", args, env, src, ok)
	}
	cni := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		"sidecar.istio.io/interceptionMode":                "TPROXY",
		"traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.96.0.0/12",
		"traffic.sidecar.istio.io/excludeInboundPorts":     "9090",
		"traffic.sidecar.istio.io/excludeOutboundPorts":    "5432",
	}}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "istio-validation", Args: []string{"istio-iptables", "--run-validation", "--skip-rule-apply"}}},
		Containers:     []corev1.Container{{Name: "app"}, {Name: "istio-proxy", SecurityContext: &corev1.SecurityContext{RunAsUser: &uid}}},
	}}
	args, _, src, ok = CaptureArgsFromPod(cni)
	got := strings.Join(args, " ")
	if !ok || !strings.Contains(src, "CNI") || !strings.Contains(got, "-m TPROXY") || !strings.Contains(got, "-x 10.96.0.0/12") ||
		!strings.Contains(got, "-d 9090,15020,15021,15090") || !strings.Contains(got, "-o 5432") || !strings.Contains(got, "-u 1337") {
		t.Errorf("CNI: %q from %q", got, src)
	}
	// istio-cni's own defaults without annotations: 15020 excluded both ways,
	// whatever the status port; DNS capture from istio-proxy's environment, of every server.
	plain := cni.DeepCopy()
	plain.Annotations = map[string]string{"status.sidecar.istio.io/port": "15999"}
	plain.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "ISTIO_META_DNS_CAPTURE", Value: "true"}}
	args, env, _, _ = CaptureArgsFromPod(plain)
	if got := strings.Join(args, " "); !strings.Contains(got, "-m REDIRECT") || !strings.Contains(got, "-d 15020,15021,15090 -o 15020") ||
		!strings.Contains(got, "--redirect-dns=true --capture-all-dns=true") || len(env) != 0 {
		t.Errorf("CNI defaults: %q, env %v", got, env)
	}
	if _, err := ParseCaptureArgs(args, nil); err != nil {
		t.Errorf("derived arguments do not parse: %v", err)
	}
	if _, _, _, ok := CaptureArgsFromPod(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}); ok {
		t.Error("a pod without a sidecar has capture arguments")
	}
	// The plugin leaves a proxy with Envoy disabled, or a router, alone.
	off := cni.DeepCopy()
	off.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "DISABLE_ENVOY", Value: "true"}}
	router := cni.DeepCopy()
	router.Spec.Containers[1].Args = []string{"proxy", "router"}
	for name, p := range map[string]*corev1.Pod{"DISABLE_ENVOY": off, "proxy router": router} {
		if _, _, _, ok := CaptureArgsFromPod(p); ok {
			t.Errorf("%s: capture arguments for a pod the CNI plugin skips", name)
		}
	}
}

// Whether IPv6 rules are expected depends on the pod's usable addresses, not
// their order: with --dual-stack when it has an IPv6 one, without when it has
// no IPv4 one; loopback and link-local addresses do not count.
func TestIPv6RulesFollowThePodsAddresses(t *testing.T) {
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	for _, tc := range []struct {
		dual  bool
		addrs []netip.Addr
		want  bool
	}{
		{false, nil, false},
		{true, nil, true},
		{false, addrs("10.1.0.5", "fd00::5"), false},
		{false, addrs("fd00::5", "10.1.0.5"), false}, // IPv6-primary dual-stack: istio-iptables still sees the IPv4 one
		{true, addrs("fd00::5", "10.1.0.5"), true},
		{false, addrs("fd00::5"), true},
		{true, addrs("10.1.0.5"), false},
		{true, addrs("10.1.0.5", "fe80::1"), false},
		{false, addrs("fe80::1", "::1", "fd00::5"), true},
		{false, addrs("::ffff:10.1.0.5", "fd00::5"), false},
	} {
		c := &CaptureConfig{DualStack: tc.dual, PodAddrs: tc.addrs}
		if got := c.ipv6Enabled(); got != tc.want {
			t.Errorf("dual-stack %v, addresses %v: IPv6 rules %v, want %v", tc.dual, tc.addrs, got, tc.want)
		}
	}
}

// pilot-agent's own flags parse as pilot-agent parses them: --log_as_json is a
// boolean (it must not swallow the next flag), -r is the route table.
func TestCaptureArgsPilotAgentFlags(t *testing.T) {
	c, err := ParseCaptureArgs([]string{"istio-iptables", "--log_as_json", "--redirect-dns", "-r", "134", "-m", "TPROXY"}, nil)
	if err != nil || !c.RedirectDNS || c.Mode != "TPROXY" {
		t.Fatalf("config %+v, err %v", c, err)
	}
}

// An option this parser does not evaluate keeps all its values: a rule
// with --tcp-flags (two values) parses, and the option stays unknown.
func TestUnknownOptionWithTwoValues(t *testing.T) {
	rs, err := ParseSave([]byte("*mangle\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -p tcp -m tcp --tcp-flags FIN,SYN,RST,ACK SYN -j ACCEPT\nCOMMIT\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := rs.Table("mangle").Chain("PREROUTING").Rules[0]
	if len(r.Match.Unknown) != 1 || r.Match.Unknown[0] != "--tcp-flags FIN,SYN,RST,ACK SYN" || r.Target != "ACCEPT" {
		t.Errorf("unknown %q, target %q", r.Match.Unknown, r.Target)
	}
}
