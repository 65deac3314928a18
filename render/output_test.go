package render

import (
	"bytes"
	"encoding/json"
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
		want := map[string]any{"apiVersion": APIVersion, "kind": "ThingList", "items": []any{}}
		for _, it := range items {
			want["items"] = append(want["items"].([]any), map[string]any{"name": it.Name})
			if it.Tags != nil {
				m := want["items"].([]any)
				m[len(m)-1].(map[string]any)["tags"] = []any{"x", "y"}
			}
		}
		want["summary"] = []any{"s1"}
		for _, format := range []string{JSON, YAML} {
			var buf bytes.Buffer
			err := List(&buf, format, "ThingList", len(items), func(i int) any { return items[i] },
				Field{Key: "summary", Value: []string{"s1"}}, Field{Key: "incomplete", Value: []string(nil)})
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if format == JSON {
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
		"InjectionReport": InjectionReportDoc{APIVersion: APIVersion, Kind: "InjectionReport", InjectionReport: &injection.InjectionReport{}},
		"StartupReport":   StartupReportDoc{APIVersion: APIVersion, Kind: "StartupReport", StartupItem: StartupItem{StartupReport: &startup.StartupReport{}}},
		"CaptureReport": CaptureReportDoc{APIVersion: APIVersion, Kind: "CaptureReport", CaptureReport: &capture.CaptureReport{
			Dumps: []*capture.Ruleset{{Tables: []*capture.Table{{Name: "nat", Chains: []*capture.Chain{{Name: "ISTIO_OUTPUT"}}}}}},
			Drift: &capture.Drift{}, Traces: []*capture.Trace{{Spec: "in:80"}}}},
	}
	for name, doc := range docs {
		for _, format := range []string{JSON, YAML} {
			var buf bytes.Buffer
			if err := Structured(&buf, format, doc); err != nil {
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
