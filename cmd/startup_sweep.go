package cmd

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// startupSweep keeps, of each report of a sweep, only what is printed of it
// and the order it is printed in: for -o json|yaml the report encoded as
// compact JSON, packed into large byte chunks the garbage collector need not
// scan; for the table its row. A report of a few containers is about 1 KB of
// structs and pointers; 100,000 of them held until the sort were most of a
// sweep's memory and kept the collector busy.
type startupSweep struct {
	o     *StartupOptions
	p     *printer
	items []sweptReport
	chunk []byte
	names map[string]string // namespaces, interned
	// incomplete is the first incomplete report's list (the error names it);
	// unknowns are the distinct ones, in order, for the table's footer.
	incomplete []string
	unknowns   []string
	seen       map[string]bool
}

type sweptReport struct {
	severity  int
	namespace string
	name      string
	encoded   []byte   // structured output: the report as compact JSON
	row       []string // table
}

const sweepChunk = 1 << 20

func newStartupSweep(o *StartupOptions) *startupSweep {
	s := &startupSweep{o: o, names: map[string]string{}, seen: map[string]bool{}}
	if o.Output == "" {
		s.p = newPrinter(o.Out)
	}
	return s
}

// add keeps what is printed of r; r is not used afterwards.
func (s *startupSweep) add(r *startup.StartupReport) error {
	if s.o.Output == "" {
		sanitize(r) // as print does: the footer and the error show it escaped
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
	ns, ok := s.names[r.Namespace]
	if !ok {
		ns = r.Namespace
		s.names[ns] = ns
	}
	it := sweptReport{severity: startup.StartupSeverity(r), namespace: ns, name: r.Name}
	if s.o.Output == "" {
		it.row = startupRow(s.p, r)
	} else {
		emptyLists(r)
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		it.encoded = s.store(b)
	}
	s.items = append(s.items, it)
	return nil
}

// store copies b into the current chunk (a new one when it is full).
func (s *startupSweep) store(b []byte) []byte {
	if len(s.chunk)+len(b) > cap(s.chunk) {
		s.chunk = make([]byte, 0, max(sweepChunk, len(b)))
	}
	start := len(s.chunk)
	s.chunk = append(s.chunk, b...)
	return s.chunk[start:len(s.chunk):len(s.chunk)]
}

// print writes the kept reports worst first, as print writes a sweep's reports.
func (s *startupSweep) print() error {
	sort.Slice(s.items, func(i, j int) bool {
		a, b := &s.items[i], &s.items[j]
		if a.severity != b.severity {
			return a.severity > b.severity
		}
		if a.namespace != b.namespace {
			return a.namespace < b.namespace
		}
		return a.name < b.name
	})
	if s.o.Output != "" {
		var buf []byte
		return printList(s.o.Out, s.o.Output, "StartupReportList", len(s.items), func(i int) any {
			if s.o.Output == outputJSON {
				buf = indentJSON(buf[:0], s.items[i].encoded, "    ", "  ")
				return encodedItem(buf)
			}
			return json.RawMessage(s.items[i].encoded)
		})
	}
	if len(s.items) == 0 {
		fmt.Fprintln(s.o.ErrOut, "No pods found.")
		return nil
	}
	rows := make([][]string, len(s.items))
	for i := range s.items {
		rows[i] = s.items[i].row
	}
	s.p.table(startupHeaders, rows)
	for _, u := range s.unknowns {
		s.p.para(s.p.effect(injection.EffectUnknown)+": ", escape(u))
	}
	return nil
}
