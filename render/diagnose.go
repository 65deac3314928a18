package render

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/strs"
)

func Incomplete(p *Printer, incomplete []string) {
	for _, u := range incomplete {
		p.Para(p.Effect(injection.EffectUnknown)+": ", Escape(u))
	}
}

// StatusEffect is the colour of a check's status.
func StatusEffect(status string) string {
	switch status {
	case diagnose.Pass:
		return injection.EffectInject
	case diagnose.Fail:
		return injection.EffectBlocks
	case diagnose.Warning:
		return injection.EffectWarning
	case diagnose.Unknown:
		return injection.EffectUnknown
	}
	return injection.EffectNone
}

// Headline is a diagnosis's answer in a few words.
func Headline(d *diagnose.Diagnosis) string {
	switch {
	case d.Status == diagnose.Fail:
		return d.First + " failed"
	case d.First != "":
		return d.First + ": warning (nothing failed)"
	case d.Status == diagnose.Unknown:
		var unknown []string
		for _, c := range d.Checks {
			if c.Status == diagnose.Unknown {
				unknown = append(unknown, c.Name)
			}
		}
		return "nothing failed, but " + strings.Join(unknown, ", ") + " could not be checked (unknown)"
	}
	return "every check that ran passed"
}

// SliceAnswer prints a command's slice of diagnose's answer on top of its
// own view: what checks, the first failing one's code, finding and fix.
func SliceAnswer(p *Printer, checks string, d *diagnose.Diagnosis) {
	answer(p, checks+": ", d)
}

// FirstAnswer prints, on top of the rows of what was named (a workload's
// pods, a manifest's objects), the first of them to fail (or warn) with
// its finding and fix, as one pod's answer is printed; nothing when none
// did.
func FirstAnswer(p *Printer, ds []*diagnose.Diagnosis) {
	if len(ds) < 2 || ds[0].First == "" {
		return
	}
	d := ds[0]
	answer(p, fmt.Sprintf("First of %d: %s %s/%s: ", len(ds), d.WorkloadKind, Escape(d.Namespace), Escape(d.Name)), d)
}

// answer prints a diagnosis's answer after label: its headline, and its
// first finding and fix, then a blank line.
func answer(p *Printer, label string, d *diagnose.Diagnosis) {
	head := Headline(d)
	if d.Code != "" {
		head += ": " + d.Code
	}
	p.Para(label, p.Paint(StatusEffect(d.Status), Escape(head)))
	if d.First != "" {
		p.Para(p.Bold("Finding:")+" ", Escape(d.Verdict))
		for i, l := range strings.Split(d.Fix, "\n") {
			if l == "" {
				continue
			}
			prefix := "         "
			if i == 0 {
				prefix = p.Bold("Fix:") + "     "
			}
			p.FixLine(prefix, Escape(l))
		}
	}
	if d.First == "" && d.Status == diagnose.Unknown {
		// What settles an unknown check, when a command does.
		for _, c := range d.Checks {
			if c.Status == diagnose.Unknown && c.Fix != "" {
				p.FixLine(p.Bold("Settle:")+"  ", Escape(c.Fix))
			}
		}
	}
	fmt.Fprintln(p.Out)
}

// Diagnosis prints one pod: the answer first (the first failing check,
// its finding and its fix), then the checklist, then what would settle the
// unknown checks and the commands that show each check in full.
func Diagnosis(p *Printer, d *diagnose.Diagnosis) {
	answer(p, fmt.Sprintf("%s %s/%s: ", d.WorkloadKind, Escape(d.Namespace), Escape(d.Name)), d)
	rows := make([][]string, 0, len(d.Checks))
	deciding := map[string]bool{}
	for _, c := range d.Checks {
		deciding[c.Code+"/"+c.Status] = true
		rows = append(rows, []string{c.Name, p.Paint(StatusEffect(c.Status), c.Status), Dash(c.Code), Escape(strings.TrimPrefix(c.Evidence, "not checked: "))})
	}
	p.Table([]string{"CHECK", "STATUS", "CODE", "EVIDENCE"}, rows)
	// The findings that decide no row: a stage's second fault, information.
	var others []diagnose.Finding
	for _, f := range d.Findings {
		if !deciding[f.Code+"/"+f.Status] {
			others = append(others, f)
		}
	}
	if len(others) > 0 {
		fmt.Fprintln(p.Out)
		fmt.Fprintln(p.Out, p.Bold("Also found:"))
		for _, f := range others {
			p.Para("  ", p.Paint(StatusEffect(f.Status), f.Code+" "+f.Status)+": "+Escape(f.Evidence))
			if f.Fix != "" {
				p.FixLine("    fix: ", Escape(f.Fix))
			}
		}
	}
	var needs, notRun []string
	for _, c := range d.Checks {
		needs = append(needs, c.Needs...)
		if c.Status == diagnose.NotChecked && strings.Contains(c.Detail, " --") {
			notRun = append(notRun, c.Name)
		}
	}
	if len(notRun) > 0 {
		p.Para("", fmt.Sprintf("Not checked: %s; --rules reads the pod's rules, --connections its live flows too (for one pod they add an ephemeral container, which cannot be removed; --via node instead leaves nothing behind; --dry-run prints what would be created).", strings.Join(notRun, ", ")))
	}
	if needs = strs.Dedupe(needs); len(needs) > 0 {
		fmt.Fprintln(p.Out)
		p.Para(p.Bold("Needs:")+" ", Escape(strings.Join(needs, "; ")))
		for i := range needs {
			if hint := CanIHint(needs[i:]); hint != "" {
				p.Para("       ", Escape(hint))
			}
		}
	}
	var more [][2]string
	for _, c := range d.Checks {
		if c.Status != diagnose.Pass && c.Status != diagnose.NotChecked && c.Detail != "" {
			more = append(more, [2]string{c.Name, c.Detail})
		}
	}
	if len(more) > 0 {
		fmt.Fprintln(p.Out)
		fmt.Fprintln(p.Out, p.Bold("In full:"))
		for _, m := range more {
			prefix := fmt.Sprintf("  %-12s ", m[0])
			p.Command(prefix, Escape(m[1]))
			if note := EphemeralNote(m[1]); note != "" {
				p.Para(strings.Repeat(" ", len(prefix)), note)
			}
		}
	}
}

