// Package netns tests the iptables engine against the kernel: rules loaded
// with real iptables-restore (nft and legacy) in network namespaces the test
// makes, dumped with iptables-save -c, and real connections sent through
// them. The rules are written by Istio's own istio-iptables (pilot-agent built
// from istio.io/istio by hack/cluster/build-istio.sh), not by a model of it.
// Needs root (network namespaces), as CI has.
package netns

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

const (
	podV4   = "10.250.0.2"
	worldV4 = "10.250.0.1"
	podV6   = "fd00:250::2"
	worldV6 = "fd00:250::1"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error

	istioOnce sync.Once
	istioBin  string
	istioErr  error
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		for _, tool := range []string{"ip", "iptables-restore", "iptables-legacy-restore", "setpriv"} {
			if _, err := exec.LookPath(tool); err != nil {
				t.Fatalf("%s is needed (hack/cluster/deps.sh installs it): %v", tool, err)
			}
		}
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("these tests need root (network namespaces); CI runs as root")
	}
	t.Skip("needs root for network namespaces")
}

func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "kmesh-netns-")
		if buildErr != nil {
			return
		}
		for pkg, name := range map[string]string{"./probe": "probe"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, name), pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// istioAgent returns Istio's own pilot-agent, built from the istio.io/istio
// version hack/tools/istio/go.mod pins by hack/cluster/build-istio.sh (a
// no-op when the cached build is up to date; make test runs it first).
func istioAgent(t *testing.T) string {
	t.Helper()
	istioOnce.Do(func() {
		root, err := filepath.Abs("../..")
		if err != nil {
			istioErr = err
			return
		}
		cmd := exec.Command("bash", "-c", `. hack/cluster/lib.sh && "$HACK_DIR/build-istio.sh" >&2 && echo "$ISTIO_BIN"`)
		cmd.Dir = root
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			istioErr = fmt.Errorf("hack/cluster/build-istio.sh: %v\n%s", err, stderr.String())
			return
		}
		istioBin = filepath.Join(strings.TrimSpace(string(out)), "pilot-agent")
	})
	if istioErr != nil {
		t.Fatal(istioErr)
	}
	return istioBin
}

func run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// pair is a pod network namespace wired to a "world" namespace that owns
// 10.99.0.0/16 and fd00:99::/64 (any address there answers).
type pair struct {
	pod, world string
	bin        string
}

func newPair(t *testing.T) *pair {
	t.Helper()
	id := rand.String(6)
	p := &pair{pod: "kmt-pod-" + id, world: "kmt-world-" + id, bin: binaries(t)}
	run(t, "ip", "netns", "add", p.pod)
	t.Cleanup(func() {
		_ = exec.Command("ip", "netns", "del", p.pod).Run()
		_ = os.RemoveAll("/etc/netns/" + p.pod)
	})
	run(t, "ip", "netns", "add", p.world)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", p.world).Run() })
	for _, c := range [][]string{
		{"ip", "-n", p.pod, "link", "add", "eth0", "type", "veth", "peer", "name", "w0", "netns", p.world},
		{"ip", "-n", p.pod, "addr", "add", podV4 + "/24", "dev", "eth0"},
		{"ip", "-n", p.pod, "addr", "add", podV6 + "/64", "dev", "eth0", "nodad"},
		{"ip", "-n", p.pod, "link", "set", "eth0", "up"},
		{"ip", "-n", p.pod, "link", "set", "lo", "up"},
		{"ip", "-n", p.pod, "route", "add", "default", "via", worldV4},
		{"ip", "-n", p.pod, "-6", "route", "add", "default", "via", worldV6},
		{"ip", "-n", p.world, "addr", "add", worldV4 + "/24", "dev", "w0"},
		{"ip", "-n", p.world, "addr", "add", worldV6 + "/64", "dev", "w0", "nodad"},
		{"ip", "-n", p.world, "link", "set", "w0", "up"},
		{"ip", "-n", p.world, "link", "set", "lo", "up"},
		{"ip", "-n", p.world, "route", "add", "local", "10.99.0.0/16", "dev", "lo"},
		{"ip", "-n", p.world, "-6", "route", "add", "local", "fd00:99::/64", "dev", "lo"},
		// Answering UDP from an IPv6 address only routed as local needs it assigned.
		{"ip", "-n", p.world, "addr", "add", "fd00:99::5/128", "dev", "lo", "nodad"},
		{"ip", "-n", p.world, "addr", "add", "fd00:99::7/128", "dev", "lo", "nodad"},
		{"ip", "-n", p.world, "addr", "add", "fd00:99::53/128", "dev", "lo", "nodad"},
	} {
		run(t, c...)
	}
	p.resolv(t, bothNameservers)
	return p
}

