package render

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// sweptList keeps what a sweep prints of each pod — its report as compact
// JSON, or its table row — encoded, and gives it back in the order a sweep
// prints: by class (a sweep's worst first), then namespace, then name; pods
// of one class and key in the order they were added. A report of a few
// containers is about 1 KB of structs and pointers; 100,000 of them held
// until the sort were most of a sweep's memory and kept the collector busy.
//
// Pods arrive sorted by namespace and name (the apiserver's order, for a
// streamed list as for pages), so each class is a stream in print order
// already: it is kept compressed, with nothing to sort. An item that arrives
// out of its class's order (a workload reported after the pods, a server
// that does not sort) is kept uncompressed, in chunks the collector need not
// scan, sorted at the end and merged in.
type SweptList struct {
	classes []SweptClass
	late    []SweptItem
	chunk   []byte
	names   map[string]string // namespaces, interned
	count   int
	scratch []byte
}

// sweptClass is the items of one class in print order: each one's namespace,
// name and encoding, each preceded by its length (uvarint), compressed.
type SweptClass struct {
	z                *flate.Writer
	buf              bytes.Buffer
	n                int
	lastNS, lastName string
}

type SweptItem struct {
	class           int
	namespace, name string
	encoded         []byte
}

const sweepChunk = 1 << 20

func NewSweptList(classes int) *SweptList {
	return &SweptList{classes: make([]SweptClass, classes), names: map[string]string{}}
}

func (l *SweptList) Len() int { return l.count }

// add keeps b (it is copied) as the item of class for the pod namespace/name.
func (l *SweptList) Add(class int, namespace, name string, b []byte) error {
	l.count++
	if class >= 0 && class < len(l.classes) {
		c := &l.classes[class]
		if c.n == 0 || !KeyBefore(namespace, name, c.lastNS, c.lastName) {
			c.lastNS, c.lastName = l.Intern(namespace), name
			var err error
			l.scratch, err = c.Add(l.scratch, namespace, name, b)
			return err
		}
	}
	start := len(l.chunk)
	if start+len(b) > cap(l.chunk) {
		l.chunk, start = make([]byte, 0, max(sweepChunk, len(b))), 0
	}
	l.chunk = append(l.chunk, b...)
	l.late = append(l.late, SweptItem{class: class, namespace: l.Intern(namespace), name: name,
		encoded: l.chunk[start:len(l.chunk):len(l.chunk)]})
	return nil
}

func (l *SweptList) Intern(ns string) string {
	if s, ok := l.names[ns]; ok {
		return s
	}
	l.names[ns] = ns
	return ns
}

// keyBefore orders pods by namespace, then name.
func KeyBefore(nsA, nameA, nsB, nameB string) bool {
	if nsA != nsB {
		return nsA < nsB
	}
	return nameA < nameB
}

// add appends namespace, name and b to the class's stream; scratch is a
// buffer add may reuse, returned.
func (c *SweptClass) Add(scratch []byte, namespace, name string, b []byte) ([]byte, error) {
	if c.z == nil {
		var err error
		if c.z, err = flate.NewWriter(&c.buf, flate.BestSpeed); err != nil {
			return scratch, err
		}
	}
	c.n++
	scratch = AppendRow(scratch[:0], namespace, name)
	scratch = binary.AppendUvarint(scratch, uint64(len(b)))
	if _, err := c.z.Write(scratch); err != nil {
		return scratch, err
	}
	_, err := c.z.Write(b)
	return scratch, err
}

// each calls fn with every item in print order; b is valid during the call
// only. It gives the items back once: they are let go as they are read.
func (l *SweptList) Each(fn func(b []byte) error) error {
	sort.SliceStable(l.late, func(i, j int) bool {
		a, b := &l.late[i], &l.late[j]
		if a.class != b.class {
			return a.class < b.class
		}
		return KeyBefore(a.namespace, a.name, b.namespace, b.name)
	})
	late := l.late
	emit := func(until func(it *SweptItem) bool) error {
		for len(late) > 0 && until(&late[0]) {
			if err := fn(late[0].encoded); err != nil {
				return err
			}
			late = late[1:]
		}
		return nil
	}
	for class := range l.classes {
		if err := emit(func(it *SweptItem) bool { return it.class < class }); err != nil {
			return err
		}
		err := l.classes[class].Each(func(ns, name, b []byte) error {
			// Of equal keys, the streamed item came first.
			if err := emit(func(it *SweptItem) bool {
				return it.class == class && KeyBefore(it.namespace, it.name, string(ns), string(name))
			}); err != nil {
				return err
			}
			return fn(b)
		})
		if err != nil {
			return err
		}
	}
	if err := emit(func(*SweptItem) bool { return true }); err != nil {
		return err
	}
	l.late, l.chunk = nil, nil
	return nil
}

