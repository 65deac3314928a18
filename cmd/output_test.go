package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// indentJSON writes what json.Indent writes: for every report kind filled
// with hostile text (quotes, backslashes, brackets and commas inside
// strings, control characters, HTML), for empty and nested lists and
// objects, and for random JSON values.
func TestIndentJSONIsJSONIndent(t *testing.T) {
	var docs [][]byte
	add := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	for _, r := range sampleReports() {
		add(r)
	}
	add(map[string]any{"a": []any{}, "b": map[string]any{}, "c": []any{map[string]any{}, []any{[]any{}}}, "d": nil,
		"e\\\"{[,:]}": "x\\\\\"y\"z{}[],: \x00\x1f<>&\u2028", "f": []int{1, 2, 3}, "g": 1.5e-7, "h": true})
	add([]any{})
	add("just a string with \\\" inside")
	rng := rand.New(rand.NewSource(3))
	var value func(depth int) any
	value = func(depth int) any {
		switch n := rng.Intn(7); {
		case depth > 4 || n == 0:
			return []string{"", "\"", "\\", "{", "]", ",", ":", "a b", "é"}[rng.Intn(9)] + strings.Repeat("\\\"", rng.Intn(3))
		case n == 1:
			return rng.Float64() * 1e6
		case n == 2:
			return rng.Intn(2) == 0
		case n == 3:
			return nil
		case n <= 5:
			l := make([]any, rng.Intn(4))
			for i := range l {
				l[i] = value(depth + 1)
			}
			return l
		default:
			m := map[string]any{}
			for i := rng.Intn(4); i > 0; i-- {
				m[fmt.Sprint(value(5))] = value(depth + 1)
			}
			return m
		}
	}
	for i := 0; i < 2000; i++ {
		add(value(0))
	}
	for _, d := range docs {
		var want bytes.Buffer
		if err := json.Indent(&want, d, "    ", "  "); err != nil {
			t.Fatal(err)
		}
		if got := render.IndentJSON(nil, d, "    ", "  "); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("indenting %s:\ngot  %s\nwant %s", d, got, want.Bytes())
		}
	}
	t.Logf("%d documents indented alike", len(docs))
}
