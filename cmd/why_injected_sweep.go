package cmd

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// injectionSweep keeps, of each report of a sweep (or of a workload's pods),
// only what is printed of it (sweptList), in the order SortReports gives:
// for -o json|yaml its compact JSON, for the table its row with its fix, its
// disagreement and what it needs. The namespaces' summary is counted as the
// reports come.
type injectionSweep struct {
	o     *WhyInjectedOptions
	p     *render.Printer
	facts *injection.ClusterFacts // nil: no summary (a workload's pods)
	// verified gives the table its VERIFIED column.
	verified  bool
	list      *render.SweptList
	summaries injection.Summaries
	enc       render.MemoEncoder
	buf       []byte
	// sigs are what each row shows, for -w (key → signature).
	sigs map[string]string
}

// reportKey names a report across runs of -w; reportSignature is what its
// row shows.
func reportKey(r *injection.InjectionReport) string {
	return r.Namespace + "/" + r.Kind + "/" + r.Name
}

func reportSignature(r *injection.InjectionReport, d *diagnose.Diagnosis) string {
	sig := fmt.Sprint(r.Injected != nil && *r.Injected, r.Expected == nil, r.Expected != nil && *r.Expected, "|", r.Revision, "|", r.Reason)
	if d != nil {
		sig += "|" + d.Status + "|" + d.Code
	}
	return sig
}

// newInjectionSweep keeps reports for o's output; the table is printed
// with p.
func newInjectionSweep(o *WhyInjectedOptions, p *render.Printer, facts *injection.ClusterFacts, verified bool) *injectionSweep {
	return &injectionSweep{o: o, p: p, facts: facts, verified: verified, list: render.NewSweptList(injection.Ranks)}
}

// printPodRows prints one row per pod, mismatches first, then (with facts,
// for a sweep) a summary per namespace and the commands that fix the
// mismatches.
//
// ds are the reports' injection slices, when the caller has them (made
// with their pods): else they are made of the reports alone.
func printPodRows(p *render.Printer, reports []*injection.InjectionReport, facts *injection.ClusterFacts, ds ...*diagnose.Diagnosis) error {
	s := newInjectionSweep(&WhyInjectedOptions{}, p, facts, anyVerified(reports))
	for i, r := range reports {
		d := (*diagnose.Diagnosis)(nil)
		if len(ds) == len(reports) {
			d = ds[i]
		} else {
			d = injectionSlice(r, nil)
		}
		if err := s.add(r, d); err != nil {
			return err
		}
	}
	return s.printTable()
}

// anyVerified tells whether --verify answered for any of the reports.
func anyVerified(reports []*injection.InjectionReport) bool {
	for _, r := range reports {
		if r.Verified != nil || r.NotVerified != "" {
			return true
		}
	}
	return false
}

// A kept report for -o json|yaml is itemJSON and its compact JSON, or
// itemShared, the number of the memo's answer it shares (render.MemoEncoder) and
// the names of the pod and its owner.
const (
	itemJSON = iota
	itemShared
)

// item appends the report a kept item encodes to dst.
func (s *injectionSweep) item(dst, b []byte, indented bool) ([]byte, error) {
	if len(b) > 0 && b[0] == itemShared {
		id, n := binary.Uvarint(b[1:])
		names, err := render.ReadRow(b[1+max(n, 0):])
		if n <= 0 || err != nil || id >= uint64(s.enc.Len()) || len(names) != 2 {
			return nil, fmt.Errorf("internal error: a kept report cannot be read back")
		}
		return s.enc.Named(dst, int(id), names[0], names[1], indented), nil
	}
	if len(b) == 0 || b[0] != itemJSON {
		return nil, fmt.Errorf("internal error: a kept report cannot be read back")
	}
	if indented {
		return render.IndentJSON(dst, b[1:], "    ", "  "), nil
	}
	return append(dst, b[1:]...), nil
}

// The fields of a kept table row after its cells.
const (
	rowFix = iota
	rowDisagreeing
	rowDisagreement
	rowNeeds
)

