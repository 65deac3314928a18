package cmd

import (
	"io"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// listChecks prints the catalogue: a table (wide: what each means), or
// the specs as JSON or YAML.
func listChecks(out io.Writer, format string) error {
	specs := diagnose.Checks()
	if format == render.JSON || format == render.YAML || render.IsTemplate(format) {
		return render.List(out, format, "CheckList", len(specs), func(i int) any { return specs[i] })
	}
	p := render.NewPrinter(out)
	headers := []string{"CODE", "STAGE", "KIND", "STATUS", "ISTIOCTL", "TITLE"}
	if format == "wide" {
		headers = append(headers, "READS")
	}
	rows := make([][]string, 0, len(specs))
	for _, s := range specs {
		row := []string{s.Code, s.Stage, s.Kind, s.Status, render.Dash(strings.Join(s.Istioctl, ",")), s.Title}
		if format == "wide" {
			var reads []string
			for _, f := range s.Reads {
				reads = append(reads, f.Name)
			}
			row = append(row, strings.Join(reads, "; "))
		}
		rows = append(rows, row)
	}
	p.Lines(headers, rows)
	p.Para("", "Each check in full (what it means, how it is detected, its fix): docs/checks.md, or kubectl mesh diagnose --list-checks -o yaml.")
	return nil
}
