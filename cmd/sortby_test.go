package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// --sort-by orders a sweep's items by a JSONPath on their -o json form
// (whatever order they came in, table and JSON alike); a bad expression,
// or one given with a POD or -f, is a usage error before any request.
func TestSortBy(t *testing.T) {
	checks := 0
	for _, expr := range []string{".name", "{.name}"} {
		for _, format := range []string{render.JSON, ""} {
			var out bytes.Buffer
			o := &DiagnoseOptions{Output: format, FailOn: diagnose.Fail, SortBy: expr, Selector: "app=web"}
			o.Out, o.ErrOut = &out, &bytes.Buffer{}
			if err := o.parseSortBy(); err != nil {
				t.Fatal(err)
			}
			s := newDiagnoseSweep(o)
			ds := diagnosed()
			var names []string
			for i := len(ds) - 1; i >= 0; i-- {
				names = append(names, ds[i].Name)
				if err := s.add(ds[i]); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.print(nil); err != nil {
				t.Fatal(err)
			}
			sort.Strings(names)
			checks++
			if format == render.JSON {
				var list struct {
					Items []struct {
						Name string `json:"name"`
					} `json:"items"`
				}
				if err := json.Unmarshal(out.Bytes(), &list); err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, it := range list.Items {
					got = append(got, it.Name)
				}
				if len(got) != len(names) || !sort.StringsAreSorted(got) {
					t.Errorf("%s, json: items %v, want %v", expr, got, names)
				}
				continue
			}
			// The table: each name's row after the one before it.
			at := -1
			for _, n := range names {
				i := bytes.Index(out.Bytes(), []byte(n))
				if i < at {
					t.Errorf("%s, table: %s before the name before it:\n%s", expr, n, out.String())
				}
				at = i
			}
		}
	}
	for _, tc := range []struct {
		name string
		o    *DiagnoseOptions
	}{
		{"bad JSONPath", &DiagnoseOptions{SortBy: "{.name", AllNamespaces: true}},
		{"with a POD", &DiagnoseOptions{SortBy: ".name", Args: []string{"web-1"}}},
		{"with -f", &DiagnoseOptions{SortBy: ".name", Filenames: []string{"web.yaml"}}},
	} {
		checks++
		var u *UsageError
		if err := tc.o.parseSortBy(); !errors.As(err, &u) {
			t.Errorf("%s: %v, want a usage error", tc.name, err)
		}
	}
	// Numbers by value, missing first.
	sb, err := newSortBy(".restarts")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, v := range []any{map[string]any{"restarts": 10}, map[string]any{"restarts": 9}, map[string]any{"restarts": -1}, map[string]any{}} {
		k, err := sb.key(v, "ns", "x")
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	checks++
	if !(keys[3] < keys[2] && keys[2] < keys[1] && keys[1] < keys[0]) {
		t.Errorf("keys out of order: %q", keys)
	}
	t.Logf("%d checks", checks)
}
