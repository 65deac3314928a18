package render

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"charm.land/lipgloss/v2"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

func StartupRows(p *Printer, rs []*startup.StartupReport, ds []*diagnose.Diagnosis) {
	of := map[*startup.StartupReport]*diagnose.Diagnosis{}
	for i, r := range rs {
		if i < len(ds) {
			of[r] = ds[i]
		}
	}
	SortStartup(rs)
	rows := make([][]string, 0, len(rs))
	for _, r := range rs {
		rows = append(rows, StartupRow(p, r, of[r]))
	}
	p.Table(StartupHeaders, rows)
}

// StartupRow is one pod's row in the table of many pods: its start, and
// diagnose's init and start checks on it (d, "-" when nil): their status
// and the first finding's code.
func StartupRow(p *Printer, r *startup.StartupReport, d *diagnose.Diagnosis) []string {
	status, code := "-", "-"
	if d != nil {
		status = p.Paint(StatusEffect(d.Status), d.Status)
		if c, title := RowTitle(d); c != "" {
			code = c
			if i := strings.LastIndex(title, " (+"); i >= 0 {
				code += title[i:]
			}
		}
	}
	init := r.InitResult
	if init == "failed" || init == "crash-looping" {
		init = p.Paint(injection.EffectBlocks, init)
	}
	return []string{Escape(r.Namespace), Escape(r.Name), r.Phase, init, Escape(strings.Join(r.StartOrder, ",")), status, code}
}

func fmtOffset(t *time.Time, origin time.Time) string {
	if t == nil {
		return "-"
	}
	return fmt.Sprintf("+%.1fs", t.Sub(origin).Seconds())
}

func exitOf(cs startup.ContainerStartup) string {
	if cs.ExitCode == nil {
		return "-"
	}
	return fmt.Sprint(*cs.ExitCode)
}

// Startup prints one pod: its containers, the timeline, hazards and events.
func Startup(p *Printer, r *startup.StartupReport) {
	origin := r.CreatedAt
	p.Para("", fmt.Sprintf("Pod %s/%s: %s on %s, created %s", Escape(r.Namespace), Escape(r.Name), Escape(r.Phase), Escape(Dash(r.Node)), origin.UTC().Format(time.RFC3339)))
	mode := "classic sidecar"
	switch {
	case r.Mesh == "":
		mode = "no sidecar"
	case r.Ambient:
		mode = "ambient mode, no sidecar"
	case r.Native:
		mode = "native sidecar"
	case r.Hold:
		mode = "classic sidecar, app held until the proxy is ready"
	}
	init := r.InitResult
	if init == "failed" || init == "crash-looping" {
		init = p.Paint(injection.EffectBlocks, init)
	}
	p.Para("Mesh: ", fmt.Sprintf("%s (%s); init: %s; order: %s", Dash(r.Mesh), mode, init, Escape(r.OrderVerdict)))
	// The answer first: what failed, and the hazards with their fixes.
	for _, cs := range append(append([]startup.ContainerStartup{}, r.InitContainers...), r.Containers...) {
		if cs.Failure != "" {
			p.Para(p.Paint(injection.EffectBlocks, "failure")+" "+Escape(cs.Name)+": ", Escape(cs.Failure))
		}
	}
	for _, h := range r.Hazards {
		id := Escape(h.ID)
		if h.Container != "" {
			id += " (" + Escape(h.Container) + ")"
		}
		p.Para(p.Paint(injection.EffectWarning, "hazard")+" "+id+": ", Escape(h.Message))
		p.FixLine("  fix: ", Escape(h.Fix))
	}
	fmt.Fprintln(p.Out)
	row := func(cs startup.ContainerStartup) []string {
		state := cs.State
		if cs.Reason != "" {
			state += " (" + cs.Reason + ")"
		}
		last := "-"
		if lt := cs.LastTermination; lt != nil {
			last = fmt.Sprintf("exit %d %s", lt.ExitCode, lt.Reason)
		}
		ready := "no"
		if cs.Ready {
			ready = "yes"
		}
		return []string{cs.Name, cs.Role, Escape(state), exitOf(cs), fmtOffset(cs.StartedAt, origin), fmtOffset(cs.FinishedAt, origin), ready, fmt.Sprint(cs.Restarts), last}
	}
	var rows [][]string
	for _, cs := range r.InitContainers {
		rows = append(rows, row(cs))
	}
	p.Table([]string{"INIT CONTAINER", "ROLE", "STATE", "EXIT", "STARTED", "FINISHED", "READY", "RESTARTS", "LAST TERMINATION"}, rows)
	fmt.Fprintln(p.Out)
	rows = nil
	for _, cs := range r.Containers {
		rows = append(rows, row(cs))
	}
	p.Table([]string{"CONTAINER", "ROLE", "STATE", "EXIT", "STARTED", "FINISHED", "READY", "RESTARTS", "LAST TERMINATION"}, rows)
	for _, cs := range append(append([]startup.ContainerStartup{}, r.InitContainers...), r.Containers...) {
		if cs.Log != nil {
			if cs.Log.Unavailable != "" {
				fmt.Fprintln(p.Out)
				p.Para("log of "+Escape(cs.Name)+" unavailable: ", Escape(cs.Log.Unavailable))
			}
			for _, part := range []struct {
				name  string
				lines []string
			}{{"previous run", cs.Log.Previous}, {"current run", cs.Log.Current}} {
				if len(part.lines) == 0 {
					continue
				}
				fmt.Fprintf(p.Out, "\nlast lines of %s (%s):\n", cs.Name, part.name)
				for _, l := range part.lines {
					p.Para("  | ", Escape(l))
				}
			}
		}
	}
	fmt.Fprintln(p.Out)
	p.Para(p.Bold("Timeline")+" ", "(0s = pod created; start order: "+Escape(strings.Join(r.StartOrder, " → "))+")")
	p.Para("", "# ran and finished, = running, x failed, * restarted, R ready, > still running")
	printTimeline(p, r, origin)
	if len(r.Events) > 0 {
		fmt.Fprintf(p.Out, "\n%s\n", p.Bold("Events"))
		var rows [][]string
		for _, e := range r.Events {
			rows = append(rows, []string{fmtOffset(&e.Time, origin), Escape(e.Reason), Escape(Dash(e.Container)), fmt.Sprintf("%d", e.Count), Escape(Truncate(e.Message, 120))})
		}
		p.Table([]string{"AT", "REASON", "CONTAINER", "COUNT", "MESSAGE"}, rows)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(p.Out)
		p.Para("note: ", Escape(n))
	}
	for _, u := range r.Incomplete {
		fmt.Fprintln(p.Out)
		p.Para(p.Effect(injection.EffectUnknown)+": ", Escape(u))
	}
}

