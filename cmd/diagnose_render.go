package cmd

import (
	"fmt"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// print prints one diagnosis (list false) or a list, sorted worst first.
func (o *DiagnoseOptions) print(ds []*diagnose.Diagnosis, list bool, incomplete []string) error {
	if o.structured() {
		if !list && len(ds) == 1 {
			return render.Structured(o.Out, o.Output, render.DiagnosisDoc{APIVersion: render.APIVersion, Kind: "Diagnosis", Diagnosis: ds[0]})
		}
		return render.List(o.Out, o.Output, "DiagnosisList", len(ds), func(i int) any { return ds[i] },
			render.Field{Key: "summary", Value: render.CountChecks(ds)}, render.Field{Key: "incomplete", Value: incomplete})
	}
	for _, d := range ds {
		render.Sanitize(d)
	}
	p := render.NewPrinter(o.Out)
	switch {
	case len(ds) == 0:
		fmt.Fprintln(o.ErrOut, "No pods found.")
	case len(ds) == 1:
		// One pod (or one workload's): the whole checklist.
		render.Diagnosis(p, ds[0])
	default:
		if len(o.Args) > 0 || len(o.Filenames) > 0 {
			// What was named (a workload, a manifest): the first failure
			// and its fix on top, as for one pod.
			render.FirstAnswer(p, ds)
		}
		render.DiagnosisRows(p, ds, o.wide())
	}
	render.Incomplete(p, incomplete)
	return nil
}

// structured: -o json or yaml; wide: -o wide (tables with the findings in
// full).
func (o *DiagnoseOptions) structured() bool { return o.Output != "" && !o.wide() }
func (o *DiagnoseOptions) wide() bool       { return o.Output == "wide" }
