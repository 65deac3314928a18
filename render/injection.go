package render

import (
	"fmt"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// FactorTable prints one workload's answer first — the verdict,
// coloured by outcome, the fix, what is missing — then the factors that
// decided it; factors with no effect are collapsed into a line per kind
// unless all is set.
func FactorTable(p *Printer, r *injection.InjectionReport, all bool) {
	fmt.Fprintf(p.Out, "%s %s/%s (%s)\n", r.Kind, Escape(r.Namespace), Escape(r.Name), r.Mesh)
	p.Para(p.Bold("Verdict:")+" ", p.Paint(VerdictEffect(r), Escape(r.Verdict)))
	if r.Fix != "" {
		for i, l := range strings.Split(r.Fix, "\n") {
			prefix := "         "
			if i == 0 {
				prefix = p.Bold("Fix:") + "     "
			}
			p.FixLine(prefix, Escape(l))
		}
	}
	if len(r.Needs) > 0 {
		p.Para(p.Bold("Needs:")+"   ", Escape(strings.Join(r.Needs, "; ")))
		if hint := CanIHint(r.Needs); hint != "" {
			p.Para("         ", Escape(hint))
		}
	}
	Proof(p, r)
	if r.NotVerified == "" && len(r.UnverifiedAdmission) > 0 {
		var by []string
		file := false
		for _, m := range r.UnverifiedAdmission {
			by = append(by, m.By)
			file = file || strings.Contains(m.By, "not applied yet")
		}
		how := "--verify asks admission whether it admits them"
		if file {
			how = "a dry run (--verify) evaluates a policy only once the cluster has it: apply the file, then diagnose the workload"
		}
		if r.Verified == nil || file {
			p.Para(p.Effect(injection.EffectUnknown)+": ", Escape("validating admission kubectl-mesh does not evaluate takes in its pods ("+strings.Join(by, ", ")+"): "+how+" (KM-INJ-018)"))
		}
	}
	for _, w := range r.Warnings {
		p.Para(p.Effect(injection.EffectWarning)+": ", Escape(w))
	}
	fmt.Fprintln(p.Out)
	rows := make([][]string, 0, len(r.Factors))
	var quietWebhooks, quietOther []string
	for _, f := range r.Factors {
		if !all && f.Effect == injection.EffectNone {
			if name, ok := strings.CutPrefix(f.Factor, "webhook "); ok && strings.Contains(name, "/") {
				quietWebhooks = append(quietWebhooks, name)
			} else {
				quietOther = append(quietOther, f.Factor)
			}
			continue
		}
		rows = append(rows, []string{Escape(f.Factor), Escape(f.Value), p.Effect(f.Effect), Escape(f.Source)})
	}
	p.Table([]string{"FACTOR", "VALUE", "EFFECT", "SOURCE"}, rows)
	if len(quietWebhooks) > 0 {
		p.Para("", fmt.Sprintf("%s do not match: %s (--all-factors lists them)", CountNoun(len(quietWebhooks), "other webhook", "other webhooks"), Escape(ByConfiguration(quietWebhooks))))
	}
	if len(quietOther) > 0 {
		p.Para("", fmt.Sprintf("%s with no effect: %s (--all-factors lists them)", CountNoun(len(quietOther), "factor", "factors"), Escape(strings.Join(quietOther, ", "))))
	}
	for _, u := range r.Incomplete {
		p.Para(p.Effect(injection.EffectUnknown)+": ", Escape(u))
	}
}

// VerdictEffect picks the verdict's colour: red when something is wrong
// (a mismatch, pods refused), magenta when unknown, green when injected as
// expected, none when not injected as expected.
func VerdictEffect(r *injection.InjectionReport) string {
	switch {
	case r.IsMismatch() || r.CreationBlocked:
		return injection.EffectBlocks
	case r.Expected == nil:
		return injection.EffectUnknown
	case *r.Expected:
		return injection.EffectInject
	}
	return injection.EffectNone
}

// ByConfiguration names webhooks ("<configuration>/<webhook>") by their
// configuration, with a count: "istio-revision-tag-prod ×2, istio-sidecar-injector ×4".
func ByConfiguration(webhooks []string) string {
	var order []string
	n := map[string]int{}
	for _, w := range webhooks {
		c, _, _ := strings.Cut(w, "/")
		if n[c] == 0 {
			order = append(order, c)
		}
		n[c]++
	}
	parts := make([]string, 0, len(order))
	for _, c := range order {
		if n[c] > 1 {
			parts = append(parts, fmt.Sprintf("%s ×%d", c, n[c]))
		} else {
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, ", ")
}

func CountNoun(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// CanIHint is the command that checks the first missing permission.
func CanIHint(needs []string) string {
	f := strings.Fields(needs[0])
	if len(f) < 2 {
		return ""
	}
	switch f[0] {
	case "get", "list", "watch", "create", "update", "patch", "delete":
	default:
		return "" // not a permission (e.g. a CEL condition only --verify can settle)
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

// Proof prints --verify's proof under the verdict: what admission did,
// and whether the prediction agrees.
func Proof(p *Printer, r *injection.InjectionReport) {
	v := r.Verified
	switch {
	case r.NotVerified != "":
		p.Para(p.Bold("Proof:")+"   ", "not verified: "+Escape(r.NotVerified))
	case v == nil:
	case v.Agrees == nil:
		p.Para(p.Bold("Proof:")+"   ", Escape(v.Summary())+" (dry run; the prediction could not be made, this is the answer)")
	case *v.Agrees:
		p.Para(p.Bold("Proof:")+"   ", p.Paint(injection.EffectInject, "agrees")+": "+Escape(v.Summary())+" (dry run through the real admission chain)")
	default:
		p.Para(p.Bold("Proof:")+"   ", p.Paint(injection.EffectBlocks, "DISAGREES")+": "+Escape(v.Disagreement))
		p.Para("         ", ReportHint)
	}
}

// ProofCell is the VERIFIED column of --verify.
func ProofCell(p *Printer, r *injection.InjectionReport) string {
	v := r.Verified
	switch {
	case v == nil:
		return "-"
	case v.Agrees == nil && v.Refused:
		return "refused"
	case v.Agrees == nil:
		return map[bool]string{true: "injects", false: "no"}[v.Injected]
	case *v.Agrees:
		return p.Paint(injection.EffectInject, "agrees")
	}
	return p.Paint(injection.EffectBlocks, "DISAGREES")
}

// ReportHint says what to do with a disagreement between prediction and proof.
const ReportHint = "The prediction and the apiserver disagree: that is a bug in kubectl-mesh's model of the mesh. " +
	"Please report it with the output of the same command with -o yaml (it holds every factor and the proof)."
