package netns

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	krand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// combination is one random, valid istio-iptables invocation: its flags and
// the pod's DNS servers.
type combination struct {
	args        []string
	nameservers []string
	legacy      bool
	// native: --native-nftables (Istio's own nftables tables, read with nft)
	native bool
	// addrs: the pod's addresses (IPv4 and IPv6, or one of them): they
	// decide whether istio-iptables writes IPv6 rules at all.
	addrs []string
}

func (c combination) String() string {
	return strings.Join(c.args, " ") + " [pod " + strings.Join(c.addrs, ",") + ", nameservers " + strings.Join(c.nameservers, ",") + "]"
}

// pickSome returns a random, possibly empty, comma-joined subset of from.
func pickSome(r *rand.Rand, from []string) string {
	var out []string
	for _, v := range from {
		if r.IntN(3) == 0 {
			out = append(out, v)
		}
	}
	return strings.Join(out, ",")
}

func randomCombination(r *rand.Rand) combination {
	c := combination{}
	add := func(flag, v string) { c.args = append(c.args, flag, v) }
	add("-p", "15001")
	add("-z", "15006")
	uids := []string{"1337", "1337,1338"}[r.IntN(2)]
	add("-u", uids)
	switch r.IntN(3) {
	case 0:
		add("-g", uids)
	case 1:
		add("-g", "1337")
	}
	add("-m", []string{"REDIRECT", "TPROXY"}[r.IntN(2)])
	switch r.IntN(4) {
	case 0, 1:
		add("-i", "*")
	case 2:
		add("-i", "")
	default:
		add("-i", pickSome(r, []string{"10.99.0.0/24", "10.96.0.0/12", "192.168.0.0/16", "127.0.0.1/32", "fd00:99::/64"}))
	}
	add("-x", pickSome(r, []string{"10.99.1.0/24", "10.0.0.0/8", "169.254.169.254/32", "fd00:1::/64"}))
	switch r.IntN(4) {
	case 0, 1:
		add("-b", "*")
	case 2:
		add("-b", "")
	default:
		add("-b", pickSome(r, []string{"8080", "9090", "15021", "443"}))
	}
	add("-d", pickSome(r, []string{"15090", "15021", "15020", "8081"}))
	if v := pickSome(r, []string{"9090", "25"}); v != "" {
		add("-o", v)
	}
	if v := pickSome(r, []string{"8080", "3306"}); v != "" {
		add("-q", v)
	}
	if r.IntN(6) == 0 {
		add("-k", "eth0")
	}
	if r.IntN(8) == 0 {
		add("-c", "eth1")
	}
	for _, f := range []string{"--redirect-dns", "--capture-all-dns", "--dual-stack", "--drop-invalid"} {
		if r.IntN(3) == 0 {
			c.args = append(c.args, f)
		}
	}
	if r.IntN(4) == 0 {
		c.legacy = true
		add("--force-iptables-binary", "legacy")
	}
	c.nameservers = [][]string{{"10.99.0.53"}, {"fd00:99::53"}, {"10.99.0.53", "fd00:99::53"}, nil,
		{"10.99.0.53", "10.99.0.54"}, {"fd00:99::53", "10.99.0.53", "fd00:99::54"}}[r.IntN(6)]
	c.addrs = [][]string{{podV4, podV6}, {podV4, podV6}, {podV6}, {podV4}}[r.IntN(4)]
	return c
}

// At least 500 random valid combinations of istio-iptables flags, applied by
// Istio's own istio-iptables with the real iptables-restore in a fresh
// network namespace each, dumped with iptables-save (both families), and
// compared with what --expect-args derives from the same flags. Every
// disagreement is printed; the seed is printed so that a run can be repeated
// (KMESH_DIFF_SEED, KMESH_DIFF_COUNT).
func TestExpectedRulesDifferential(t *testing.T) {
	differential(t, "differential", false, func(r *rand.Rand) combination { return randomCombination(r) })
}