// resolv sets the pod's DNS servers: ip netns exec bind-mounts
// /etc/netns/<pod>/resolv.conf over /etc/resolv.conf.
func (p *pair) resolv(t *testing.T, servers []string) {
	t.Helper()
	if err := os.MkdirAll("/etc/netns/"+p.pod, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range servers {
		b.WriteString("nameserver " + s + "\n")
	}
	if err := os.WriteFile("/etc/netns/"+p.pod+"/resolv.conf", []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// listen starts a probe listener in namespace ns, as uid (0 for root), and
// stops it at the end.
func (p *pair) listen(t *testing.T, ns, name string, uid int, transparent bool, ports ...string) {
	t.Helper()
	args := []string{"netns", "exec", ns}
	if uid != 0 {
		id := fmt.Sprint(uid)
		args = append(args, "setpriv", "--reuid="+id, "--regid="+id, "--clear-groups")
	}
	args = append(args, filepath.Join(p.bin, "probe"), "listen", name)
	if transparent {
		args = append(args, "-transparent")
	}
	cmd := exec.Command("ip", append(args, ports...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("listener %s in %s did not start: %q %v", name, ns, line, err)
	}
}

// connection is one real connection, and the trace SPEC that describes it.
type connection struct {
	out   bool
	proto string
	dst   string
	port  int
	uid   int
}

func (c connection) spec() string {
	host := c.dst
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if c.out {
		return fmt.Sprintf("out:%s:%d/%s,uid=%d,gid=%d", host, c.port, c.proto, c.uid, c.uid)
	}
	return fmt.Sprintf("in:%s:%d/%s", host, c.port, c.proto)
}

// send makes the connection for real and returns what answered ("pod:15001", "world:443", …).
func (p *pair) send(t *testing.T, c connection) string {
	t.Helper()
	probe := filepath.Join(p.bin, "probe")
	var cmd *exec.Cmd
	if c.out {
		id := fmt.Sprint(c.uid)
		cmd = exec.Command("ip", "netns", "exec", p.pod, "setpriv", "--reuid="+id, "--regid="+id, "--clear-groups", probe, "connect", c.proto, c.dst, fmt.Sprint(c.port))
	} else {
		cmd = exec.Command("ip", "netns", "exec", p.world, probe, "connect", c.proto, c.dst, fmt.Sprint(c.port))
	}
	out, _ := cmd.CombinedOutput()
	return strings.TrimSpace(string(out))
}

// landed turns what answered into a trace verdict and port.
func landed(reply string, c connection) (string, int) {
	name, port, ok := strings.Cut(reply, ":")
	if !ok || strings.HasPrefix(reply, "error") {
		return "no answer (" + reply + ")", 0
	}
	if name == "world" || port == fmt.Sprint(c.port) {
		return "direct", 0
	}
	n, _ := strconv.Atoi(port)
	return "redirect", n
}

type captureCase struct {
	name      string
	args      string
	legacy    bool
	dualStack bool
	// v6Pod: the pod has an IPv6 address beside its IPv4 one but no
	// --dual-stack: its IPv6 rules are dumped too, and must be none.
	v6Pod bool
	// nameservers in the pod's resolv.conf; both families when empty.
	nameservers []string
	extra       []connection
}

var bothNameservers = []string{"10.99.0.53", "fd00:99::53"}

const tproxyArgs = `-p 15001 -z 15006 -u 1337 -m TPROXY -i "*" -x "" -b "*" -d 15090,15021,15020`

var v6Connections = []connection{
	{out: true, proto: "tcp", dst: "fd00:99::5", port: 443, uid: 0},
	{out: true, proto: "tcp", dst: "fd00:99::5", port: 443, uid: 1337},
	{out: false, proto: "tcp", dst: podV6, port: 8080},
}

var baseConnections = []connection{
	{out: true, proto: "tcp", dst: "10.99.0.5", port: 443, uid: 0},
	{out: true, proto: "tcp", dst: "10.99.0.5", port: 443, uid: 1337},
	{out: true, proto: "tcp", dst: "10.99.0.5", port: 443, uid: 1338},
	{out: true, proto: "tcp", dst: "10.99.1.5", port: 8080, uid: 0},
	{out: true, proto: "tcp", dst: "10.99.1.5", port: 9090, uid: 0},
	{out: true, proto: "tcp", dst: "10.99.0.5", port: 9090, uid: 0},
	{out: true, proto: "tcp", dst: podV4, port: 8080, uid: 0},
	{out: true, proto: "tcp", dst: "127.0.0.1", port: 8080, uid: 0},
	{out: true, proto: "udp", dst: "10.99.0.53", port: 53, uid: 0},
	{out: true, proto: "tcp", dst: "10.99.0.53", port: 53, uid: 0},
	{out: true, proto: "udp", dst: "10.99.0.7", port: 53, uid: 0},
	{out: true, proto: "udp", dst: "10.99.0.53", port: 53, uid: 1337},
	{out: false, proto: "tcp", dst: podV4, port: 8080},
	{out: false, proto: "tcp", dst: podV4, port: 9090},
	{out: false, proto: "tcp", dst: podV4, port: 15021},
}

const defaultArgs = `-p 15001 -z 15006 -u 1337 -m REDIRECT -i "*" -x "" -b "*" -d 15090,15021,15020`

var captureCases = []captureCase{
	{name: "default", args: defaultArgs},
	{name: "exclude-cidr", args: `-p 15001 -z 15006 -u 1337 -m REDIRECT -i "*" -x 10.99.1.0/24 -b "*" -d 15090,15021,15020`},
	{name: "include-cidr-list", args: `-p 15001 -z 15006 -u 1337 -m REDIRECT -i 10.99.0.0/24 -x "" -b "*" -d 15090,15021,15020`},
	{name: "exclude-outbound-port", args: defaultArgs + " -o 9090"},
	{name: "inbound-port-list", args: `-p 15001 -z 15006 -u 1337 -m REDIRECT -i "*" -x "" -b 8080 -d 15090,15021,15020`},
	{name: "inbound-exclude-ports", args: `-p 15001 -z 15006 -u 1337 -m REDIRECT -i "*" -x "" -b "*" -d 15090,15021,15020,9090`},
	{name: "include-outbound-ports", args: `-p 15001 -z 15006 -u 1337 -m REDIRECT -i 10.99.0.0/24 -x "" -b "*" -d 15090,15021,15020 -q 9090`},
	{name: "dns-capture", args: defaultArgs + " --redirect-dns"},
	{name: "capture-all-dns", args: defaultArgs + " --redirect-dns --capture-all-dns"},
	{name: "tproxy", args: `-p 15001 -z 15006 -u 1337 -m TPROXY -i "*" -x "" -b "*" -d 15090,15021,15020`},
	{name: "dual-stack", args: defaultArgs + " --dual-stack", dualStack: true, extra: []connection{
		{out: true, proto: "tcp", dst: "fd00:99::5", port: 443, uid: 0},
		{out: true, proto: "tcp", dst: "fd00:99::5", port: 443, uid: 1337},
		{out: true, proto: "tcp", dst: podV6, port: 8080, uid: 0},
		{out: false, proto: "tcp", dst: podV6, port: 8080},
		{out: false, proto: "tcp", dst: podV6, port: 15021},
	}},
	{name: "dual-stack-dns", args: defaultArgs + " --dual-stack --redirect-dns", dualStack: true, extra: []connection{
		{out: true, proto: "udp", dst: "fd00:99::53", port: 53, uid: 0},
		{out: true, proto: "udp", dst: "fd00:99::7", port: 53, uid: 0},
	}},
	{name: "legacy-backend", args: defaultArgs + " --force-iptables-binary legacy", legacy: true},
	{name: "kube-virt-interfaces", args: defaultArgs + " -k eth0"},
	{name: "exclude-interfaces", args: defaultArgs + " -c eth0"},
	{name: "uid-gid-lists", args: `-p 15001 -z 15006 -u 1337,1338 -g 1337,1338 -m REDIRECT -i "*" -x "" -b "*" -d 15090,15021,15020`},
	{name: "drop-invalid", args: defaultArgs + " --drop-invalid"},
	{name: "tproxy-inbound-port-list", args: `-p 15001 -z 15006 -u 1337 -m TPROXY -i "*" -x "" -b 8080,15021 -d 15090`},
	{name: "tproxy-exclude-cidr", args: `-p 15001 -z 15006 -u 1337 -m TPROXY -i "*" -x 10.99.1.0/24 -b "*" -d 15090,15021,15020`},
	{name: "tproxy-dns", args: tproxyArgs + " --redirect-dns"},
	{name: "tproxy-legacy", args: tproxyArgs + " --force-iptables-binary legacy", legacy: true},
	{name: "tproxy-drop-invalid", args: tproxyArgs + " --drop-invalid"},
	{name: "dns-uid-gid-lists", args: `-p 15001 -z 15006 -u 1337,1338 -g 1337,1338 -m REDIRECT -i "*" -x "" -b "*" -d 15090,15021,15020 --redirect-dns`},
	{name: "dns-capture-all-legacy", args: defaultArgs + " --redirect-dns --capture-all-dns --force-iptables-binary legacy", legacy: true},
	{name: "dual-stack-dns-v4-nameserver-only", args: defaultArgs + " --dual-stack --redirect-dns", dualStack: true, nameservers: []string{"10.99.0.53"},
		extra: append([]connection{{out: true, proto: "udp", dst: "fd00:99::53", port: 53, uid: 0}}, v6Connections...)},
	{name: "dual-stack-dns-v6-nameserver-only", args: defaultArgs + " --dual-stack --redirect-dns", dualStack: true, nameservers: []string{"fd00:99::53"},
		extra: append([]connection{{out: true, proto: "udp", dst: "fd00:99::53", port: 53, uid: 0}}, v6Connections...)},
	{name: "v4-v6-pod-without-dual-stack", args: defaultArgs, v6Pod: true, extra: v6Connections},
	{name: "v4-v6-pod-without-dual-stack-dns", args: defaultArgs + " --redirect-dns", v6Pod: true,
		extra: append([]connection{{out: true, proto: "udp", dst: "fd00:99::53", port: 53, uid: 0}}, v6Connections...)},
	{name: "loopback-include-cidr", args: `-p 15001 -z 15006 -u 1337 -m REDIRECT -i 127.0.0.1/32,10.99.0.0/24 -x "" -b "*" -d 15090,15021,15020`},
	{name: "include-list-with-virt-interface", args: `-p 15001 -z 15006 -u 1337 -m REDIRECT -i 10.99.0.0/24 -x "" -b "*" -d 15090,15021,15020 -k eth0`},
	{name: "outbound-ports-include-and-exclude", args: `-p 15001 -z 15006 -u 1337 -m REDIRECT -i 10.99.0.0/24 -x "" -b "*" -d 15090,15021,15020 -q 8080 -o 9090`},
	{name: "no-inbound-capture", args: `-p 15001 -z 15006 -u 1337 -m REDIRECT -i "*" -x "" -b "" -d 15090,15021,15020`},
	{name: "no-outbound-capture", args: `-p 15001 -z 15006 -u 1337 -m REDIRECT -i "" -x "" -b "*" -d 15090,15021,15020`},
}

// For each istio-init flag combination: the stand-in istio-iptables loads
// the rules with the real iptables-restore; iptables-save -c dumps them; the
// parsed dump must be exactly what --expect-args derives from the same
// arguments; and every --trace prediction must be where a real connection,
// sent as the given uid, actually landed.
func TestCaptureRulesAgainstTheKernel(t *testing.T) {
	requireRoot(t)
	total := 0
	for _, tc := range captureCases {
		t.Run(tc.name, func(t *testing.T) {
			p, args, servers := tc.apply(t, "")

			backend := "nft"
			if tc.legacy {
				backend = "legacy"
			}
			dumps := map[bool]*capture.Ruleset{}
			for _, v6 := range []bool{false, true} {
				if v6 && !tc.dualStack && !tc.v6Pod {
					continue
				}
				save := "iptables-" + backend + "-save"
				if v6 {
					save = "ip6tables-" + backend + "-save"
				}
				raw := run(t, "ip", "netns", "exec", p.pod, save, "-c")
				rs, err := capture.ParseSave([]byte(raw))
				if err != nil {
					t.Fatalf("parse %s: %v\n%s", save, err, raw)
				}
				if rs.Backend != backend {
					t.Errorf("%s: backend %q, want %q", save, rs.Backend, backend)
				}
				dumps[v6] = rs
				cfg, err := capture.ParseCaptureArgs(args, nil)
				if err != nil {
					t.Fatal(err)
				}
				cfg.PodAddrs = []netip.Addr{netip.MustParseAddr(podV4), netip.MustParseAddr(podV6)}
				drift, err := capture.CompareRules(rs, capture.ExpectedRules(cfg, v6, servers))
				if err != nil {
					t.Fatal(err)
				}
				if len(drift.Missing)+len(drift.Extra)+len(drift.Reordered) > 0 {
					t.Errorf("--expect-args does not reproduce the loaded %s rules:\nmissing %q\nextra %q\nreordered %q\n%s", save, drift.Missing, drift.Extra, drift.Reordered, raw)
				}
			}

			total += tc.checkTraces(t, p, func(v6 bool) *capture.Ruleset { return dumps[v6] })
		})
	}
	testreport.Count(t, "%d istio-iptables configurations written by Istio's own binary, equal to --expect-args; %d real connections landed where --trace said", len(captureCases), total)
}

// Istio's native nftables mode, from Istio's own binary: every configuration
// above that does not pick an iptables backend, run with --native-nftables.
// The inet istio-proxy-* tables it writes, read back with `nft list
// ruleset`, must parse into rules kubectl-mesh understands completely (no
// match it cannot evaluate), equal what --expect-args predicts for that
// mode, and every real connection must land where --trace through them says.
func TestNativeNftablesAgainstTheKernel(t *testing.T) {
	requireRoot(t)
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft is missing (hack/cluster/deps.sh installs nftables): %v", err)
	}
	configs, conns, rules := 0, 0, 0
	for _, tc := range captureCases {
		if tc.legacy {
			continue
		}
		configs++
		t.Run(tc.name, func(t *testing.T) {
			p, args, servers := tc.apply(t, " --native-nftables")
			raw := run(t, "ip", "netns", "exec", p.pod, "nft", "list", "ruleset")
			v4, v6Rules, ok, err := capture.ParseNftRuleset([]byte(raw))
			if err != nil || !ok {
				t.Fatalf("parse nft list ruleset (istio tables found: %v): %v\n%s", ok, err, raw)
			}
			for _, rs := range []*capture.Ruleset{v4, v6Rules} {
				rs.Annotate(&capture.PodContext{ProxyUID: "1337"})
				for _, tb := range rs.Tables {
					for _, c := range tb.Chains {
						for _, r := range c.Rules {
							if len(r.Match.Unknown) > 0 || r.Annotation == "" {
								t.Errorf("%s %s/%s: %q: not understood (%v)", rs.Family, tb.Name, c.Name, r.Spec, r.Match.Unknown)
							}
						}
					}
				}
			}
			rules += v4.RuleCount()
			cfg, err := capture.ParseCaptureArgs(args, nil)
			if err != nil {
				t.Fatal(err)
			}
			cfg.PodAddrs = []netip.Addr{netip.MustParseAddr(podV4), netip.MustParseAddr(podV6)}
			want4, want6, err := capture.ExpectedNftRules(cfg, servers)
			if err != nil {
				t.Fatalf("expected rules: %v", err)
			}
			for _, v := range []struct {
				rs   *capture.Ruleset
				want map[string][]*capture.Rule
			}{{v4, want4}, {v6Rules, want6}} {
				if d := capture.CompareNftRules(v.rs, v.want); len(d.Missing)+len(d.Extra)+len(d.Reordered) > 0 {
					t.Errorf("%s: --expect-args does not reproduce the native rules:\nmissing %q\nextra %q\nreordered %q\n%s", v.rs.Family, d.Missing, d.Extra, d.Reordered, raw)
				}
			}
			conns += tc.checkTraces(t, p, func(v6 bool) *capture.Ruleset {
				if v6 {
					return v6Rules
				}
				return v4
			})
		})
	}
	testreport.Count(t, "native nftables: %d configurations written by Istio's own binary, %d IPv4 rules all understood, equal to --expect-args; %d real connections landed where --trace said", configs, rules, conns)
}

// apply makes a pod/world pair, writes the pod's resolv.conf, runs Istio's
// istio-iptables with the case's arguments (and extra) in the pod's
// namespace, and starts the listeners connections land on. It returns the
// pair, the arguments and the nameservers.
func (tc captureCase) apply(t *testing.T, extra string) (*pair, []string, []string) {
	t.Helper()
	p := newPair(t)
	args, err := capture.SplitShell(tc.args + extra)
	if err != nil {
		t.Fatal(err)
	}
	servers := tc.nameservers
	if len(servers) == 0 {
		servers = bothNameservers
	}
	p.resolv(t, servers)
	run(t, append([]string{"ip", "netns", "exec", p.pod, istioAgent(t), "istio-iptables"}, args...)...)
	transparent := strings.Contains(tc.args, "TPROXY")
	p.listen(t, p.pod, "pod", 0, transparent, "15001", "15006", "8080", "9090", "15021")
	// The DNS proxy runs as the proxy's uid: its answers must fall in the
	// conntrack zone the raw table gives the proxy's DNS traffic.
	p.listen(t, p.pod, "pod", 1337, false, "15053")
	p.listen(t, p.world, "world", 0, false, "443", "8080", "9090", "53")
	return p, args, servers
}

// checkTraces sends the case's connections for real and checks that each
// lands where a trace through rules(family) says. It returns how many it sent.
func (tc captureCase) checkTraces(t *testing.T, p *pair, rules func(v6 bool) *capture.Ruleset) int {
	t.Helper()
	n := 0
	podIPs := []netip.Addr{netip.MustParseAddr(podV4), netip.MustParseAddr(podV6)}
	for _, c := range append(append([]connection{}, baseConnections...), tc.extra...) {
		pkt, err := capture.ParseTraceSpec(c.spec(), podIPs)
		if err != nil {
			t.Fatal(err)
		}
		tr := rules(pkt.Dst.Is6()).Trace(pkt)
		reply := p.send(t, c)
		verdict, port := landed(reply, c)
		want := tr.Verdict
		if want == "tproxy" {
			want = "redirect" // a transparent listener answered
		}
		if verdict != want || port != tr.Port {
			var path []string
			for _, s := range tr.Path {
				path = append(path, s.Table+"/"+s.Chain+": "+s.Rule)
			}
			t.Errorf("%s: landed on %q (%s %d), --trace said %s %d:\n  %s", c.spec(), reply, verdict, port, tr.Verdict, tr.Port, strings.Join(path, "\n  "))
		}
		n++
	}
	return n
}
