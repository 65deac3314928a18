package cmd

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
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
