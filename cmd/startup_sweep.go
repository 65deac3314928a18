package cmd

import (
	"encoding/json"
	"fmt"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// startupSweep keeps, of each report of a sweep, only what is printed of it
// (sweptList): its row for the table, its compact JSON for -o json|yaml.
type startupSweep struct {
	o    *StartupOptions
	p    *render.Printer
	list *render.SweptList
	buf  []byte
	// incomplete is the first incomplete report's list (the error names it);
	// unknowns are the distinct ones, in order, for the table's footer.
	incomplete []string
	unknowns   []string
	seen       map[string]bool
	// outcome is the exit, by diagnose's rule over the init and start
	// checks.
	outcome outcome
}

// startupClasses are the severities StartupSeverity gives, printed worst first.
const startupClasses = 4

func newStartupSweep(o *StartupOptions) *startupSweep {
	s := &startupSweep{o: o, seen: map[string]bool{}, list: render.NewSweptList(startupClasses), outcome: outcome{failOn: o.FailOn}}
	if o.Output == "" {
		s.p = render.NewPrinter(o.Out)
	}
	return s
}

// add keeps what is printed of r (extra: what else its checks read);
// r is not used afterwards.
func (s *startupSweep) add(r *startup.StartupReport, pod *corev1.Pod, extra diagnose.Facts) error {
	d := startupSlice(r, pod, extra)
	s.outcome.add(d)
	if s.o.Output == "" {
		render.Sanitize(r) // as print does: the footer and the error show it escaped
	}
	if len(r.Incomplete) > 0 && s.incomplete == nil {
		s.incomplete = r.Incomplete
	}
	for _, u := range r.Incomplete {
		if !s.seen[u] {
			s.seen[u] = true
			s.unknowns = append(s.unknowns, u)
		}
	}
	class := startupClasses - 1 - startup.StartupSeverity(r)
	render.EmptyLists(r)
	render.EmptyLists(d)
	item := render.StartupItem{StartupReport: r, Diagnosis: d}
	class, ns, name, err := s.o.sortBy.place(class, item, r.Namespace, r.Name)
	if err != nil {
		return err
	}
	if s.o.Output != "" {
		b, err := json.Marshal(item)
		if err != nil {
			return err
		}
		return s.list.Add(class, ns, name, b)
	}
	s.buf = render.AppendRow(s.buf[:0], render.StartupRow(s.p, r, d)...)
	return s.list.Add(class, ns, name, s.buf)
}

// print writes the kept reports worst first, as print writes a sweep's reports.
func (s *startupSweep) print() error {
	if s.o.Output != "" {
		return s.list.PrintList(s.o.Out, s.o.Output, "StartupReportList", nil)
	}
	if s.list.Len() == 0 {
		fmt.Fprintln(s.o.ErrOut, "No pods found.")
		return nil
	}
	rows, err := s.list.Rows()
	if err != nil {
		return err
	}
	s.p.Table(render.StartupHeaders, rows)
	for _, u := range s.unknowns {
		s.p.Para(s.p.Effect(injection.EffectUnknown)+": ", render.Escape(u))
	}
	return nil
}