// printTimeline draws one bar per container on a common time axis: '#' a
// completed run, '=' running, 'x' the end of a failed run, '*' the start of
// the latest restart, 'R' when it became ready (when known), '>' still
// running past the axis.
func printTimeline(p *Printer, r *startup.StartupReport, origin time.Time) {
	all := append(append([]startup.ContainerStartup{}, r.InitContainers...), r.Containers...)
	details := make([]string, len(all))
	nameWidth, detailWidth := len("CONTAINER"), 0
	for i, cs := range all {
		d := cs.State
		if cs.Reason != "" {
			d += " (" + cs.Reason + ")"
		}
		if cs.Restarts > 0 {
			d += fmt.Sprintf(", %d restarts", cs.Restarts)
		}
		details[i] = Escape(d)
		nameWidth = max(nameWidth, lipgloss.Width(Escape(cs.Name)))
		detailWidth = max(detailWidth, lipgloss.Width(details[i]))
	}
	// The bar is 48 wide, narrower on a narrow terminal (at least 16); when
	// the state still does not fit after it, it goes on a line of its own.
	width, below := 48, false
	if p.Width > 0 {
		room := p.Width - nameWidth - len("   |")
		width = min(48, room-len("|   ")-detailWidth)
		if width < 16 {
			width, below = min(48, max(room-1, 8)), true
		}
	}
	end := origin
	for _, cs := range all {
		var lastEnd *time.Time
		if cs.LastTermination != nil {
			lastEnd = cs.LastTermination.FinishedAt
		}
		for _, t := range []*time.Time{cs.FirstStartedAt, cs.StartedAt, cs.FinishedAt, cs.ReadyAt, lastEnd} {
			if t != nil && t.After(end) {
				end = *t
			}
		}
	}
	span := end.Sub(origin)
	if span <= 0 {
		span = time.Second
	}
	pos := func(t time.Time) int {
		i := int(float64(width-1) * float64(t.Sub(origin)) / float64(span))
		return min(max(i, 0), width-1)
	}
	label := fmt.Sprintf("%.1fs", span.Seconds())
	fmt.Fprintf(p.Out, "%-*s   %s%s%s\n", nameWidth, "CONTAINER", " 0s", strings.Repeat(" ", max(0, width-len(label)-1)), label)
	for ci, cs := range all {
		bar := []rune(strings.Repeat(" ", width))
		style := injection.EffectInfoOnly
		if cs.FirstStartedAt != nil {
			from := pos(*cs.FirstStartedAt)
			to := width - 1
			fill := '='
			failedRun := cs.ExitCode != nil && *cs.ExitCode != 0
			switch {
			case cs.FinishedAt != nil:
				to, fill = pos(*cs.FinishedAt), '#'
			case cs.State == "waiting" && cs.LastTermination != nil && cs.LastTermination.FinishedAt != nil:
				// Waiting to restart: the bar ends where the last run ended.
				to, fill = pos(*cs.LastTermination.FinishedAt), '#'
				failedRun = cs.LastTermination.ExitCode != 0
			}
			for i := from; i <= to; i++ {
				bar[i] = fill
			}
			switch {
			case failedRun:
				bar[to] = 'x'
				style = injection.EffectBlocks
			case cs.FinishedAt == nil && cs.State == "running":
				bar[width-1] = '>'
				style = injection.EffectInject
			}
			if cs.Restarts > 0 && cs.StartedAt != nil {
				bar[pos(*cs.StartedAt)] = '*'
			}
			if cs.ReadyAt != nil {
				bar[pos(*cs.ReadyAt)] = 'R'
			}
		}
		name := Escape(cs.Name) + strings.Repeat(" ", nameWidth-lipgloss.Width(Escape(cs.Name)))
		if below {
			fmt.Fprintf(p.Out, "%s   |%s|\n", name, p.Paint(style, string(bar)))
			p.Para(strings.Repeat(" ", nameWidth+4), details[ci])
			continue
		}
		fmt.Fprintf(p.Out, "%s   |%s|   %s\n", name, p.Paint(style, string(bar)), details[ci])
	}
}

// SortStartup puts reports in the order a sweep prints them (startupSweep's
// classes): worst first, then by namespace and name.
func SortStartup(rs []*startup.StartupReport) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := startup.StartupSeverity(rs[i]), startup.StartupSeverity(rs[j])
		if a != b {
			return a > b
		}
		return KeyBefore(rs[i].Namespace, rs[i].Name, rs[j].Namespace, rs[j].Name)
	})
}

var StartupHeaders = []string{"NAMESPACE", "POD", "PHASE", "INIT", "START ORDER", "STATUS", "CODE"}
