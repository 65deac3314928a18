package render

import (
	"fmt"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// Capture prints the answer first — the drift in one line, each
// trace's verdict, the notes — then the annotated rule tree, then the
// drift's rules and each trace's path.
func Capture(p *Printer, rep *capture.CaptureReport) {
	if l := rep.Live; l != nil {
		head := fmt.Sprintf("Pod %s/%s, rules read via %s (%s)", Escape(l.Namespace), Escape(l.Pod), Escape(l.Via), Escape(l.Container))
		if l.Interval != "" {
			head += fmt.Sprintf("; counters: what each rule matched during %s", Escape(l.Interval))
		}
		p.Para("", head)
	}
	drifted := rep.Drift != nil && len(rep.Drift.Missing)+len(rep.Drift.Extra)+len(rep.Drift.Reordered) > 0
	if rep.Drift != nil {
		release := ""
		if m := rep.RuleModel; m != nil {
			release = m.Phrase()
		}
		if drifted {
			p.Para(p.Bold("Drift:")+" ", p.Paint(injection.EffectBlocks, fmt.Sprintf("%d missing, %d extra, %d chains reordered",
				len(rep.Drift.Missing), len(rep.Drift.Extra), len(rep.Drift.Reordered)))+" against what "+Escape(rep.Expected)+" call for"+Escape(release)+"; the rules are below")
		} else {
			p.Para(p.Bold("Drift:")+" ", "none: the rules are exactly those "+Escape(rep.Expected)+" call for"+Escape(release))
		}
	} else if rep.NoRuleModel != "" {
		p.Para(p.Bold("Drift:")+" ", p.Paint(injection.EffectUnknown, "unknown")+": "+Escape(rep.NoRuleModel))
	}
	for _, tr := range rep.Traces {
		p.Para(p.Bold("Trace")+" "+Escape(tr.Spec)+": ", Escape(tr.Summary))
	}
	if rep.ConnectionsSummary != "" {
		p.Para(p.Bold("Connections:")+" ", Escape(rep.ConnectionsSummary))
		// Bypassing flows, one line per destination and rule.
		type group struct {
			c capture.Connection
			n int
		}
		var groups []*group
		byKey := map[string]*group{}
		for _, c := range rep.Connections {
			if c.Class != capture.Bypassing {
				continue
			}
			key := c.Proto + " " + c.Dst.String() + " " + c.Rule
			if g := byKey[key]; g != nil {
				g.n++
				continue
			}
			g := &group{c: c, n: 1}
			byKey[key] = g
			groups = append(groups, g)
		}
		for _, g := range groups {
			what := Escape(FlowText(g.c))
			if g.n > 1 {
				what = fmt.Sprintf("%d %s flows to %s (e.g. %s)", g.n, g.c.Proto, g.c.Dst, Escape(FlowText(g.c)))
			}
			p.Para("  "+p.Paint(injection.EffectBlocks, "bypassing")+" ", what+": "+Escape(g.c.Why))
			if g.c.Rule != "" {
				p.Para("    let through by: ", Escape(g.c.Rule))
			}
		}
	}
	for _, n := range rep.Notes {
		if n == rep.NoRuleModel {
			continue // said on the drift line
		}
		p.Para(p.Effect(injection.EffectWarning)+": ", Escape(n))
	}
	if rep.Live != nil || rep.Drift != nil || len(rep.Traces) > 0 || len(rep.Notes) > 0 || rep.ConnectionsSummary != "" {
		fmt.Fprintln(p.Out)
	}
	for i, d := range rep.Dumps {
		if i > 0 {
			fmt.Fprintln(p.Out)
		}
		printRuleset(p, d)
	}
	if drifted {
		fmt.Fprintln(p.Out)
		p.Para(p.Bold("Drift")+" ", "(expected from "+Escape(rep.Expected)+")")
		for _, r := range rep.Drift.Missing {
			p.Para("  "+p.Paint(injection.EffectBlocks, "missing:  ")+" ", Escape(r))
		}
		for _, r := range rep.Drift.Extra {
			p.Para("  "+p.Paint(injection.EffectWarning, "extra:    ")+" ", Escape(r))
		}
		for _, c := range rep.Drift.Reordered {
			p.Para("  "+p.Paint(injection.EffectWarning, "reordered:")+" ", Escape(c)+": the same rules in another order")
		}
	}
	if len(rep.Connections) > 0 {
		fmt.Fprintln(p.Out)
		fmt.Fprintln(p.Out, p.Bold("Connections"))
		rows := make([][]string, 0, len(rep.Connections))
		for _, c := range rep.Connections {
			uid := "-"
			if c.UID != nil {
				uid = fmt.Sprint(*c.UID)
			}
			rows = append(rows, []string{Escape(c.Class), c.Proto, c.Src.String(), c.Dst.String(), c.ReplySrc.String(), uid, Escape(Dash(c.State))})
		}
		p.Table([]string{"CLASS", "PROTO", "FROM", "TO", "REPLIES FROM", "UID", "STATE"}, rows)
	}
	// A native ruleset's traces name its own tables and chains.
	var names func(string) string
	table := map[string]string{}
	for _, d := range rep.Dumps {
		if n := d.NativeNames(); n != nil {
			names = n
			for _, t := range d.Tables {
				table[t.Name] = t.Native
			}
		}
	}
	for _, tr := range rep.Traces {
		printTrace(p, tr, names, table)
	}
}

// printTrace prints one traced connection: the rules it meets, with their
// counters when the dump has them.
func printTrace(p *Printer, tr *capture.Trace, names func(string) string, tables map[string]string) {
	same := func(s string) string { return s }
	if names == nil {
		names = same
	}
	fmt.Fprintln(p.Out)
	p.Para(p.Bold("Trace")+" ", Escape(tr.Spec)+": "+Escape(names(tr.Summary)))
	for _, s := range tr.Path {
		count := "[no counters]"
		if s.Packets != nil && s.Bytes != nil {
			count = counters(*s.Packets, *s.Bytes)
		}
		table := s.Table
		if t := tables[s.Table]; t != "" {
			table = t
		}
		p.Para("    ", fmt.Sprintf("%s/%s %s %s", Escape(table), Escape(names(s.Chain)), count, Escape(s.Rule)))
	}
	for _, n := range tr.Notes {
		p.Para("    note: ", Escape(names(n)))
	}
}

// chainName is a chain's name as its ruleset has it: nft's own for a
// native nftables ruleset.
func chainName(c *capture.Chain) string {
	if c.Native != "" {
		return c.Native
	}
	return c.Name
}

func tableEmpty(t *capture.Table) bool {
	for _, c := range t.Chains {
		if len(c.Rules) > 0 {
			return false
		}
	}
	return true
}

func counters(p, b uint64) string { return fmt.Sprintf("[%d pkts, %d bytes]", p, b) }

// printRules prints a chain's rules, each followed by what it means, and
// the rules of the user chains it jumps to, nested.
func printRules(p *Printer, t *capture.Table, c *capture.Chain, indent string, printed map[string]bool, depth int, names func(string) string) {
	printed[c.Name] = true
	for _, r := range c.Rules {
		spec := strings.TrimPrefix(r.Spec, "-A "+c.Name+" ")
		cnt := counters(r.Packets, r.Bytes) + " "
		switch {
		case r.PacketsDelta != nil:
			cnt = fmt.Sprintf("[+%d pkts, +%d bytes] ", *r.PacketsDelta, *r.BytesDelta)
		case !r.HasCounters:
			cnt = "" // the dump had none (iptables-save without -c, iptables -S)
		case r.Rounded:
			cnt = fmt.Sprintf("[~%d pkts, ~%d bytes] ", r.Packets, r.Bytes)
		}
		p.Para(indent, cnt+Escape(spec))
		ann := r.Annotation
		if names != nil {
			ann = names(ann)
		}
		p.Para(indent+"  ↳ ", Escape(ann))
		if sub := t.Chain(r.Target); sub != nil && sub.Policy == "" && depth < 8 {
			p.Para(indent+"  ", Escape(chainName(sub)))
			printRules(p, t, sub, indent+"    ", printed, depth+1, names)
		}
	}
}

// FlowText is a flow in one phrase: "tcp 10.1.2.3:40000 → 10.96.0.1:443 (uid 1337)".
func FlowText(c capture.Connection) string {
	s := fmt.Sprintf("%s %s → %s", c.Proto, c.Src, c.Dst)
	if c.UID != nil {
		s += fmt.Sprintf(" (uid %d)", *c.UID)
	}
	return s
}

// printRuleset prints one dump: its tables, each built-in chain's rules
// with what they mean and the user chains they jump to, nested; a native
// nftables ruleset under its own names.
func printRuleset(p *Printer, d *capture.Ruleset) {
	backend := d.Backend
	if backend == "" {
		backend = "backend not stated"
	}
	fmt.Fprintf(p.Out, "%s (%s, %d rules)\n", p.Bold(map[string]string{"ipv4": "IPv4 rules", "ipv6": "IPv6 rules"}[d.Family]), Escape(backend), d.RuleCount())
	// A dump without counters (iptables -S, iptables-save without -c)
	// shows none rather than zeros.
	counted := false
	for _, t := range d.Tables {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				counted = counted || r.HasCounters
			}
		}
	}
	// A native nftables ruleset is shown with its own names.
	names := d.NativeNames()
	for _, t := range d.Tables {
		if tableEmpty(t) {
			continue
		}
		tname := t.Name
		if t.Native != "" {
			tname = t.Native
		}
		fmt.Fprintf(p.Out, "\n%s\n", p.Bold("table "+Escape(tname)))
		printed := map[string]bool{}
		for _, c := range t.Chains {
			if c.Policy == "" || len(c.Rules) == 0 {
				continue
			}
			policy := c.Policy
			if c.Native != "" {
				policy = strings.ToLower(policy) // nft's own word
			}
			head := fmt.Sprintf("%s (policy %s)", Escape(chainName(c)), Escape(policy))
			if counted {
				head += " " + counters(c.Packets, c.Bytes)
			}
			p.Para("  ", head)
			printRules(p, t, c, "    ", printed, 0, names)
		}
		for _, c := range t.Chains {
			if c.Policy == "" && !printed[c.Name] {
				p.Para("  ", Escape(chainName(c))+" (not jumped to from a built-in chain)")
				printRules(p, t, c, "    ", printed, 0, names)
			}
		}
	}
}
