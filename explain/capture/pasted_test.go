package capture

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// meaning is a ruleset by table and chain: each chain's policy and its
// rules' ruleKeys in order.
type meaning map[string]map[string]*chainMeaning

type chainMeaning struct {
	policy string
	keys   []string
	rules  []*Rule
}

func meaningOf(rs *Ruleset) meaning {
	m := meaning{}
	for _, t := range rs.Tables {
		m[t.Name] = map[string]*chainMeaning{}
		for _, c := range t.Chains {
			cm := &chainMeaning{policy: c.Policy, rules: c.Rules}
			for _, r := range c.Rules {
				cm.keys = append(cm.keys, ruleKey(t.Name, r))
			}
			m[t.Name][c.Name] = cm
		}
	}
	return m
}

// sameMeaning compares two rulesets by meaning: the same chains (a built-in
// chain without rules may be listed by one only: iptables -S lists a table
// iptables-save leaves out), the same policies, the same rules in the same
// order.
func sameMeaning(t *testing.T, what string, want, got *Ruleset) {
	t.Helper()
	w, g := meaningOf(want), meaningOf(got)
	tables := map[string]bool{}
	for n := range w {
		tables[n] = true
	}
	for n := range g {
		tables[n] = true
	}
	for table := range tables {
		chains := map[string]bool{}
		for n := range w[table] {
			chains[n] = true
		}
		for n := range g[table] {
			chains[n] = true
		}
		for chain := range chains {
			wc, gc := w[table][chain], g[table][chain]
			switch {
			case wc == nil && gc.policy != "" && len(gc.keys) == 0, gc == nil && wc.policy != "" && len(wc.keys) == 0:
				continue // an empty built-in chain one form lists and the other does not
			case wc == nil || gc == nil:
				t.Errorf("%s: %s/%s is in one form only (iptables-save %v, pasted %v)", what, table, chain, wc != nil, gc != nil)
				continue
			}
			if wc.policy != gc.policy {
				t.Errorf("%s: %s/%s policy %q, iptables-save says %q", what, table, chain, gc.policy, wc.policy)
			}
			if strings.Join(wc.keys, "\n") != strings.Join(gc.keys, "\n") {
				t.Errorf("%s: %s/%s rules differ:\n  iptables-save: %s\n  pasted:        %s", what, table, chain,
					strings.Join(wc.keys, "\n                 "), strings.Join(gc.keys, "\n                 "))
			}
		}
	}
}

// ipRound is a counter as iptables -L prints it without -x: exact up to
// 99999, then rounded to thousands, millions, … (4 digits at most).
func ipRound(n uint64) uint64 {
	if n <= 99999 {
		return n
	}
	unit := uint64(1)
	for i := 0; i < 4; i++ {
		n = (n + 500) / 1000
		unit *= 1000
		if n <= 9999 || i == 3 {
			break
		}
	}
	return n * unit
}

