package cmd

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"k8s.io/client-go/util/jsonpath"
	"k8s.io/kubectl/pkg/cmd/get"
)

// sortBy orders a sweep's list by a JSONPath expression on each item, as
// kubectl get --sort-by does: the value at the path in the item's -o json
// form, numbers by value, anything else by its text; an item without it
// first. nil keeps the sweep's own order (worst first).
type sortBy struct {
	expr string
	path *jsonpath.JSONPath
}

const sortByHelp = "Order a sweep's list (-n, -l, -A) by a JSONPath expression on each item's -o json form, as kubectl get --sort-by (e.g. '{.namespace}', '.status'), instead of worst first"

// newSortBy parses --sort-by ("" is none): an error is a usage error,
// before any request.
func newSortBy(expr string) (*sortBy, error) {
	if expr == "" {
		return nil, nil
	}
	relaxed, err := get.RelaxedJSONPathExpression(expr)
	if err != nil {
		return nil, usageErrorf("--sort-by %q: %v", expr, err)
	}
	p := jsonpath.New("sort-by").AllowMissingKeys(true)
	if err := p.Parse(relaxed); err != nil {
		return nil, usageErrorf("--sort-by %q: %v", expr, err)
	}
	return &sortBy{expr: expr, path: p}, nil
}

// key is the item's place in the sorted list, as a sweep list's name (the
// namespace and name after it keep equal values in the sweep's order).
func (s *sortBy) key(item any, namespace, name string) (string, error) {
	b, err := json.Marshal(item)
	if err != nil {
		return "", err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return "", err
	}
	results, err := s.path.FindResults(v)
	if err != nil {
		return "", fmt.Errorf("--sort-by %q: %v", s.expr, err)
	}
	value := "\x00" // missing: first
	if len(results) > 0 && len(results[0]) > 0 {
		value = sortValue(results[0][0])
	}
	return value + "\x00" + namespace + "\x00" + name, nil
}

// sortValue is a value's text, ordered as the value: a number zero-padded
// (negative ones before), a string as it is.
func sortValue(r reflect.Value) string {
	for r.Kind() == reflect.Interface || r.Kind() == reflect.Pointer {
		if r.IsNil() {
			return "\x00"
		}
		r = r.Elem()
	}
	switch r.Kind() {
	case reflect.Float64, reflect.Float32:
		f := r.Float()
		if f < 0 {
			return fmt.Sprintf("\x01-%030.6f", 1e18+f) // before the positive ones, in order
		}
		return fmt.Sprintf("\x02%030.6f", f)
	case reflect.String:
		return "\x03" + r.String()
	case reflect.Bool:
		return fmt.Sprintf("\x03%t", r.Bool())
	}
	b, _ := json.Marshal(r.Interface())
	return "\x03" + strings.TrimSpace(string(b))
}

// sweepSortBy parses --sort-by for a command whose sweeps it orders: with
// a POD, TYPE/NAME or -f it is a usage error (their answers are not a
// sweep's list).
func sweepSortBy(expr string, args, files []string) (*sortBy, error) {
	s, err := newSortBy(expr)
	if err != nil || s == nil {
		return s, err
	}
	if len(args) > 0 || len(files) > 0 {
		return nil, usageErrorf("--sort-by orders a sweep's list (-n, -l or -A): not with a POD, TYPE/NAME or -f")
	}
	return s, nil
}

// parseSortBy parses diagnose's --sort-by.
func (o *DiagnoseOptions) parseSortBy() error {
	var err error
	o.sortBy, err = sweepSortBy(o.SortBy, o.Args, o.Filenames)
	return err
}

// place is where a sweep keeps an item: its class (the sweep's order),
// namespace and name; with --sort-by, one class and the item's sort key.
func (s *sortBy) place(class int, item any, namespace, name string) (int, string, string, error) {
	if s == nil {
		return class, namespace, name, nil
	}
	k, err := s.key(item, namespace, name)
	return 0, "", k, err
}
