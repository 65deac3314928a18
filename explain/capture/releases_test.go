package capture

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// releaseSet is one line of testdata/releases/sets.tsv.
type releaseSet struct {
	name        string
	addrs       []netip.Addr
	nameservers []string
	args        []string
}

func readReleaseSets(t *testing.T) []releaseSet {
	t.Helper()
	b, err := os.ReadFile("testdata/releases/sets.tsv")
	if err != nil {
		t.Fatal(err)
	}
	var sets []releaseSet
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("sets.tsv: %q: want 4 tab-separated fields", line)
		}
		s := releaseSet{name: f[0]}
		for _, a := range strings.Split(f[1], ",") {
			s.addrs = append(s.addrs, netip.MustParseAddr(a))
		}
		if f[2] != "-" {
			s.nameservers = strings.Split(f[2], ",")
		}
		if s.args, err = SplitShell(f[3]); err != nil {
			t.Fatal(err)
		}
		sets = append(sets, s)
	}
	return sets
}

// TestRuleModelPerRelease: for every Istio release under testdata/releases
// (each the real istio-iptables of that release, run with every argument
// set of sets.tsv in a fresh network namespace), the model of that release
// predicts exactly the rules the binary wrote: both families of iptables,
// and the native nftables tables where the release has them.
func TestRuleModelPerRelease(t *testing.T) {
	sets := readReleaseSets(t)
	dirs, err := filepath.Glob("testdata/releases/*")
	if err != nil {
		t.Fatal(err)
	}
	releases, dumps, rules, agree := 0, 0, 0, 0
	perRelease := map[string]int{}
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		release := filepath.Base(dir)
		model := NewestRuleModel()
		if release != "current" {
			if model, err = RuleModelFor(release); err != nil {
				t.Errorf("%s: %v", release, err)
				continue
			}
		}
		releases++
		for _, s := range sets {
			base := filepath.Join(dir, s.name)
			if _, err := os.Stat(base + ".refused"); err == nil {
				t.Errorf("%s %s: the real binary refused the set (see %s.refused)", release, s.name, base)
				continue
			}
			cfg, err := ParseCaptureArgs(s.args, nil)
			if err != nil {
				t.Errorf("%s %s: %v", release, s.name, err)
				continue
			}
			cfg.PodAddrs, cfg.Model = s.addrs, model
			if strings.HasPrefix(s.name, "native-") {
				raw, err := os.ReadFile(base + ".nft")
				if os.IsNotExist(err) {
					continue // the release has no native nftables
				}
				if err != nil {
					t.Fatal(err)
				}
				v4, v6, ok, err := ParseNftRuleset(raw)
				if err != nil || !ok {
					t.Errorf("%s %s: %v (istio tables: %v)", release, s.name, err, ok)
					continue
				}
				want4, want6, err := ExpectedNftRules(cfg, s.nameservers)
				if err != nil {
					t.Errorf("%s %s: the model refuses what the binary wrote: %v", release, s.name, err)
					continue
				}
				for _, v := range []struct {
					rs   *Ruleset
					want map[string][]*Rule
				}{{v4, want4}, {v6, want6}} {
					dumps++
					rules += v.rs.RuleCount()
					d := CompareNftRules(v.rs, v.want)
					if n := len(d.Missing) + len(d.Extra) + len(d.Reordered); n > 0 {
						t.Errorf("%s %s (%s, nft): missing %q extra %q reordered %q", release, s.name, v.rs.Family, d.Missing, d.Extra, d.Reordered)
						continue
					}
					agree++
					perRelease[release]++
				}
				continue
			}
			for _, fam := range []string{"v4", "v6"} {
				raw, err := os.ReadFile(base + "." + fam + ".save")
				if err != nil {
					t.Errorf("%s %s: %v", release, s.name, err)
					continue
				}
				var rs *Ruleset
				if len(strings.TrimSpace(string(raw))) == 0 {
					// Before 1.25 a pod without IPv6 gets no ip6tables
					// tables at all: the dump is empty.
					rs = &Ruleset{Family: map[string]string{"v4": "ipv4", "v6": "ipv6"}[fam]}
				} else if rs, err = ParseSave(raw); err != nil {
					t.Errorf("%s %s.%s: %v", release, s.name, fam, err)
					continue
				}
				dumps++
				rules += rs.RuleCount()
				d, err := CompareRules(rs, ExpectedRules(cfg, fam == "v6", s.nameservers))
				if err != nil {
					t.Fatal(err)
				}
				if n := len(d.Missing) + len(d.Extra) + len(d.Reordered); n > 0 {
					t.Errorf("%s %s.%s: missing %q extra %q reordered %q", release, s.name, fam, d.Missing, d.Extra, d.Reordered)
					continue
				}
				agree++
				perRelease[release]++
			}
		}
	}
	var per []string
	for r, n := range perRelease {
		per = append(per, r+" "+strconv.Itoa(n))
	}
	sort.Strings(per)
	testreport.Count(t, "rule model per Istio release: %d of %d real dumps (%d releases, %d rules) predicted exactly [%s]",
		agree, dumps, releases, rules, strings.Join(per, ", "))
	if releases < 7 {
		t.Errorf("only %d releases under testdata/releases: want at least 7 (1.20 to current)", releases)
	}
}

