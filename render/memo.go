package render

import (
	"bytes"
	"encoding/json"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// MemoEncoder encodes each answer a sweep's pods share (injection.Memo)
// once, and puts each pod's and owner's names into the bytes: the list reads
// exactly as if every report had been encoded (TestMemoEncoderEncodesAsJSON),
// at a small part of the cost. Only for reports nobody changed after the
// memo made them (no --verify).
type MemoEncoder struct {
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
func (e *MemoEncoder) Item(r *injection.InjectionReport) (any, error) {
	shared, name, owner, ok := r.MemoAnswer()
	if !ok {
		return r, nil
	}
	id, err := e.ID(shared)
	if err != nil {
		return nil, err
	}
	return EncodedItem(e.Named(nil, id, name, owner, true)), nil
}

// id is the shared answer's number, encoded the first time it is asked for.
func (e *MemoEncoder) ID(shared *injection.InjectionReport) (int, error) {
	if id, ok := e.ids[shared]; ok {
		return id, nil
	}
	b, err := EncodeReport(shared)
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
func (e *MemoEncoder) Named(dst []byte, id int, name, owner string, indented bool) []byte {
	b := e.compact[id]
	if indented {
		if e.indented[id] == nil {
			e.indented[id] = IndentJSON(nil, b, "    ", "  ")
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

// EncodeReport is r as compact JSON, as printList encodes it.
func EncodeReport(r *injection.InjectionReport) ([]byte, error) {
	EmptyLists(r)
	return json.Marshal(r)
}

// Len is how many shared answers it holds.
func (e *MemoEncoder) Len() int { return len(e.compact) }
