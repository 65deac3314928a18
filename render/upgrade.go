package render

import (
	"fmt"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/upgrade"
)

// startsEffect paints a workload's STARTS cell as a check's status.
func startsEffect(s string) string {
	switch s {
	case upgrade.StartsNo:
		return StatusEffect(diagnose.Fail)
	case upgrade.StartsUnknown:
		return StatusEffect(diagnose.Unknown)
	case upgrade.StartsWarning:
		return StatusEffect(diagnose.Warning)
	}
	return StatusEffect(diagnose.Pass)
}

// side is a pod's mesh parts in a table cell: "canary 1.31 classic+hold".
func side(s *upgrade.Side) string {
	if s == nil {
		return "no pod"
	}
	if !s.Injected {
		return "no sidecar"
	}
	parts := []string{Dash(s.Revision)}
	if s.Release != "" {
		parts = append(parts, s.Release)
	}
	kind := s.Sidecar
	if s.Hold {
		kind += "+hold"
	}
	return strings.Join(append(parts, kind), " ")
}

// UpgradePlan prints a plan: one row per workload (those that will not
// start first), what will not start and why, then the steps.
func UpgradePlan(p *Printer, plan *upgrade.Plan) {
	to := "what selects each workload now"
	if plan.To != "" {
		to = "revision " + plan.Revision
		if plan.To != plan.Revision {
			to = "tag " + plan.To + " (revision " + plan.Revision + ")"
		}
	}
	counts := map[string]int{}
	for _, w := range plan.Workloads {
		counts[w.Starts]++
	}
	p.Para("", fmt.Sprintf("Plan: %d workloads to %s; %d start, %d with warnings, %d will not, %d unknown (%d not in the mesh before or after, %d fields compared). Nothing was changed: after is the target's injector's answer and a dry-run create.",
		len(plan.Workloads), to, counts[upgrade.StartsYes], counts[upgrade.StartsWarning], counts[upgrade.StartsNo], counts[upgrade.StartsUnknown], plan.Skipped, plan.Compared))
	if len(plan.Workloads) == 0 {
		return
	}
	fmt.Fprintln(p.Out)
	rows := make([][]string, 0, len(plan.Workloads))
	for _, w := range plan.Workloads {
		after := side(w.After)
		if w.After == nil {
			after = "unknown"
		}
		changes := "-"
		if w.Now != nil && w.After != nil {
			changes = upgrade.Summary(w.Changes)
		}
		rows = append(rows, []string{Escape(w.Namespace + "/" + strings.ToLower(w.Kind) + "/" + w.Name), side(w.Now), after, Escape(changes), p.Paint(startsEffect(w.Starts), w.Starts)})
	}
	p.Table([]string{"WORKLOAD", "NOW", "AFTER", "CHANGES", "STARTS"}, rows)
	for _, w := range plan.Workloads {
		if w.Starts == upgrade.StartsYes && w.AfterUnknown == "" && len(w.NowFindings) == 0 {
			continue
		}
		fmt.Fprintln(p.Out)
		p.Para("", p.Bold(fmt.Sprintf("%s/%s -n %s", strings.ToLower(w.Kind), Escape(w.Name), Escape(w.Namespace)))+": "+p.Paint(startsEffect(w.Starts), "starts: "+w.Starts))
		if w.AfterUnknown != "" {
			p.Para("  ", "after: unknown: "+Escape(w.AfterUnknown))
		}
		for _, f := range w.NowFindings {
			p.Para("  ", p.Paint(StatusEffect(f.Status), "now: "+f.Status)+": "+Escape(f.Evidence))
		}
		for _, f := range w.Findings {
			label := f.Status
			if f.Code != "" {
				label = f.Code + " " + f.Status
			}
			p.Para("  ", p.Paint(StatusEffect(f.Status), label)+": "+Escape(f.Evidence))
			if f.Fix != "" {
				p.FixLine("    fix: ", Escape(f.Fix))
			}
		}
	}
	if len(plan.Steps) > 0 {
		fmt.Fprintln(p.Out)
		fmt.Fprintln(p.Out, p.Bold("Steps, in order:"))
		for _, s := range plan.Steps {
			p.Command("  ", Escape(s))
		}
	}
}
