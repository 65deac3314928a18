package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// printList streams a document that parses back to what one Marshal of the
// whole list gives, in both formats, with and without items.
func TestPrintListParsesBack(t *testing.T) {
	type item struct {
		Name string   `json:"name"`
		Tags []string `json:"tags,omitempty"`
	}
	for _, items := range [][]item{nil, {{Name: "a", Tags: []string{"x", "y"}}, {Name: "b\n\"quoted\""}}} {
		want := map[string]any{"apiVersion": ReportAPIVersion, "kind": "ThingList", "items": []any{}}
		for _, it := range items {
			want["items"] = append(want["items"].([]any), map[string]any{"name": it.Name})
			if it.Tags != nil {
				m := want["items"].([]any)
				m[len(m)-1].(map[string]any)["tags"] = []any{"x", "y"}
			}
		}
		want["summary"] = []any{"s1"}
		for _, format := range []string{outputJSON, outputYAML} {
			var buf bytes.Buffer
			err := printList(&buf, format, "ThingList", len(items), func(i int) any { return items[i] },
				field{"summary", []string{"s1"}}, field{"incomplete", []string(nil)})
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if format == outputJSON {
				err = json.Unmarshal(buf.Bytes(), &got)
			} else {
				err = yaml.Unmarshal(buf.Bytes(), &got)
			}
			if err != nil {
				t.Fatalf("%s does not parse: %v\n%s", format, err, buf.String())
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: got %#v\nwant %#v\n%s", format, got, want, buf.String())
			}
		}
	}
}

// An empty list is [] in JSON and YAML, never null, in every report; null is
// kept for what is unknown or not applicable (expected, mismatch, injected).
func TestEmptyListsAreNotNull(t *testing.T) {
	docs := map[string]any{
		"InjectionReport": InjectionReportDoc{APIVersion: ReportAPIVersion, Kind: "InjectionReport", InjectionReport: &injection.InjectionReport{}},
		"StartupReport":   StartupReportDoc{APIVersion: ReportAPIVersion, Kind: "StartupReport", StartupReport: &startup.StartupReport{}},
		"CaptureReport": CaptureReportDoc{APIVersion: ReportAPIVersion, Kind: "CaptureReport", CaptureReport: &capture.CaptureReport{
			Dumps: []*capture.Ruleset{{Tables: []*capture.Table{{Name: "nat", Chains: []*capture.Chain{{Name: "ISTIO_OUTPUT"}}}}}},
			Drift: &capture.Drift{}, Traces: []*capture.Trace{{Spec: "in:80"}}}},
	}
	for name, doc := range docs {
		for _, format := range []string{outputJSON, outputYAML} {
			var buf bytes.Buffer
			if err := printStructured(&buf, format, doc); err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(buf.String(), "\n") {
				if strings.Contains(line, "null") && !regexp.MustCompile(`"?(expected|mismatch|injected)"?: null`).MatchString(line) {
					t.Errorf("%s -o %s: %q", name, format, strings.TrimSpace(line))
				}
			}
		}
	}
}

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
		if got := indentJSON(nil, d, "    ", "  "); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("indenting %s:\ngot  %s\nwant %s", d, got, want.Bytes())
		}
	}
	t.Logf("%d documents indented alike", len(docs))
}
