package cmd

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// startupSweep keeps, of each report of a sweep, only what is printed of it
// and the order it is printed in. A report of a few containers is about 1 KB
// of structs and pointers; 100,000 of them held until the sort were most of a
// sweep's memory and kept the collector busy.
//
// The table keeps each pod's row. Structured output keeps each report as
// compact JSON: while the pods arrive sorted by namespace and name (the
// apiserver's order, for a streamed list as for pages), compressed into one
// stream per severity, which print reads back worst first — the sorted order
// with nothing to sort; once a pod arrives out of order, uncompressed, in
// chunks the collector need not scan, sorted at the end.
type startupSweep struct {
	o     *StartupOptions
	p     *printer
	items []sweptReport
	chunk []byte
	names map[string]string // namespaces, interned
	// inOrder holds while the pods arrive sorted; then the reports are in
	// classes (by severity), not items.
	inOrder         bool
	lastNS, lastPod string
	classes         [4]sweptClass
	count           int
	// incomplete is the first incomplete report's list (the error names it);
	// unknowns are the distinct ones, in order, for the table's footer.
	incomplete []string
	unknowns   []string
	seen       map[string]bool
}

// sweptClass is the reports of one severity, in arrival order: each one's
// length (uvarint) and compact JSON, compressed.
type sweptClass struct {
	z   *flate.Writer
	buf bytes.Buffer
	n   int
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
	s := &startupSweep{o: o, names: map[string]string{}, seen: map[string]bool{}, inOrder: o.Output != ""}
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
	severity := startup.StartupSeverity(r)
	if s.o.Output != "" {
		emptyLists(r)
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		// In order: after the last pod in the order print uses, severity aside.
		outOfOrder := s.count > 0 && !startupBefore(0, s.lastNS, s.lastPod, 0, r.Namespace, r.Name)
		if s.inOrder && (outOfOrder || severity < 0 || severity >= len(s.classes)) {
			if err := s.unfold(); err != nil {
				return err
			}
		}
		s.count++
		if s.inOrder {
			s.lastNS, s.lastPod = r.Namespace, r.Name
			return s.classes[severity].add(b)
		}
		s.keep(severity, r.Namespace, r.Name, b, nil)
		return nil
	}
	s.keep(severity, r.Namespace, r.Name, nil, startupRow(s.p, r))
	return nil
}

func (s *startupSweep) keep(severity int, namespace, name string, encoded []byte, row []string) {
	ns, ok := s.names[namespace]
	if !ok {
		ns = namespace
		s.names[ns] = ns
	}
	it := sweptReport{severity: severity, namespace: ns, name: name, row: row}
	if encoded != nil {
		it.encoded = s.store(encoded)
	}
	s.items = append(s.items, it)
}

func (c *sweptClass) add(b []byte) error {
	if c.z == nil {
		var err error
		if c.z, err = flate.NewWriter(&c.buf, flate.BestSpeed); err != nil {
			return err
		}
	}
	c.n++
	var size [binary.MaxVarintLen64]byte
	if _, err := c.z.Write(size[:binary.PutUvarint(size[:], uint64(len(b)))]); err != nil {
		return err
	}
	_, err := c.z.Write(b)
	return err
}

// each calls fn with each report of the class, in order (b is reused).
func (c *sweptClass) each(fn func(b []byte) error) error {
	if c.n == 0 {
		return nil
	}
	if err := c.z.Close(); err != nil {
		return err
	}
	zr := flate.NewReader(&c.buf)
	defer zr.Close()
	r := bufio.NewReaderSize(zr, 64<<10)
	var b []byte
	for i := 0; i < c.n; i++ {
		size, err := binary.ReadUvarint(r)
		if err != nil {
			return fmt.Errorf("internal error: report %d of %d: %w", i+1, c.n, err)
		}
		if uint64(cap(b)) < size {
			b = make([]byte, size)
		}
		b = b[:size]
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("internal error: report %d of %d: %w", i+1, c.n, err)
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	*c = sweptClass{}
	return nil
}

// unfold turns the classes into items, for a sweep whose pods came out of order.
func (s *startupSweep) unfold() error {
	s.inOrder = false
	for severity := range s.classes {
		err := s.classes[severity].each(func(b []byte) error {
			var id struct{ Namespace, Name string }
			if err := json.Unmarshal(b, &id); err != nil {
				return err
			}
			s.keep(severity, id.Namespace, id.Name, b, nil)
			return nil
		})
		if err != nil {
			return err
		}
	}
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
	if s.o.Output != "" && s.inOrder {
		return s.printClasses()
	}
	sort.Slice(s.items, func(i, j int) bool {
		a, b := &s.items[i], &s.items[j]
		return startupBefore(a.severity, a.namespace, a.name, b.severity, b.namespace, b.name)
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

// printClasses prints the classes, worst first: each is in namespace and name
// order already. The list is written while the classes are read back.
func (s *startupSweep) printClasses() error {
	next := make(chan []byte)
	done := make(chan struct{})
	var readErr error
	go func() {
		defer close(next)
		for severity := len(s.classes) - 1; severity >= 0 && readErr == nil; severity-- {
			readErr = s.classes[severity].each(func(b []byte) error {
				var out []byte
				if s.o.Output == outputJSON {
					out = indentJSON(nil, b, "    ", "  ")
				} else {
					out = append([]byte(nil), b...)
				}
				select {
				case next <- out:
					return nil
				case <-done:
					return io.ErrClosedPipe
				}
			})
		}
	}()
	err := printList(s.o.Out, s.o.Output, "StartupReportList", s.count, func(int) any {
		b := <-next
		if s.o.Output == outputJSON {
			return encodedItem(b)
		}
		return json.RawMessage(b)
	})
	close(done)
	for range next {
	}
	if err != nil {
		return err
	}
	return readErr
}