// EphemeralNote is what a suggested kubectl-mesh command would leave in
// the pod, said next to it: reading one pod's live rules adds an ephemeral
// container unless --via node is given. "" for a command that only reads.
func EphemeralNote(cmd string) string {
	live := false
	switch {
	case strings.Contains(cmd, "--via node"), strings.Contains(cmd, "--from-file"):
	case strings.HasPrefix(cmd, "kubectl mesh iptables ") && !strings.HasPrefix(cmd, "kubectl mesh iptables audit"):
		live = true
	case strings.HasPrefix(cmd, "kubectl mesh diagnose ") && (strings.Contains(cmd, " --rules") || strings.Contains(cmd, " --connections")):
		live = true
	}
	if !live {
		return ""
	}
	return "adds an ephemeral container to the pod, which cannot be removed; add --via node for a node pod that leaves nothing behind"
}

// DiagnosisRows prints many: a count per status, one row per pod,
// worst first, grouped by the first failing check, and a count per check.
func DiagnosisRows(p *Printer, ds []*diagnose.Diagnosis, wide bool) {
	status := map[string]int{}
	rows := make([][]string, 0, len(ds))
	workloads := 0
	for _, d := range ds {
		status[d.Status]++
		rows = append(rows, DiagnosisRow(p, d, wide))
		if d.WorkloadKind != "Pod" {
			workloads++
		}
	}
	DiagnosisTable(p, len(ds)-workloads, workloads, status, rows, CountChecks(ds), wide)
}

// RowTitle is a diagnosis's finding in a few words, for its row: the first
// failing check's title (and how many more fail or warn), what could not
// be checked, or that every check passed.
func RowTitle(d *diagnose.Diagnosis) (code, title string) {
	if d.First != "" {
		more := 0
		for _, f := range d.Findings {
			if (f.Status == diagnose.Fail || f.Status == diagnose.Warning) && f.Code != d.Code {
				more++
			}
		}
		title = d.Title
		if title == "" {
			title = d.First + " " + d.Status
		}
		if more > 0 {
			title += fmt.Sprintf(" (+%d more)", more)
		}
		return d.Code, title
	}
	var unknown []string
	for _, c := range d.Checks {
		if c.Status == diagnose.Unknown {
			unknown = append(unknown, c.Name)
			if code == "" {
				code = c.Code
			}
		}
	}
	if len(unknown) > 0 {
		return code, "could not check: " + strings.Join(unknown, ", ")
	}
	return "", "every check that ran passed"
}

// DiagnosisRow is one diagnosis's row (escaped already): one line, its
// code and title; wide adds the finding in full.
func DiagnosisRow(p *Printer, d *diagnose.Diagnosis, wide bool) []string {
	name := d.Name
	if d.WorkloadKind != "Pod" {
		name = strings.ToLower(d.WorkloadKind) + "/" + name
	}
	code, title := RowTitle(d)
	if code != "" {
		code = p.Paint(StatusEffect(d.Status), code)
	}
	row := []string{Escape(d.Namespace), Escape(name), p.Paint(StatusEffect(d.Status), d.Status), Dash(code), Escape(title)}
	if wide {
		finding := d.Verdict
		if d.First == "" {
			finding, _, _ = strings.Cut(finding, "; not checked: ")
		}
		row = append(row, Escape(strings.ReplaceAll(finding, "\n", " ")))
	}
	return row
}

