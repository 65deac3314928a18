package cmd

import (
	"encoding/json"
	"fmt"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// diagnoseSweep keeps, of each diagnosis of a sweep, only what is printed
// of it (sweptList): its row for the table, its compact JSON for -o
// json|yaml; the counts per check and what decides the exit are counted as
// the diagnoses come.
type diagnoseSweep struct {
	o       *DiagnoseOptions
	p       *render.Printer
	list    *render.SweptList
	buf     []byte
	counts  []render.CheckCount
	status  map[string]int
	outcome outcome
	// workloads counts the diagnoses of workloads with no pod to check.
	workloads int
	// only is the first diagnosis, kept while it is the only one: a sweep
	// that finds one pod shows it whole.
	only *diagnose.Diagnosis
	// sigs are what each row shows, for -w (watchKey → signature).
	sigs map[string]string
}

func newDiagnoseSweep(o *DiagnoseOptions) *diagnoseSweep {
	s := &diagnoseSweep{o: o, outcome: outcome{failOn: o.FailOn}, list: render.NewSweptList(len(render.StatusRank) * (len(diagnose.Order) + 1)), counts: render.CountChecks(nil), status: map[string]int{}}
	if !o.structured() {
		s.p = render.NewPrinter(o.Out)
	}
	return s
}

// add keeps what is printed of d.
func (s *diagnoseSweep) add(d *diagnose.Diagnosis) error {
	s.outcome.add(d)
	if s.o.Watch {
		if s.sigs == nil {
			s.sigs = map[string]string{}
		}
		s.sigs[watchKey(d)] = signature(d)
	}
	s.status[d.Status]++
	if d.WorkloadKind != "Pod" {
		s.workloads++
	}
	render.AddCounts(s.counts, d)
	if s.list.Len() == 0 {
		s.only = d
	} else {
		s.only = nil
	}
	// Its status's rank, then its first check's (none: last).
	class := render.StatusRank[d.Status]*(len(diagnose.Order)+1) + render.CheckRank(d.First)
	render.EmptyLists(d)
	class, ns, name, err := s.o.sortBy.place(class, d, d.Namespace, d.Name)
	if err != nil {
		return err
	}
	if s.o.structured() {
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		return s.list.Add(class, ns, name, b)
	}
	render.Sanitize(d)
	s.buf = render.AppendRow(s.buf[:0], render.DiagnosisRow(s.p, d, s.o.wide())...)
	return s.list.Add(class, ns, name, s.buf)
}

// print writes the kept diagnoses worst first, as print writes a list.
func (s *diagnoseSweep) print(incomplete []string) error {
	if s.o.structured() {
		return s.list.PrintList(s.o.Out, s.o.Output, "DiagnosisList", nil, render.Field{Key: "summary", Value: s.counts}, render.Field{Key: "incomplete", Value: incomplete})
	}
	switch s.list.Len() {
	case 0:
		// Nothing to diagnose, and nothing left of a pod admission
		// refused: its manifest is what can be checked.
		fmt.Fprintln(s.o.ErrOut, "No pods found.\nA pod that admission refused leaves no object and no event behind: kubectl mesh diagnose -f FILE --verify puts its manifest through admission (a dry run) and names what refuses it.")
	case 1:
		render.Diagnosis(s.p, s.only)
	default:
		rows, err := s.list.Rows()
		if err != nil {
			return err
		}
		render.DiagnosisTable(s.p, s.list.Len()-s.workloads, s.workloads, s.status, rows, s.counts, s.o.wide())
	}
	render.Incomplete(s.p, incomplete)
	return nil
}