// TestPastedForms: every listing hack/testdata/pasted-forms.sh made with the
// real iptables tools (-S and -L in four variants, with and without the
// command lines pasted before each table) reads to the rules iptables-save
// printed of the same network namespace, and -L's counters to the saved
// ones: exact with -x, rounded as iptables rounds them without.
func TestPastedForms(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "pasted", "*"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no pasted fixtures (hack/testdata/pasted-forms.sh makes them): %v", err)
	}
	forms := map[string]bool{}
	checked, rules, rounded := 0, 0, 0
	for _, dir := range dirs {
		name := filepath.Base(dir)
		src, err := ParseSave(readDump(t, filepath.Join("pasted", name, "source.save")))
		if err != nil {
			t.Fatalf("%s/source.save: %v", name, err)
		}
		// The namespace held the fixture's rules: source.save means what the
		// fixture does.
		if b, err := os.ReadFile(filepath.Join("testdata", strings.TrimSuffix(name, ".counted")+".save")); err == nil {
			orig, err := ParseSave(b)
			if err != nil {
				t.Fatal(err)
			}
			sameMeaning(t, name+"/source.save against its fixture", orig, src)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.txt"))
		if len(files) != 10 {
			t.Errorf("%s: %d listings, want 10", name, len(files))
		}
		for _, file := range files {
			base := filepath.Base(file)
			what := name + "/" + base
			form := strings.TrimSuffix(strings.TrimSuffix(base, ".txt"), ".prompt")
			forms[strings.TrimSuffix(base, ".txt")] = true
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			d, err := ParseDump(b)
			if err != nil {
				t.Errorf("%s: %v", what, err)
				continue
			}
			wantForm := FormList
			if form == "S" {
				wantForm = FormListRules
			}
			if d.Form != wantForm || len(d.Rulesets) != 1 {
				t.Errorf("%s: form %q, %d rulesets; want %q, 1", what, d.Form, len(d.Rulesets), wantForm)
				continue
			}
			rs := d.Rulesets[0]
			if rs.Form != wantForm || rs.Family != src.Family {
				t.Errorf("%s: ruleset form %q family %q, want %q %q", what, rs.Form, rs.Family, wantForm, src.Family)
			}
			if strings.HasSuffix(base, ".prompt.txt") && rs.Backend != src.Backend {
				t.Errorf("%s: backend %q, the command lines name %q", what, rs.Backend, src.Backend)
			}
			sameMeaning(t, what, src, rs)
			checkPastedCounters(t, what, form, src, rs)
			checked++
			rules += rs.RuleCount()
			if rs.CountersRounded {
				rounded++
			}
		}
	}
	names := make([]string, 0, len(forms))
	for f := range forms {
		names = append(names, f)
	}
	sort.Strings(names)
	testreport.Count(t, "pasted forms: %d listings (%d forms × %d fixtures: %s) made by the real iptables tools read to the rules iptables-save printed (%d rules), counters exact with -x and rounded as iptables rounds them without (%d listings with rounded counters)",
		checked, len(forms), len(dirs), strings.Join(names, ", "), rules, rounded)
}

// checkPastedCounters compares a listing's counters with iptables-save's.
func checkPastedCounters(t *testing.T, what, form string, src, rs *Ruleset) {
	t.Helper()
	for _, st := range src.Tables {
		for _, sc := range st.Chains {
			pc := rs.Table(st.Name).Chain(sc.Name)
			if pc == nil {
				continue // sameMeaning said so
			}
			type pair struct {
				name             string
				wantP, wantB     uint64
				gotP, gotB       uint64
				has, gotRounded  bool
				checkHas, policy bool
			}
			var pairs []pair
			if sc.Policy != "" {
				pairs = append(pairs, pair{"policy of " + sc.Name, sc.Packets, sc.Bytes, pc.Packets, pc.Bytes, true, pc.Rounded, false, true})
			}
			for i, r := range sc.Rules {
				if i >= len(pc.Rules) {
					break
				}
				p := pc.Rules[i]
				pairs = append(pairs, pair{fmt.Sprintf("%s rule %d", sc.Name, i+1), r.Packets, r.Bytes, p.Packets, p.Bytes, p.HasCounters, p.Rounded, true, false})
			}
			for _, p := range pairs {
				switch form {
				case "S":
					if p.checkHas && p.has || p.gotP != 0 || p.gotB != 0 {
						t.Errorf("%s: %s: iptables -S has no counters, read %d/%d", what, p.name, p.gotP, p.gotB)
					}
				case "L-vnx":
					if p.gotP != p.wantP || p.gotB != p.wantB || p.gotRounded || p.checkHas && !p.has {
						t.Errorf("%s: %s: counters %d/%d (rounded %v), iptables-save says %d/%d", what, p.name, p.gotP, p.gotB, p.gotRounded, p.wantP, p.wantB)
					}
				default:
					wantRounded := p.wantP > 99999 || p.wantB > 99999
					if p.gotP != ipRound(p.wantP) || p.gotB != ipRound(p.wantB) || p.gotRounded != wantRounded {
						t.Errorf("%s: %s: counters %d/%d (rounded %v), iptables-save's %d/%d round to %d/%d", what, p.name, p.gotP, p.gotB, p.gotRounded,
							p.wantP, p.wantB, ipRound(p.wantP), ipRound(p.wantB))
					}
				}
			}
		}
	}
}
