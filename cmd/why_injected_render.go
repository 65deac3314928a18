package cmd

import (
	"fmt"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// print prints the reports of a pod, a workload (and its pods) or the
// objects of files; a sweep prints through injectionSweep.
//
// ds are the reports' injection slices, made with their pods, when the
// caller has them.
func (o *WhyInjectedOptions) print(reports []*injection.InjectionReport, list bool, incomplete []string, ds ...*diagnose.Diagnosis) error {
	if o.Output != "" {
		if !list {
			return render.Structured(o.Out, o.Output, render.InjectionReportDoc{APIVersion: render.APIVersion, Kind: "InjectionReport", InjectionReport: reports[0]})
		}
		item := func(i int) any { return reports[i] }
		var encErr error
		if o.Output == render.JSON && !o.Verify {
			enc := &render.MemoEncoder{}
			item = func(i int) any {
				it, err := enc.Item(reports[i])
				if err != nil && encErr == nil {
					encErr = err
				}
				return it
			}
		}
		if err := render.List(o.Out, o.Output, "InjectionReportList", len(reports), item, render.Field{Key: "incomplete", Value: incomplete}); err != nil {
			return err
		}
		return encErr
	}
	for _, r := range reports {
		render.Sanitize(r)
	}
	p := render.NewPrinter(o.Out)
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(o.Out)
		}
		if r.Kind != "Pod" && i+1 < len(reports) && reports[i+1].Kind == "Pod" {
			render.FactorTable(p, r, o.All)
			fmt.Fprintln(o.Out)
			if len(ds) == len(reports) {
				ds = ds[i+1:]
			}
			return printPodRows(p, reports[i+1:], nil, ds...)
		}
		render.FactorTable(p, r, o.All)
	}
	return nil
}
