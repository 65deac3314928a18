package cmd

import (
	"fmt"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/engine/checkup"
	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// print prints one diagnosis (list false) or a list, sorted worst first.
func (o *DiagnoseOptions) print(ds []*diagnose.Diagnosis, list bool, incomplete []string) error {
	if o.Output != "" {
		if !list && len(ds) == 1 {
			return render.Structured(o.Out, o.Output, render.DiagnosisDoc{APIVersion: render.APIVersion, Kind: "Diagnosis", Diagnosis: ds[0]})
		}
		return render.List(o.Out, o.Output, "DiagnosisList", len(ds), func(i int) any { return ds[i] },
			render.Field{Key: "summary", Value: countChecks(ds)}, render.Field{Key: "incomplete", Value: incomplete})
	}
	for _, d := range ds {
		render.Sanitize(d)
	}
	p := render.NewPrinter(o.Out)
	switch {
	case len(ds) == 0:
		fmt.Fprintln(o.ErrOut, "No pods found.")
	case len(ds) == 1:
		// One pod (or one workload's): the whole checklist.
		printDiagnosis(p, ds[0])
	default:
		printDiagnosisRows(p, ds)
	}
	printIncomplete(p, incomplete)
	return nil
}

func printIncomplete(p *render.Printer, incomplete []string) {
	for _, u := range incomplete {
		p.Para(p.Effect(injection.EffectUnknown)+": ", render.Escape(u))
	}
}

// statusEffect is the colour of a check's status.
func statusEffect(status string) string {
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

// headline is a diagnosis's answer in a few words.
func headline(d *diagnose.Diagnosis) string {
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

// printDiagnosis prints one pod: the answer first (the first failing check,
// its finding and its fix), then the checklist, then what would settle the
// unknown checks and the commands that show each check in full.
func printDiagnosis(p *render.Printer, d *diagnose.Diagnosis) {
	p.Para(fmt.Sprintf("%s %s/%s: ", d.WorkloadKind, render.Escape(d.Namespace), render.Escape(d.Name)), p.Paint(statusEffect(d.Status), headline(d)))
	if d.First != "" {
		p.Para(p.Bold("Finding:")+" ", render.Escape(d.Verdict))
		for i, l := range strings.Split(d.Fix, "\n") {
			if l == "" {
				continue
			}
			prefix := "         "
			if i == 0 {
				prefix = p.Bold("Fix:") + "     "
			}
			p.FixLine(prefix, render.Escape(l))
		}
	}
	fmt.Fprintln(p.Out)
	rows := make([][]string, 0, len(d.Checks))
	for _, c := range d.Checks {
		rows = append(rows, []string{c.Name, p.Paint(statusEffect(c.Status), c.Status), render.Escape(strings.TrimPrefix(c.Evidence, "not checked: "))})
	}
	p.Table([]string{"CHECK", "STATUS", "EVIDENCE"}, rows)
	var needs, notRun []string
	for _, c := range d.Checks {
		needs = append(needs, c.Needs...)
		if c.Status == diagnose.NotChecked && strings.Contains(c.Detail, " --") {
			notRun = append(notRun, c.Name)
		}
	}
	if len(notRun) > 0 {
		p.Para("", fmt.Sprintf("Not checked: %s; --rules reads the pod's rules, --connections its live flows too (an ephemeral container, or --via node).", strings.Join(notRun, ", ")))
	}
	if needs = checkup.Dedupe(needs); len(needs) > 0 {
		fmt.Fprintln(p.Out)
		p.Para(p.Bold("Needs:")+" ", render.Escape(strings.Join(needs, "; ")))
		for i := range needs {
			if hint := canIHint(needs[i:]); hint != "" {
				p.Para("       ", render.Escape(hint))
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
			p.Command(fmt.Sprintf("  %-12s ", m[0]), render.Escape(m[1]))
		}
	}
}

// printDiagnosisRows prints many: a count per status, one row per pod,
// worst first, grouped by the first failing check, and a count per check.
func printDiagnosisRows(p *render.Printer, ds []*diagnose.Diagnosis) {
	status := map[string]int{}
	rows := make([][]string, 0, len(ds))
	for _, d := range ds {
		status[d.Status]++
		rows = append(rows, diagnosisRow(p, d))
	}
	printDiagnosisTable(p, len(ds), status, rows, countChecks(ds))
}

// diagnosisRow is one diagnosis's row (escaped already).
func diagnosisRow(p *render.Printer, d *diagnose.Diagnosis) []string {
	name := d.Name
	if d.WorkloadKind != "Pod" {
		name = strings.ToLower(d.WorkloadKind) + "/" + name
	}
	first := render.Dash(d.First)
	if d.First != "" {
		first = p.Paint(statusEffect(d.Status), d.First)
	}
	finding := d.Verdict
	if d.First == "" {
		// What was not checked is counted under the table.
		finding, _, _ = strings.Cut(finding, "; not checked: ")
	}
	return []string{render.Escape(d.Namespace), render.Escape(name), p.Paint(statusEffect(d.Status), d.Status), first, render.Escape(finding)}
}

// printDiagnosisTable prints n diagnoses' rows under a count per status,
// then the count per check.
func printDiagnosisTable(p *render.Printer, n int, status map[string]int, rows [][]string, counts []CheckCount) {
	var parts []string
	for _, s := range []string{diagnose.Fail, diagnose.Unknown, diagnose.Warning, diagnose.Pass} {
		if status[s] > 0 {
			parts = append(parts, p.Paint(statusEffect(s), fmt.Sprintf("%d %s", status[s], s)))
		}
	}
	p.Para("", fmt.Sprintf("%s diagnosed: %s", countNoun(n, "pod", "pods"), strings.Join(parts, ", ")))
	fmt.Fprintln(p.Out)
	p.Table([]string{"NAMESPACE", "POD", "STATUS", "FIRST", "FINDING"}, rows)
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
	p.Para("", "A pod's checks, its fix and the commands that show each: kubectl mesh diagnose POD -n NAMESPACE")
}