// Ambient mode's in-pod rules are compared only for the istio-cni release
// whose rule writer the model was checked against; another release, or an
// unread one, is not compared (drift unknown, the reason said).
func TestAmbientRulesOnlyForTheModelledRelease(t *testing.T) {
	dump, err := os.ReadFile("testdata/istio-default.nft.save")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		release, from string
		compared      bool
	}{
		{"", "", true},
		{"1.31-dev", "image tag of the istio-cni agent", true},
		{"1.24.6", "image tag of the istio-cni agent", false},
		{"", "no istio-cni agent pod on node n1", false},
	} {
		rs, err := ParseSave(dump)
		if err != nil {
			t.Fatal(err)
		}
		a := AmbientConfigFor(nil, nil)
		a.Release, a.ReleaseFrom = tc.release, tc.from
		rep, err := ExplainCapture(CaptureInput{Dumps: []*Ruleset{rs}, Ambient: a})
		if err != nil {
			t.Fatal(err)
		}
		if compared := rep.Drift != nil; compared != tc.compared || (!compared && rep.NoRuleModel == "") {
			t.Errorf("istio-cni %q (%s): compared %v (noRuleModel %q), want %v", tc.release, tc.from, compared, rep.NoRuleModel, tc.compared)
		}
	}
}

// A pod's release is read from istio-init's image tag, else the proxy's,
// else a revision named after its release; else it is unknown, and why.
func TestIstioVersionFromPod(t *testing.T) {
	pod := func(initImage, proxyImage, status string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
		if initImage != "" {
			p.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: initImage}}
		}
		if proxyImage != "" {
			p.Spec.Containers = []corev1.Container{{Name: "istio-proxy", Image: proxyImage}}
		}
		if status != "" {
			p.Annotations["sidecar.istio.io/status"] = status
		}
		return p
	}
	for _, tc := range []struct {
		pod          *corev1.Pod
		version, why string
	}{
		{pod("docker.io/istio/proxyv2:1.24.6", "docker.io/istio/proxyv2:1.26.1", ""), "1.24.6", "istio-init"},
		{pod("", "registry:5000/istio/proxyv2:1.22.3-distroless", ""), "1.22.3-distroless", "istio-proxy"},
		{pod("proxyv2@sha256:abcd", "proxyv2:latest", `{"revision":"1-23-2"}`), "1.23.2", "revision 1-23-2"},
		{pod("proxyv2:latest", "", `{"revision":"canary"}`), "", "no image tag or revision names an Istio version"},
		{pod("", "", ""), "", "no Istio container"},
	} {
		v, why := IstioVersionFromPod(tc.pod)
		if v != tc.version || !strings.Contains(why, tc.why) {
			t.Errorf("got %q (%s), want %q (%s)", v, why, tc.version, tc.why)
		}
		if v != "" {
			if _, err := RuleModelFor(v); err != nil {
				t.Errorf("%q: %v", v, err)
			}
		}
	}
}

// In a fleet audit, a pod of a release outside the model is not drift: its
// line says unknown (Drift null) and why, and ranks with the others that
// have a hazard, not with the broken ones.
func TestAuditLineOfAnUnmodelledRelease(t *testing.T) {
	dump, err := os.ReadFile("testdata/outside/1.6/default.v4.save")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := ParseSave(dump)
	if err != nil {
		t.Fatal(err)
	}
	args, _ := SplitShell(`-p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -x '' -b '*' -d 15090,15021,15020`)
	rep, err := ExplainCapture(CaptureInput{Dumps: []*Ruleset{rs}, ExpectArgs: args, ExpectFrom: "container istio-init's arguments",
		IstioVersion: "1.6.0", IstioVersionFrom: "istio-init's image docker.io/istio/proxyv2:1.6.0"})
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(rep, AuditTraces{}, "iptables: nft")
	if s.Drift != nil || !strings.Contains(s.NoRuleModel, "no rule model for Istio 1.6.0") || s.Worst() == 0 {
		t.Errorf("drift %v, noRuleModel %q, worst %d", s.Drift, s.NoRuleModel, s.Worst())
	}
	rep, err = ExplainCapture(CaptureInput{Dumps: []*Ruleset{rs}, ExpectArgs: args, ExpectFrom: "container istio-init's arguments",
		IstioVersion: "1.24.6", IstioVersionFrom: "istio-init's image docker.io/istio/proxyv2:1.24.6"})
	if err != nil {
		t.Fatal(err)
	}
	if s := Summarize(rep, AuditTraces{}, "iptables: nft"); s.Drift == nil || !*s.Drift || s.Release != "1.24.6" {
		t.Errorf("the 1.6 rules read as 1.24's: drift %v release %q", s.Drift, s.Release)
	}
}

// A release of another major (2.0) is a version outside the model: not
// compared (unknown), never a usage error; a string that is no version is.
func TestRuleModelForAnotherMajor(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		version string
		noModel bool // else a *VersionError
	}{{"2.0", true}, {"v2.1.3-rc.0", true}, {"1.6", true}, {"2.x", false}, {"banana", false}, {"0.9", false}} {
		_, err := RuleModelFor(tc.version)
		var nm *NoModelError
		var ve *VersionError
		checks++
		if tc.noModel && !errors.As(err, &nm) || !tc.noModel && !errors.As(err, &ve) {
			t.Errorf("%s: %v (%T)", tc.version, err, err)
		}
	}
	t.Logf("%d checks", checks)
}