// each calls fn with each item of the class, in order (the slices are reused).
func (c *SweptClass) Each(fn func(ns, name, b []byte) error) error {
	if c.n == 0 {
		return nil
	}
	if err := c.z.Close(); err != nil {
		return err
	}
	zr := flate.NewReader(&c.buf)
	defer zr.Close()
	r := bufio.NewReaderSize(zr, 64<<10)
	var fields [3][]byte
	for i := 0; i < c.n; i++ {
		for f := range fields {
			size, err := binary.ReadUvarint(r)
			if err == nil && size > 1<<30 {
				err = fmt.Errorf("length %d", size)
			}
			if err != nil {
				return fmt.Errorf("internal error: item %d of %d: %w", i+1, c.n, err)
			}
			if uint64(cap(fields[f])) < size {
				fields[f] = make([]byte, size)
			}
			fields[f] = fields[f][:size]
			if _, err := io.ReadFull(r, fields[f]); err != nil {
				return fmt.Errorf("internal error: item %d of %d: %w", i+1, c.n, err)
			}
		}
		if err := fn(fields[0], fields[1], fields[2]); err != nil {
			return err
		}
	}
	*c = SweptClass{}
	return nil
}

// printList prints the items as printList prints a list of reports: item
// appends to dst the report an item encodes, as compact JSON, or indented
// under "    " (nil: the items are compact JSON). The items are read back
// on another core while the list is written.
func (l *SweptList) PrintList(w io.Writer, format, kind string, item func(dst, b []byte, indented bool) ([]byte, error), extra ...Field) error {
	if item == nil {
		item = func(dst, b []byte, indented bool) ([]byte, error) {
			if indented {
				return IndentJSON(dst, b, "    ", "  "), nil
			}
			return append(dst, b...), nil
		}
	}
	n := l.count
	next := make(chan []byte)
	done := make(chan struct{})
	var readErr error
	go func() {
		defer close(next)
		readErr = l.Each(func(b []byte) error {
			out, err := item(nil, b, format == JSON)
			if err != nil {
				return err
			}
			select {
			case next <- out:
				return nil
			case <-done:
				return io.ErrClosedPipe
			}
		})
	}()
	err := List(w, format, kind, n, func(int) any {
		b, ok := <-next
		if !ok {
			return json.RawMessage("null")
		}
		if format == JSON {
			return EncodedItem(b)
		}
		return json.RawMessage(b)
	}, extra...)
	close(done)
	for range next {
	}
	if err != nil {
		return err
	}
	return readErr
}

// appendRow encodes a table row (and whatever else goes with it) as an item.
func AppendRow(dst []byte, cells ...string) []byte {
	for _, c := range cells {
		dst = binary.AppendUvarint(dst, uint64(len(c)))
		dst = append(dst, c...)
	}
	return dst
}

// readRow decodes an item appendRow encoded.
func ReadRow(b []byte) ([]string, error) {
	var cells []string
	for len(b) > 0 {
		size, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < size {
			return nil, fmt.Errorf("internal error: a kept row is cut short")
		}
		cells = append(cells, string(b[n:n+int(size)]))
		b = b[n+int(size):]
	}
	return cells, nil
}

// rows reads back the table rows (appendRow) the list keeps, in print order.
func (l *SweptList) Rows() ([][]string, error) {
	rows := make([][]string, 0, l.count)
	err := l.Each(func(b []byte) error {
		row, err := ReadRow(b)
		rows = append(rows, row)
		return err
	})
	return rows, err
}

// Late is how many items arrived out of their class's order (kept apart,
// sorted and merged in when the list is written).
func (l *SweptList) Late() int { return len(l.late) }
