package render

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"

	"sigs.k8s.io/yaml"
)

// Output formats understood by every command's -o flag, besides the default
// human-readable one.
const (
	JSON = "json"
	YAML = "yaml"
)

// printStructured writes v as indented JSON or as YAML.
func Structured(w io.Writer, format string, v any) error {
	EmptyLists(v)
	switch format {
	case JSON:
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case YAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	if IsTemplate(format) {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return printTemplate(w, format, b)
	}
	return fmt.Errorf("internal error: printStructured called with format %q", format)
}

// ReportAPIVersion is the apiVersion of every report kubectl-mesh prints with
// -o json|yaml. Fields are only added within a version, never renamed or removed.
const APIVersion = "kubectl-mesh.io/v1alpha1"

// field is one top-level field of a streamed list document.
type Field struct {
	Key   string
	Value any
}

// printList writes {apiVersion, kind, items: [...], extra…} item by item, so
// that a long list is never held in memory as one encoded document. Extra
// fields whose value is nil or an empty slice are left out.
func List(w io.Writer, format, kind string, n int, item func(int) any, extra ...Field) error {
	if IsTemplate(format) {
		// The list as JSON, then through the template's printer.
		var doc bytes.Buffer
		if err := List(&doc, JSON, kind, n, item, extra...); err != nil {
			return err
		}
		return printTemplate(w, format, doc.Bytes())
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	var kept []Field
	for _, f := range extra {
		if v := reflect.ValueOf(f.Value); f.Value == nil || (v.Kind() == reflect.Slice && v.Len() == 0) {
			continue
		}
		kept = append(kept, f)
	}
	switch format {
	case JSON:
		fmt.Fprintf(bw, "{\n  \"apiVersion\": %q,\n  \"kind\": %q,\n  \"items\": [", APIVersion, kind)
		var buf []byte
		for i := 0; i < n; i++ {
			it := item(i)
			b, ok := it.(EncodedItem)
			if !ok {
				EmptyLists(it)
				compact, err := json.Marshal(it)
				if err != nil {
					return err
				}
				buf = IndentJSON(buf[:0], compact, "    ", "  ")
				b = buf
			}
			if i > 0 {
				bw.WriteString(",")
			}
			bw.WriteString("\n    ")
			bw.Write(b)
		}
		if n > 0 {
			bw.WriteString("\n  ")
		}
		bw.WriteString("]")
		for _, f := range kept {
			b, err := json.MarshalIndent(f.Value, "  ", "  ")
			if err != nil {
				return err
			}
			fmt.Fprintf(bw, ",\n  %q: %s", f.Key, b)
		}
		bw.WriteString("\n}\n")
	case YAML:
		fmt.Fprintf(bw, "apiVersion: %s\nkind: %s\n", APIVersion, kind)
		if n == 0 {
			bw.WriteString("items: []\n")
		} else {
			bw.WriteString("items:\n")
		}
		for i := 0; i < n; i++ {
			var b []byte
			var err error
			it := item(i)
			if raw, ok := it.(json.RawMessage); ok {
				// Encoded already (compact JSON): yaml.Marshal would encode it so first.
				b, err = yaml.JSONToYAML(raw)
			} else {
				EmptyLists(it)
				b, err = yaml.Marshal(it)
			}
			if err != nil {
				return err
			}
			lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			for j, l := range lines {
				if j == 0 {
					bw.WriteString("- " + l + "\n")
				} else {
					bw.WriteString("  " + l + "\n")
				}
			}
		}
		for _, f := range kept {
			b, err := yaml.Marshal(map[string]any{f.Key: f.Value})
			if err != nil {
				return err
			}
			bw.Write(b)
		}
	default:
		return fmt.Errorf("internal error: printList called with format %q", format)
	}
	return bw.Flush()
}

// encodedItem is a list item already encoded as printList would encode it
// (JSON, indented under "    ").
type EncodedItem []byte

// emptyLists turns, in place, every nil slice and map reachable from v (a
// pointer, or a struct holding pointers) into an empty one: a list with
// nothing in it is [] in JSON and YAML, never null. Nil pointers stay null:
// that is how a report says "unknown" or "not applicable".
func EmptyLists(v any) {
	emptyListsValue(reflect.ValueOf(v), 0)
}

func emptyListsValue(v reflect.Value, depth int) {
	if depth > 64 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			emptyListsValue(v.Elem(), depth+1)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				emptyListsValue(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if v.IsNil() {
			if v.CanSet() {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
			return
		}
		for i := 0; i < v.Len(); i++ {
			emptyListsValue(v.Index(i), depth+1)
		}
	case reflect.Map:
		if v.IsNil() {
			if v.CanSet() {
				v.Set(reflect.MakeMap(v.Type()))
			}
			return
		}
		iter := v.MapRange()
		for iter.Next() {
			if e := iter.Value(); e.Kind() == reflect.Pointer {
				emptyListsValue(e, depth+1)
			}
		}
	}
}

// indentJSON appends src, compact JSON as json.Marshal writes it, to dst
// indented as json.Indent(dst, src, prefix, indent) would (what
// json.MarshalIndent does after json.Marshal), in one pass: json.Indent
// re-scans and validates what Marshal has just written, and that was half
// the cost of a long list (TestIndentJSONIsJSONIndent).
func IndentJSON(dst, src []byte, prefix, indent string) []byte {
	depth := 0
	newline := func() {
		dst = append(dst, '\n')
		dst = append(dst, prefix...)
		for k := 0; k < depth; k++ {
			dst = append(dst, indent...)
		}
	}
	for i := 0; i < len(src); i++ {
		switch c := src[i]; c {
		case '"':
			// A string, copied as it is up to its closing quote.
			j := i + 1
			for j < len(src) && src[j] != '"' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			dst = append(dst, src[i:min(j+1, len(src))]...)
			i = j
		case '{', '[':
			dst = append(dst, c)
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				dst = append(dst, src[i+1])
				i++
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			newline()
		case ':':
			dst = append(dst, ':', ' ')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
