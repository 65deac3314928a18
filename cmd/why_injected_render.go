package cmd

import (
	"fmt"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

func (o *WhyInjectedOptions) print(facts *injection.ClusterFacts, reports []*injection.InjectionReport, sweep, list bool, incomplete []string) error {
	if o.Output != "" {
		if !list {
			return printStructured(o.Out, o.Output, InjectionReportDoc{APIVersion: ReportAPIVersion, Kind: "InjectionReport", InjectionReport: reports[0]})
		}
		var summary []injection.NamespaceSummary
		if sweep {
			injection.SortReports(reports)
			summary = injection.Summarize(facts, reports)
		}
		return printList(o.Out, o.Output, "InjectionReportList", len(reports), func(i int) any { return reports[i] },
			field{"summary", summary}, field{"incomplete", incomplete})
	}
	for _, r := range reports {
		sanitize(r)
	}
	p := newPrinter(o.Out)
	if sweep {
		if len(reports) == 0 {
			fmt.Fprintln(o.ErrOut, "No pods found.")
			return nil
		}
		printPodRows(p, reports, facts)
		return nil
	}
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(o.Out)
		}
		if r.Kind != "Pod" && i+1 < len(reports) && reports[i+1].Kind == "Pod" {
			printFactorTable(p, r)
			fmt.Fprintln(o.Out)
			printPodRows(p, reports[i+1:], nil)
			break
		}
		printFactorTable(p, r)
	}
	return nil
}

// printFactorTable prints one workload's factors, verdict and fix.
func printFactorTable(p *printer, r *injection.InjectionReport) {
	fmt.Fprintf(p.out, "%s %s/%s (%s)\n\n", r.Kind, escape(r.Namespace), escape(r.Name), r.Mesh)
	rows := make([][]string, 0, len(r.Factors))
	for _, f := range r.Factors {
		rows = append(rows, []string{escape(f.Factor), escape(f.Value), p.effect(f.Effect), escape(f.Source)})
	}
	p.table([]string{"FACTOR", "VALUE", "EFFECT", "SOURCE"}, rows)
	fmt.Fprintf(p.out, "\n%s %s\n", p.bold("Verdict:"), escape(r.Verdict))
	if len(r.Needs) > 0 {
		fmt.Fprintf(p.out, "%s   %s\n", p.bold("Needs:"), escape(strings.Join(r.Needs, "; ")))
		fmt.Fprintf(p.out, "         %s\n", escape(canIHint(r.Needs)))
	}
	if r.Fix != "" {
		lines := strings.Split(r.Fix, "\n")
		fmt.Fprintf(p.out, "%s     %s\n", p.bold("Fix:"), escape(lines[0]))
		for _, l := range lines[1:] {
			fmt.Fprintf(p.out, "         %s\n", escape(l))
		}
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(p.out, "%s %s\n", p.effect(injection.EffectWarning)+":", escape(w))
	}
	for _, u := range r.Incomplete {
		fmt.Fprintf(p.out, "%s %s\n", p.effect(injection.EffectUnknown)+":", escape(u))
	}
}

// printPodRows prints one row per pod, mismatches first, then (for a sweep)
// a summary per namespace and the commands that fix the mismatches.
func printPodRows(p *printer, reports []*injection.InjectionReport, facts *injection.ClusterFacts) {
	injection.SortReports(reports)
	rows := make([][]string, 0, len(reports))
	var fixes, needs []string
	seen, seenNeed := map[string]bool{}, map[string]bool{}
	for _, r := range reports {
		for _, n := range r.Needs {
			if !seenNeed[n] {
				seenNeed[n] = true
				needs = append(needs, n)
			}
		}
		expected := p.yesNo(r.Expected)
		if r.Expected == nil {
			expected = p.effect(injection.EffectUnknown)
		}
		name := r.Name
		if r.Kind != "Pod" {
			name = strings.ToLower(r.Kind) + "/" + r.Name
		}
		reason := r.Reason
		if r.IsMismatch() || r.CreationBlocked {
			reason = p.effect(injection.EffectWarning) + ": " + escape(reason)
			if r.Fix != "" && !seen[r.Fix] {
				seen[r.Fix] = true
				fixes = append(fixes, r.Fix)
			}
		} else {
			reason = escape(reason)
		}
		rows = append(rows, []string{escape(r.Namespace), escape(name), p.yesNo(r.Injected), expected, escape(dash(r.Revision)), reason})
	}
	p.table([]string{"NAMESPACE", "POD", "INJECTED", "EXPECTED", "REVISION", "REASON"}, rows)
	if facts != nil {
		fmt.Fprintln(p.out)
		var srows [][]string
		for _, s := range injection.Summarize(facts, reports) {
			exp := fmt.Sprint(s.Expected)
			if s.Unknown > 0 {
				exp += fmt.Sprintf(" (+%d unknown)", s.Unknown)
			}
			srows = append(srows, []string{escape(s.Namespace), fmt.Sprint(s.Pods), fmt.Sprint(s.Injected), exp,
				fmt.Sprint(s.Mismatched), escape(dash(s.Labels)), s.Description})
		}
		p.table([]string{"NAMESPACE", "PODS", "INJECTED", "EXPECTED", "MISMATCHED", "LABELS", "SUMMARY"}, srows)
	}
	if len(needs) > 0 {
		fmt.Fprintf(p.out, "\n%s %s\n", p.bold("Unknown:"), "whether some pods would be injected if re-created; it needs permission to:")
		for _, n := range needs {
			fmt.Fprintf(p.out, "  %s\n", escape(n))
		}
		fmt.Fprintf(p.out, "  %s\n", escape(canIHint(needs)))
	}
	if len(fixes) > 0 {
		fmt.Fprintf(p.out, "\n%s\n", p.bold("To fix the mismatches:"))
		for _, f := range fixes {
			fmt.Fprintf(p.out, "  %s\n", escape(strings.ReplaceAll(f, "\n", "\n  ")))
		}
	}
}

// canIHint is the command that checks the first missing permission.
func canIHint(needs []string) string {
	f := strings.Fields(needs[0])
	if len(f) < 2 {
		return ""
	}
	cmd := "(check: kubectl auth can-i " + f[0] + " " + f[1]
	rest := strings.Join(f[2:], " ")
	switch {
	case strings.HasPrefix(rest, "in namespace "):
		cmd += " -n " + strings.Fields(strings.TrimPrefix(rest, "in namespace "))[0]
	case strings.Contains(rest, "all namespaces"):
		cmd += " -A"
	}
	return cmd + ")"
}
