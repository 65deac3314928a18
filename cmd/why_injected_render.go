package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// print prints the reports of a pod, a workload (and its pods) or the
// objects of files; a sweep prints through injectionSweep.
func (o *WhyInjectedOptions) print(reports []*injection.InjectionReport, list bool, incomplete []string) error {
	if o.Output != "" {
		if !list {
			return render.Structured(o.Out, o.Output, render.InjectionReportDoc{APIVersion: render.APIVersion, Kind: "InjectionReport", InjectionReport: reports[0]})
		}
		item := func(i int) any { return reports[i] }
		var encErr error
		if o.Output == render.JSON && !o.Verify {
			enc := &memoEncoder{}
			item = func(i int) any {
				it, err := enc.item(reports[i])
				if err != nil && encErr == nil {
					encErr = err
				}
				return it
			}
		}
		if err := render.List(o.Out, o.Output, "InjectionReportList", len(reports), item, render.Field{Key: "incomplete", Value: incomplete}); err != nil {
			return err
		}
		return encErr
	}
	for _, r := range reports {
		render.Sanitize(r)
	}
	p := render.NewPrinter(o.Out)
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(o.Out)
		}
		if r.Kind != "Pod" && i+1 < len(reports) && reports[i+1].Kind == "Pod" {
			render.FactorTable(p, r, o.All)
			fmt.Fprintln(o.Out)
			return printPodRows(p, reports[i+1:], nil)
		}
		render.FactorTable(p, r, o.All)
	}
	return nil
}

// memoEncoder encodes each answer a sweep's pods share (injection.Memo)
// once, and puts each pod's and owner's names into the bytes: the list reads
// exactly as if every report had been encoded (TestMemoEncoderEncodesAsJSON),
// at a small part of the cost. Only for reports nobody changed after the
// memo made them (no --verify).
type memoEncoder struct {
	ids map[*injection.InjectionReport]int
	// compact and indented are the shared answers' encodings, by id
	// (indented under "    ", as printList indents an item, when asked for).
	compact, indented [][]byte
}

var (
	memoNameJSON  = jsonInner(injection.MemoName)
	memoOwnerJSON = jsonInner(injection.MemoOwner)
)

// jsonInner is s as encoding/json writes it inside a string, without the quotes.
func jsonInner(s string) []byte {
	b, _ := json.Marshal(s)
	return b[1 : len(b)-1]
}

// item is r for printList, encoded.
func (e *memoEncoder) item(r *injection.InjectionReport) (any, error) {
	shared, name, owner, ok := r.MemoAnswer()
	if !ok {
		return r, nil
	}
	id, err := e.id(shared)
	if err != nil {
		return nil, err
	}
	return render.EncodedItem(e.named(nil, id, name, owner, true)), nil
}

// id is the shared answer's number, encoded the first time it is asked for.
func (e *memoEncoder) id(shared *injection.InjectionReport) (int, error) {
	if id, ok := e.ids[shared]; ok {
		return id, nil
	}
	b, err := encodeReport(shared)
	if err != nil {
		return 0, err
	}
	if e.ids == nil {
		e.ids = map[*injection.InjectionReport]int{}
	}
	e.ids[shared] = len(e.compact)
	e.compact = append(e.compact, b)
	e.indented = append(e.indented, nil)
	return len(e.compact) - 1, nil
}

// named appends to dst the shared answer id (compact, or indented) with the
// names of the pod and its owner put in.
func (e *memoEncoder) named(dst []byte, id int, name, owner string, indented bool) []byte {
	b := e.compact[id]
	if indented {
		if e.indented[id] == nil {
			e.indented[id] = render.IndentJSON(nil, b, "    ", "  ")
		}
		b = e.indented[id]
	}
	put := func(dst, b, old []byte, new string) []byte {
		for {
			i := bytes.Index(b, old)
			if i < 0 {
				return append(dst, b...)
			}
			dst = append(dst, b[:i]...)
			dst = append(dst, jsonInner(new)...)
			b = b[i+len(old):]
		}
	}
	if !bytes.Contains(b, memoOwnerJSON) {
		return put(dst, b, memoNameJSON, name)
	}
	return put(dst, put(nil, b, memoNameJSON, name), memoOwnerJSON, owner)
}

// encodeReport is r as compact JSON, as printList encodes it.
func encodeReport(r *injection.InjectionReport) ([]byte, error) {
	render.EmptyLists(r)
	return json.Marshal(r)
}