// The same for Istio's native nftables mode: at least 500 random
// combinations run with --native-nftables by Istio's own istio-iptables, its
// inet istio-proxy-* tables read back with nft, both families' views
// compared with what kubectl-mesh predicts for that mode.
func TestExpectedNftRulesDifferential(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft is missing (hack/cluster/deps.sh installs nftables): %v", err)
	}
	// Some valid flags make native nftables fail (a jump to a chain that gets
	// no rules): the model must predict those refusals too.
	differential(t, "native nftables differential", true, func(r *rand.Rand) combination {
		c := randomCombination(r)
		if c.legacy {
			c.legacy = false
			c.args = c.args[:len(c.args)-2] // --force-iptables-binary legacy
		}
		c.native = true
		c.args = append(c.args, "--native-nftables")
		return c
	})
}

// differential runs count (500, KMESH_DIFF_COUNT) combinations from gen
// (seed 20261123, KMESH_DIFF_SEED) through Istio's binary and the model;
// refusalsValid: combinations both refuse count as agreement.
func differential(t *testing.T, what string, refusalsValid bool, gen func(*rand.Rand) combination) {
	requireRoot(t)
	agent := istioAgent(t)
	seed := uint64(20261123)
	if v, err := strconv.ParseUint(os.Getenv("KMESH_DIFF_SEED"), 10, 64); err == nil {
		seed = v
	}
	count := 500
	if v, err := strconv.Atoi(os.Getenv("KMESH_DIFF_COUNT")); err == nil && v > 0 {
		count = v
	}
	r := rand.New(rand.NewPCG(seed, seed))
	combos := make([]combination, count)
	for i := range combos {
		combos[i] = gen(r)
	}
	var checked, rules, refused atomic.Int64
	var mu sync.Mutex
	var disagreements []string
	disagree := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		disagreements = append(disagreements, fmt.Sprintf(format, args...))
	}
	work := make(chan combination)
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				n, err := applyAndCompare(agent, c)
				if err != nil {
					disagree("%s\n    %v", c, err)
					continue
				}
				checked.Add(1)
				if n < 0 {
					refused.Add(1)
					continue
				}
				rules.Add(int64(n))
			}
		}()
	}
	for _, c := range combos {
		work <- c
	}
	close(work)
	wg.Wait()
	testreport.Count(t, "%s: %d of %d random istio-iptables combinations (seed %d) compared (%d refused by both), %d rules, %d disagreements",
		what, checked.Load(), count, seed, refused.Load(), rules.Load(), len(disagreements))
	for _, d := range disagreements {
		t.Errorf("disagreement: %s", d)
	}
	if refused.Load() > 0 && !refusalsValid {
		t.Errorf("%d of the generated combinations were refused by istio-iptables: the generator must make valid ones", refused.Load())
	}
}

