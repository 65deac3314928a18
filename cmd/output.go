package cmd

import (
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// Output formats understood by every command's -o flag, besides the default
// human-readable one.
const (
	outputJSON = "json"
	outputYAML = "yaml"
)

// validateOutput checks an -o value against the formats a command supports.
func validateOutput(format string, extra ...string) error {
	switch format {
	case "", outputJSON, outputYAML:
		return nil
	}
	for _, e := range extra {
		if format == e {
			return nil
		}
	}
	allowed := append([]string{outputJSON, outputYAML}, extra...)
	return usageErrorf("unsupported output format %q: use one of %v", format, allowed)
}

// printStructured writes v as indented JSON or as YAML.
func printStructured(w io.Writer, format string, v any) error {
	switch format {
	case outputJSON:
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case outputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("internal error: printStructured called with format %q", format)
}

// ReportAPIVersion is the apiVersion of every report kubectl-mesh prints with
// -o json|yaml. Fields are only added within a version, never renamed or removed.
const ReportAPIVersion = "kubectl-mesh.io/v1alpha1"