// add keeps what is printed of r.
func (s *injectionSweep) add(r *injection.InjectionReport, d *diagnose.Diagnosis) error {
	rank, ns, key, err := s.o.sortBy.place(injection.Rank(r), r, r.Namespace, r.Name)
	if err != nil {
		return err
	}
	if s.o.Watch {
		if s.sigs == nil {
			s.sigs = map[string]string{}
		}
		s.sigs[reportKey(r)] = reportSignature(r, d)
	}
	if s.o.Output != "" {
		s.summaries.Add(r)
		shared, name, owner, ok := r.MemoAnswer()
		if ok && !s.o.Verify {
			id, err := s.enc.ID(shared)
			if err != nil {
				return err
			}
			s.buf = binary.AppendUvarint(append(s.buf[:0], itemShared), uint64(id))
			s.buf = render.AppendRow(s.buf, name, owner)
		} else {
			b, err := render.EncodeReport(r)
			if err != nil {
				return err
			}
			s.buf = append(append(s.buf[:0], itemJSON), b...)
		}
		return s.list.Add(rank, ns, key, s.buf)
	}
	render.Sanitize(r)
	s.summaries.Add(r)
	p := s.p
	expected := p.YesNo(r.Expected)
	if r.Expected == nil {
		expected = p.Effect(injection.EffectUnknown)
	}
	name := r.Name
	if r.Kind != "Pod" {
		name = strings.ToLower(r.Kind) + "/" + r.Name
	}
	reason, fix := render.Escape(r.Reason), ""
	switch {
	case d != nil && (d.Status == diagnose.Fail || d.Status == diagnose.Warning):
		// diagnose's status and code for the same answer.
		// One painted word: a table cell wraps at spaces, and a painted
		// span must not be cut.
		reason = p.Paint(render.StatusEffect(d.Status), d.Status) + " " + d.Code + ": " + reason
		// The report's own fix for what it decides; the catalogue's for
		// what a check of its own found (the same as diagnose prints).
		fix = r.Fix
		if fix == "" || !diagnose.FromReport(d.Code) {
			fix = d.Fix
		}
	case r.IsMismatch() || r.CreationBlocked:
		reason = p.Effect(injection.EffectWarning) + ": " + reason
		fix = r.Fix
	}
	cells := []string{render.Escape(r.Namespace), render.Escape(name), p.YesNo(r.Injected), expected, render.Escape(render.Dash(r.Revision)), reason}
	if s.verified {
		cells = append(cells[:5], render.ProofCell(p, r), reason)
	}
	var who, disagreement string
	if r.Verified != nil && r.Verified.Agrees != nil && !*r.Verified.Agrees {
		who, disagreement = render.Escape(r.Namespace)+"/"+render.Escape(r.Name), r.Verified.Disagreement
	}
	s.buf = render.AppendRow(s.buf[:0], cells...)
	s.buf = render.AppendRow(s.buf, fix, who, disagreement)
	s.buf = render.AppendRow(s.buf, r.Needs...)
	return s.list.Add(rank, ns, key, s.buf)
}

// print prints a sweep's kept reports: for -o json|yaml a list with the
// namespaces' summary and the incomplete facts, else the table.
func (s *injectionSweep) print(incomplete []string) error {
	switch {
	case s.o.Output != "":
		return s.list.PrintList(s.o.Out, s.o.Output, "InjectionReportList", s.item,
			render.Field{Key: "summary", Value: s.summaries.List(s.facts)}, render.Field{Key: "incomplete", Value: incomplete})
	case s.list.Len() == 0:
		fmt.Fprintln(s.o.ErrOut, "No pods found.")
		return nil
	}
	return s.printTable()
}

// injectionHeaders are a sweep's columns.
func injectionHeaders(verified bool) []string {
	if verified {
		return []string{"NAMESPACE", "POD", "INJECTED", "EXPECTED", "REVISION", "VERIFIED", "REASON"}
	}
	return []string{"NAMESPACE", "POD", "INJECTED", "EXPECTED", "REVISION", "REASON"}
}

// printTable is printPodRows of the kept reports.
func (s *injectionSweep) printTable() error {
	headers := injectionHeaders(s.verified)
	p, cells := s.p, len(headers)
	rows := make([][]string, 0, s.list.Len())
	var fixes, needs []string
	var disagreements [][2]string
	seen, seenNeed := map[string]bool{}, map[string]bool{}
	err := s.list.Each(func(b []byte) error {
		f, err := render.ReadRow(b)
		if err != nil {
			return err
		}
		if len(f) < cells+rowNeeds {
			return fmt.Errorf("internal error: a kept row has %d fields", len(f))
		}
		rows = append(rows, f[:cells:cells])
		more := f[cells:]
		if fix := more[rowFix]; fix != "" && !seen[fix] {
			seen[fix] = true
			fixes = append(fixes, fix)
		}
		if more[rowDisagreeing] != "" {
			disagreements = append(disagreements, [2]string{more[rowDisagreeing], more[rowDisagreement]})
		}
		for _, n := range more[rowNeeds:] {
			if !seenNeed[n] {
				seenNeed[n] = true
				needs = append(needs, n)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.Table(headers, rows)
	for _, d := range disagreements {
		fmt.Fprintln(p.Out)
		p.Para(p.Paint(injection.EffectBlocks, "DISAGREEMENT")+" "+d[0]+": ", render.Escape(d[1]))
	}
	if len(disagreements) > 0 {
		p.Para("", render.ReportHint)
	}
	if s.facts != nil {
		fmt.Fprintln(p.Out)
		var srows [][]string
		for _, s := range s.summaries.List(s.facts) {
			exp := fmt.Sprint(s.Expected)
			if s.Unknown > 0 {
				exp += fmt.Sprintf(" (+%d unknown)", s.Unknown)
			}
			srows = append(srows, []string{render.Escape(s.Namespace), fmt.Sprint(s.Pods), fmt.Sprint(s.Injected), exp,
				fmt.Sprint(s.Mismatched), render.Escape(render.Dash(s.Labels)), s.Description})
		}
		p.Table([]string{"NAMESPACE", "PODS", "INJECTED", "EXPECTED", "MISMATCHED", "LABELS", "SUMMARY"}, srows)
	}
	if len(needs) > 0 {
		fmt.Fprintln(p.Out)
		p.Para(p.Bold("Unknown:")+" ", "whether some pods would be injected if re-created; it needs permission to:")
		for _, n := range needs {
			p.Para("  ", render.Escape(n))
		}
		if hint := render.CanIHint(needs); hint != "" {
			p.Para("  ", render.Escape(hint))
		}
	}
	if len(fixes) > 0 {
		fmt.Fprintf(p.Out, "\n%s\n", p.Bold("To fix the mismatches:"))
		for _, f := range fixes {
			for _, l := range strings.Split(f, "\n") {
				p.FixLine("  ", render.Escape(l))
			}
		}
	}
	return nil
}