// DiagnosisHeaders are a sweep's columns.
func DiagnosisHeaders(wide bool) []string {
	h := []string{"NAMESPACE", "POD", "STATUS", "CODE", "FINDING"}
	if wide {
		h = append(h, "DETAIL")
	}
	return h
}

// DiagnosisTable prints the rows of the diagnoses of pods and of
// workloads (those with no pod to check) under a count per status, then
// the count per check. A row is one line, as kubectl get prints: nothing
// is wrapped or broken.
func DiagnosisTable(p *Printer, pods, workloads int, status map[string]int, rows [][]string, counts []CheckCount, wide bool) {
	var parts []string
	for _, s := range []string{diagnose.Fail, diagnose.Unknown, diagnose.Warning, diagnose.Pass} {
		if status[s] > 0 {
			parts = append(parts, p.Paint(StatusEffect(s), fmt.Sprintf("%d %s", status[s], s)))
		}
	}
	what := CountNoun(pods, "pod", "pods")
	if workloads > 0 {
		what += ", " + CountNoun(workloads, "workload", "workloads")
	}
	p.Para("", fmt.Sprintf("%s diagnosed: %s", what, strings.Join(parts, ", ")))
	fmt.Fprintln(p.Out)
	p.Lines(DiagnosisHeaders(wide), rows)
	fmt.Fprintln(p.Out)
	crow := make([][]string, 0, len(counts))
	num := func(i int) string {
		if i == 0 {
			return "-"
		}
		return fmt.Sprint(i)
	}
	for _, c := range counts {
		crow = append(crow, []string{c.Name, num(c.First), num(c.Fail), num(c.Warning), num(c.Unknown), num(c.Pass), num(c.NotChecked)})
	}
	p.Table([]string{"CHECK", "FIRST", "FAIL", "WARNING", "UNKNOWN", "PASS", "NOT CHECKED"}, crow)
	p.Para("", "A pod's checks, its findings and their fixes: kubectl mesh diagnose POD -n NAMESPACE (-o wide: each finding in full; --list-checks: the catalogue)")
}

// CheckCount counts one check's statuses over a list of diagnoses; First
// is how many have it as their first failing (or warning) check.
type CheckCount struct {
	Name       string `json:"name"`
	First      int    `json:"first"`
	Pass       int    `json:"pass"`
	Warning    int    `json:"warning"`
	Fail       int    `json:"fail"`
	Unknown    int    `json:"unknown"`
	NotChecked int    `json:"notChecked"`
}

// StatusRank orders diagnoses worst first.
var StatusRank = map[string]int{diagnose.Fail: 0, diagnose.Unknown: 1, diagnose.Warning: 2, diagnose.Pass: 3}

// CheckRank is a check's place in causal order; no check is last.
func CheckRank(name string) int {
	for i, c := range diagnose.Order {
		if c == name {
			return i
		}
	}
	return len(diagnose.Order)
}

// SortDiagnoses puts the worst first, grouped by the first failing check,
// then by namespace and name.
func SortDiagnoses(ds []*diagnose.Diagnosis) {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i], ds[j]
		if ra, rb := StatusRank[a.Status], StatusRank[b.Status]; ra != rb {
			return ra < rb
		}
		if ca, cb := CheckRank(a.First), CheckRank(b.First); ca != cb {
			return ca < cb
		}
		return KeyBefore(a.Namespace, a.Name, b.Namespace, b.Name)
	})
}

// CountChecks is the list's summary: each check's statuses.
func CountChecks(ds []*diagnose.Diagnosis) []CheckCount {
	out := make([]CheckCount, len(diagnose.Order))
	for i, n := range diagnose.Order {
		out[i].Name = n
	}
	for _, d := range ds {
		AddCounts(out, d)
	}
	return out
}

// AddCounts counts d's checks into counts (CountChecks's).
func AddCounts(counts []CheckCount, d *diagnose.Diagnosis) {
	for _, c := range d.Checks {
		i := CheckRank(c.Name)
		if i >= len(counts) {
			continue
		}
		switch c.Status {
		case diagnose.Pass:
			counts[i].Pass++
		case diagnose.Warning:
			counts[i].Warning++
		case diagnose.Fail:
			counts[i].Fail++
		case diagnose.Unknown:
			counts[i].Unknown++
		default:
			counts[i].NotChecked++
		}
		if c.Name == d.First {
			counts[i].First++
		}
	}
}

// WatchRows prints rows as a sweep's table prints them, without its
// header: what -w prints of the rows that changed.
func WatchRows(p *Printer, headers []string, rows [][]string) {
	saved := NoHeaders
	NoHeaders = true
	p.Lines(headers, rows)
	NoHeaders = saved
}
