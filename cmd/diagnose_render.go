package cmd

import (
	"fmt"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// print prints one diagnosis (list false) or a list, sorted worst first.
func (o *DiagnoseOptions) print(ds []*diagnose.Diagnosis, list bool, incomplete []string) error {
	if o.Output != "" {
		if !list && len(ds) == 1 {
			return printStructured(o.Out, o.Output, DiagnosisDoc{APIVersion: ReportAPIVersion, Kind: "Diagnosis", Diagnosis: ds[0]})
		}
		return printList(o.Out, o.Output, "DiagnosisList", len(ds), func(i int) any { return ds[i] },
			field{"summary", countChecks(ds)}, field{"incomplete", incomplete})
	}
	for _, d := range ds {
		sanitize(d)
	}
	p := newPrinter(o.Out)
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

func printIncomplete(p *printer, incomplete []string) {
	for _, u := range incomplete {
		p.para(p.effect(injection.EffectUnknown)+": ", escape(u))
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
func printDiagnosis(p *printer, d *diagnose.Diagnosis) {
	p.para(fmt.Sprintf("%s %s/%s: ", d.WorkloadKind, escape(d.Namespace), escape(d.Name)), p.paint(statusEffect(d.Status), headline(d)))
	if d.First != "" {
		p.para(p.bold("Finding:")+" ", escape(d.Verdict))
		for i, l := range strings.Split(d.Fix, "\n") {
			if l == "" {
				continue
			}
			prefix := "         "
			if i == 0 {
				prefix = p.bold("Fix:") + "     "
			}
			p.fixLine(prefix, escape(l))
		}
	}
	fmt.Fprintln(p.out)
	rows := make([][]string, 0, len(d.Checks))
	for _, c := range d.Checks {
		rows = append(rows, []string{c.Name, p.paint(statusEffect(c.Status), c.Status), escape(strings.TrimPrefix(c.Evidence, "not checked: "))})
	}
	p.table([]string{"CHECK", "STATUS", "EVIDENCE"}, rows)
	var needs, notRun []string
	for _, c := range d.Checks {
		needs = append(needs, c.Needs...)
		if c.Status == diagnose.NotChecked && strings.Contains(c.Detail, " --") {
			notRun = append(notRun, c.Name)
		}
	}
	if len(notRun) > 0 {
		p.para("", fmt.Sprintf("Not checked: %s; --rules reads the pod's rules, --connections its live flows too (an ephemeral container, or --via node).", strings.Join(notRun, ", ")))
	}
	if needs = dedupe(needs); len(needs) > 0 {
		fmt.Fprintln(p.out)
		p.para(p.bold("Needs:")+" ", escape(strings.Join(needs, "; ")))
		for i := range needs {
			if hint := canIHint(needs[i:]); hint != "" {
				p.para("       ", escape(hint))
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
		fmt.Fprintln(p.out)
		fmt.Fprintln(p.out, p.bold("In full:"))
		for _, m := range more {
			p.command(fmt.Sprintf("  %-12s ", m[0]), escape(m[1]))
		}
	}
}

// printDiagnosisRows prints many: a count per status, one row per pod,
// worst first, grouped by the first failing check, and a count per check.
func printDiagnosisRows(p *printer, ds []*diagnose.Diagnosis) {
	status := map[string]int{}
	rows := make([][]string, 0, len(ds))
	for _, d := range ds {
		status[d.Status]++
		rows = append(rows, diagnosisRow(p, d))
	}
	printDiagnosisTable(p, len(ds), status, rows, countChecks(ds))
}

// diagnosisRow is one diagnosis's row (escaped already).
func diagnosisRow(p *printer, d *diagnose.Diagnosis) []string {
	name := d.Name
	if d.WorkloadKind != "Pod" {
		name = strings.ToLower(d.WorkloadKind) + "/" + name
	}
	first := dash(d.First)
	if d.First != "" {
		first = p.paint(statusEffect(d.Status), d.First)
	}
	finding := d.Verdict
	if d.First == "" {
		// What was not checked is counted under the table.
		finding, _, _ = strings.Cut(finding, "; not checked: ")
	}
	return []string{escape(d.Namespace), escape(name), p.paint(statusEffect(d.Status), d.Status), first, escape(finding)}
}

// printDiagnosisTable prints n diagnoses' rows under a count per status,
// then the count per check.
func printDiagnosisTable(p *printer, n int, status map[string]int, rows [][]string, counts []CheckCount) {
	var parts []string
	for _, s := range []string{diagnose.Fail, diagnose.Unknown, diagnose.Warning, diagnose.Pass} {
		if status[s] > 0 {
			parts = append(parts, p.paint(statusEffect(s), fmt.Sprintf("%d %s", status[s], s)))
		}
	}
	p.para("", fmt.Sprintf("%s diagnosed: %s", countNoun(n, "pod", "pods"), strings.Join(parts, ", ")))
	fmt.Fprintln(p.out)
	p.table([]string{"NAMESPACE", "POD", "STATUS", "FIRST", "FINDING"}, rows)
	fmt.Fprintln(p.out)
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
	p.table([]string{"CHECK", "FIRST", "FAIL", "WARNING", "UNKNOWN", "PASS", "NOT CHECKED"}, crow)
	p.para("", "A pod's checks, its fix and the commands that show each: kubectl mesh diagnose POD -n NAMESPACE")
}
