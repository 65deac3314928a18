package e2e

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

// whyRow is a why-injected sweep row that carries diagnose's status and
// code for the pod: NAMESPACE POD … REASON, the reason "fail CODE: …" or
// "warning CODE: …".
var whyRow = regexp.MustCompile(`^(\S+)\s+(\S+)\s.*?\s(fail|warning) (KM-[A-Z]+-\d+):`)

// commandsAgree runs diagnose, why-injected and startup on a namespace as
// a user would, and checks that each pod's answer per stage is the same in
// every command: why-injected's injection status and code (the table's
// REASON, and the exit of why-injected on the pod alone) and startup's init
// and start checks (its JSON) are diagnose's.
// Pods whose diagnosis changed while the commands ran (diagnose is asked
// before and after) are not compared. It returns what disagrees ("" when
// nothing does) and how many answers it compared.
func commandsAgree(bin string, c *testcluster.Cluster, ns string) (string, int) {
	answers := func() (map[string]catItem, error) {
		d, r, err := catDiagnose(bin, c.Kubeconfig, ns)
		if err != nil {
			return nil, fmt.Errorf("diagnose -n %s: %v: %s", ns, err, r.stderr)
		}
		out := map[string]catItem{}
		for _, it := range d.all() {
			if it.WorkloadKind == "Pod" {
				out[it.Name] = it
			}
		}
		return out, nil
	}
	before, err := answers()
	if err != nil {
		return err.Error(), 0
	}
	why, err := catRun(bin, "--kubeconfig", c.Kubeconfig, "why-injected", "-n", ns)
	if err != nil {
		return fmt.Sprintf("why-injected -n %s: %v", ns, err), 0
	}
	st, err := catRun(bin, "--kubeconfig", c.Kubeconfig, "startup", "-n", ns, "-o", "json")
	if err != nil {
		return fmt.Sprintf("startup -n %s: %v", ns, err), 0
	}
	after, err := answers()
	if err != nil {
		return err.Error(), 0
	}
	stable := map[string]catItem{}
	for name, it := range before {
		if a, ok := after[name]; ok && sameChecks(a, it) {
			stable[name] = it
		}
	}
	var bad []string
	compared := 0
	// why-injected: a pod's row carries a status and a code exactly when
	// diagnose's injection check fails or warns, and they are the same.
	rows := map[string][2]string{}
	for _, line := range strings.Split(why.stdout, "\n") {
		if m := whyRow.FindStringSubmatch(line); m != nil && m[1] == ns {
			rows[m[2]] = [2]string{m[3], m[4]}
		}
	}
	for name, it := range stable {
		ch := it.check("injection")
		got, want := rows[name], [2]string{}
		if ch.Status == "fail" || ch.Status == "warning" {
			want = [2]string{ch.Status, ch.Code}
		}
		compared++
		if got != want {
			bad = append(bad, fmt.Sprintf("%s: why-injected says %q, diagnose's injection check %s %s", name, strings.TrimSpace(strings.Join(got[:], " ")), ch.Status, ch.Code))
		}
	}
	// why-injected POD: the pod named alone exits as diagnose's injection
	// check decides (4 on a fail, else 0), its own pod read with it.
	for name, it := range stable {
		ch := it.check("injection")
		if ch.Status == "unknown" {
			continue
		}
		r, err := catRun(bin, "--kubeconfig", c.Kubeconfig, "why-injected", name, "-n", ns)
		if err != nil {
			return fmt.Sprintf("why-injected %s -n %s: %v", name, ns, err), compared
		}
		want := 0
		if ch.Status == "fail" {
			want = 4
		}
		compared++
		if r.code != want {
			bad = append(bad, fmt.Sprintf("%s: why-injected %s exits %d, diagnose's injection check %s %s", name, name, r.code, ch.Status, ch.Code))
		}
	}
	// startup: its JSON's diagnosis is diagnose's init and start checks.
	var sd struct {
		Items []struct {
			Name      string  `json:"name"`
			Diagnosis catItem `json:"diagnosis"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &sd); err != nil {
		return fmt.Sprintf("startup -n %s -o json: %v", ns, err), compared
	}
	for _, s := range sd.Items {
		it, ok := stable[s.Name]
		if !ok {
			continue
		}
		for _, stage := range []string{"init", "start"} {
			a, b := s.Diagnosis.check(stage), it.check(stage)
			compared++
			if a.Status != b.Status || a.Code != b.Code || a.Fix != b.Fix {
				bad = append(bad, fmt.Sprintf("%s: startup's %s check %s %s, diagnose's %s %s (fixes the same: %v)", s.Name, stage, a.Status, a.Code, b.Status, b.Code, a.Fix == b.Fix))
			}
		}
	}
	return strings.Join(bad, "; "), compared
}

// sameChecks: two diagnoses of a pod with the same status, code and fix
// at every stage (a crash loop between two states changes a fix's words
// while its code stays: the pod moved, and another command's answer taken
// meanwhile may be of either state).
func sameChecks(a, b catItem) bool {
	if len(a.Checks) != len(b.Checks) {
		return false
	}
	for i := range a.Checks {
		if a.Checks[i].Name != b.Checks[i].Name || a.Checks[i].Status != b.Checks[i].Status || a.Checks[i].Code != b.Checks[i].Code || a.Checks[i].Fix != b.Checks[i].Fix {
			return false
		}
	}
	return true
}