// applyAndCompare runs istio-iptables with c in a new network namespace and
// compares both families' rules with ExpectedRules. It returns how many rules
// the real binary wrote, or -1 when it and --expect-args both refused the flags.
func applyAndCompare(agent string, c combination) (int, error) {
	ns := "kmt-diff-" + krand.String(6)
	sh := func(args ...string) (string, error) {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	if _, err := sh("ip", "netns", "add", ns); err != nil {
		return 0, err
	}
	defer func() {
		_ = exec.Command("ip", "netns", "del", ns).Run()
		_ = os.RemoveAll("/etc/netns/" + ns)
	}()
	setup := [][]string{{"ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1"}}
	var podAddrs []netip.Addr
	for _, a := range c.addrs {
		ip := netip.MustParseAddr(a)
		podAddrs = append(podAddrs, ip)
		if ip.Is4() {
			setup = append(setup, []string{"ip", "-n", ns, "addr", "add", a + "/24", "dev", "eth0"})
		} else {
			setup = append(setup, []string{"ip", "-n", ns, "addr", "add", a + "/64", "dev", "eth0", "nodad"})
		}
	}
	setup = append(setup, []string{"ip", "-n", ns, "link", "set", "eth0", "up"}, []string{"ip", "-n", ns, "link", "set", "lo", "up"})
	for _, cmd := range setup {
		if _, err := sh(cmd...); err != nil {
			return 0, err
		}
	}
	if err := os.MkdirAll("/etc/netns/"+ns, 0o755); err != nil {
		return 0, err
	}
	var resolv strings.Builder
	for _, s := range c.nameservers {
		resolv.WriteString("nameserver " + s + "\n")
	}
	if err := os.WriteFile("/etc/netns/"+ns+"/resolv.conf", []byte(resolv.String()), 0o644); err != nil {
		return 0, err
	}
	cfg, perr := capture.ParseCaptureArgs(c.args, nil)
	if cfg != nil {
		cfg.PodAddrs = podAddrs
	}
	if perr == nil && c.native {
		// The model's refusal: rules nft will not load.
		_, _, perr = capture.ExpectedNftRules(cfg, c.nameservers)
	}
	// No environment but PATH: istio-iptables reads many of its settings
	// from environment variables too, and the model is given none.
	out, rerr := sh(append([]string{"ip", "netns", "exec", ns, "env", "-i", "PATH=" + os.Getenv("PATH"), agent, "istio-iptables"}, c.args...)...)
	switch {
	case rerr != nil && perr == nil:
		return 0, fmt.Errorf("istio-iptables refused flags --expect-args accepts: %s", lastLine(out))
	case rerr != nil:
		return -1, nil // both refuse
	case perr != nil:
		return 0, fmt.Errorf("--expect-args refuses flags istio-iptables accepts: %v", perr)
	}
	if c.native {
		raw, err := exec.Command("ip", "netns", "exec", ns, "nft", "list", "ruleset").Output()
		if err != nil {
			return 0, fmt.Errorf("nft list ruleset: %v", err)
		}
		v4, v6, ok, err := capture.ParseNftRuleset(raw)
		if err != nil || !ok {
			return 0, fmt.Errorf("parse nft list ruleset (istio tables: %v): %v\n%s", ok, err, raw)
		}
		want4, want6, err := capture.ExpectedNftRules(cfg, c.nameservers)
		if err != nil {
			return 0, err
		}
		var problems []string
		for _, v := range []struct {
			rs   *capture.Ruleset
			want map[string][]*capture.Rule
		}{{v4, want4}, {v6, want6}} {
			drift := capture.CompareNftRules(v.rs, v.want)
			if len(drift.Missing)+len(drift.Extra)+len(drift.Reordered) > 0 {
				problems = append(problems, fmt.Sprintf("%s view: missing %q extra %q reordered %q", v.rs.Family, drift.Missing, drift.Extra, drift.Reordered))
			}
		}
		if len(problems) > 0 {
			return 0, fmt.Errorf("%s\n%s", strings.Join(problems, "\n    "), raw)
		}
		return v4.RuleCount(), nil
	}
	backend := "nft"
	if c.legacy {
		backend = "legacy"
	}
	total := 0
	var problems []string
	for _, v6 := range []bool{false, true} {
		save := "iptables-" + backend + "-save"
		if v6 {
			save = "ip6tables-" + backend + "-save"
		}
		// stdout only: iptables-nft-save warns on stderr when legacy tables exist too.
		raw, err := exec.Command("ip", "netns", "exec", ns, save).Output()
		if err != nil {
			return 0, fmt.Errorf("%s: %v", save, err)
		}
		rs, err := capture.ParseSave(raw)
		if err != nil {
			return 0, fmt.Errorf("parse %s: %v", save, err)
		}
		if rs.RuleCount() > 0 && rs.Backend != backend {
			problems = append(problems, fmt.Sprintf("%s: backend %q, want %q", save, rs.Backend, backend))
		}
		total += rs.RuleCount()
		drift, err := capture.CompareRules(rs, capture.ExpectedRules(cfg, v6, c.nameservers))
		if err != nil {
			return 0, err
		}
		if len(drift.Missing)+len(drift.Extra)+len(drift.Reordered) > 0 {
			problems = append(problems, fmt.Sprintf("%s: missing %q extra %q reordered %q", save, drift.Missing, drift.Extra, drift.Reordered))
		}
	}
	if len(problems) > 0 {
		return 0, fmt.Errorf("%s", strings.Join(problems, "\n    "))
	}
	return total, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
