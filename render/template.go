package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/kubectl/pkg/cmd/get"
)

// NoHeaders leaves the header row out of tables and custom columns
// (--no-headers, as kubectl get).
var NoHeaders bool

// The template formats -o takes, as kubectl's: a JSONPath or Go template
// (inline or from a file), custom columns (inline or from a file).
var templatePrefixes = []string{"jsonpath=", "jsonpath-file=", "jsonpath-as-json=", "go-template=", "go-template-file=", "custom-columns=", "custom-columns-file="}

// TemplateFormats names them for help and errors.
const TemplateFormats = "name, jsonpath=…, jsonpath-file=…, jsonpath-as-json=…, go-template=…, go-template-file=…, custom-columns=…, custom-columns-file=…"

// IsTemplate says format is one of them.
func IsTemplate(format string) bool {
	if format == Name {
		return true
	}
	for _, p := range templatePrefixes {
		if strings.HasPrefix(format, p) {
			return true
		}
	}
	return false
}

// TemplatePrinter is the printer of a template format, through
// cli-runtime's and kubectl's own printers: an error when the template does
// not parse (or its file cannot be read), before anything is requested.
func TemplatePrinter(format string) (printers.ResourcePrinter, error) {
	if format == Name {
		return namePrinter{}, nil
	}
	kind, arg, _ := strings.Cut(format, "=")
	if strings.HasSuffix(kind, "-file") {
		b, err := os.ReadFile(arg)
		if err != nil {
			return nil, fmt.Errorf("-o %s: %v", kind, err)
		}
		arg = strings.TrimSpace(string(b))
	}
	if arg == "" {
		return nil, fmt.Errorf("-o %s needs a template (-o %s=TEMPLATE)", kind, kind)
	}
	switch kind {
	case "jsonpath", "jsonpath-file", "jsonpath-as-json":
		p, err := printers.NewJSONPathPrinter(arg)
		if err != nil {
			return nil, fmt.Errorf("-o %s: %v", kind, err)
		}
		p.AllowMissingKeys(true)
		if kind == "jsonpath-as-json" {
			p.EnableJSONOutput(true)
		}
		return p, nil
	case "go-template", "go-template-file":
		p, err := printers.NewGoTemplatePrinter([]byte(arg))
		if err != nil {
			return nil, fmt.Errorf("-o %s: %v", kind, err)
		}
		p.AllowMissingKeys(true)
		return p, nil
	case "custom-columns":
		p, err := get.NewCustomColumnsPrinterFromSpec(arg, unstructured.UnstructuredJSONScheme, NoHeaders)
		if err != nil {
			return nil, fmt.Errorf("-o %s: %v", kind, err)
		}
		return p, nil
	case "custom-columns-file":
		p, err := get.NewCustomColumnsPrinterFromTemplate(strings.NewReader(arg), unstructured.UnstructuredJSONScheme)
		if err != nil {
			return nil, fmt.Errorf("-o %s: %v", kind, err)
		}
		p.NoHeaders = NoHeaders
		return p, nil
	}
	return nil, fmt.Errorf("unsupported output format %q", format)
}

// printTemplate prints a JSON document (a report, or a list of them)
// through the format's printer: a list's items one by one for custom
// columns (one table), the whole document for a template.
func printTemplate(w io.Writer, format string, doc []byte) error {
	p, err := TemplatePrinter(format)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(doc, &u.Object); err != nil {
		return err
	}
	var obj runtime.Object = u
	if u.IsList() {
		list, err := u.ToList()
		if err != nil {
			return err
		}
		obj = list
	}
	var buf bytes.Buffer
	if err := p.PrintObj(obj, &buf); err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// Name is -o name: each subject as KIND/NAME, one a line (as kubectl get
// -o name prints its objects).
const Name = "name"

// namePrinter prints a report's subject, or each of a list's, as
// kind/name: the workload's kind (a pod's when the report is of a pod),
// lower-cased.
type namePrinter struct{}

func (namePrinter) PrintObj(obj runtime.Object, w io.Writer) error {
	var items []map[string]any
	switch o := obj.(type) {
	case *unstructured.UnstructuredList:
		for i := range o.Items {
			items = append(items, o.Items[i].Object)
		}
	case *unstructured.Unstructured:
		items = append(items, o.Object)
	}
	for _, it := range items {
		if line := subjectName(it); line != "" {
			if _, err := fmt.Fprintln(w, line); err != nil {
				return err
			}
		}
	}
	return nil
}

// subjectName is an item's kind/name: its workloadKind, or the kind of an
// item that is not itself a report (a plan's workload), else a pod; the
// name from name, or pod.
func subjectName(it map[string]any) string {
	str := func(k string) string { s, _ := it[k].(string); return s }
	name := str("name")
	if name == "" {
		name = str("pod")
	}
	if name == "" {
		return ""
	}
	kind := str("workloadKind")
	if kind == "" && str("apiVersion") == "" {
		kind = str("kind")
	}
	if kind == "" {
		kind = "Pod"
	}
	return strings.ToLower(kind) + "/" + name
}
