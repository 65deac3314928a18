package cmd

import (
	"context"
	"errors"
	"time"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// watchQuiet is how long the pods and events of a watched sweep stay
// unchanged before it runs again; watchMost how long a burst of changes
// may delay it.
const (
	watchQuiet = time.Second
	watchMost  = 5 * time.Second
)

// signature is what a watched row shows: a change of it prints the row.
func signature(d *diagnose.Diagnosis) string {
	code, title := render.RowTitle(d)
	return d.Status + "|" + code + "|" + title
}

// watchKey names a diagnosis across runs.
func watchKey(d *diagnose.Diagnosis) string {
	return d.Namespace + "/" + d.WorkloadKind + "/" + d.Name
}

// watch follows a sweep, as kubectl get -w does: the pods (of its
// selector) and the events of its scope are watched; after each burst of
// changes the sweep runs again, with a new engine, and each row whose
// answer changed (or that is new) is printed, or, with -o, the diagnosis
// as a document. Ctrl-C stops it (exit 130).
func (o *DiagnoseOptions) watch(ctx context.Context, first *diagnoseSweep) error {
	seen := first.sigs
	ns := o.namespace
	if o.AllNamespaces {
		ns = ""
	}
	kick := watchScope(ctx, o.client, ns, o.Selector)
	var p *render.Printer
	if !o.structured() {
		p = render.NewPrinter(o.Out)
	}
	for {
		select {
		case <-ctx.Done():
			return &InterruptedError{Err: errors.New("interrupted")}
		case <-kick:
		}
		settle(ctx, kick)
		now := map[string]string{}
		var changed []*diagnose.Diagnosis
		_, err := o.newEngine().Sweep(ctx, func(d *diagnose.Diagnosis) error {
			k, sig := watchKey(d), signature(d)
			now[k] = sig
			if seen[k] != sig {
				changed = append(changed, d)
			}
			return nil
		})
		if ctx.Err() != nil {
			return &InterruptedError{Err: errors.New("interrupted")}
		}
		if err != nil {
			return err
		}
		seen = now
		if err := o.printChanged(p, changed); err != nil {
			return err
		}
	}
}

// printChanged prints the changed diagnoses: their rows, or each as a
// document with -o.
func (o *DiagnoseOptions) printChanged(p *render.Printer, ds []*diagnose.Diagnosis) error {
	if len(ds) == 0 {
		return nil
	}
	render.SortDiagnoses(ds)
	if o.structured() {
		for _, d := range ds {
			if err := render.Structured(o.Out, o.Output, render.DiagnosisDoc{APIVersion: render.APIVersion, Kind: "Diagnosis", Diagnosis: d}); err != nil {
				return err
			}
		}
		return nil
	}
	rows := make([][]string, 0, len(ds))
	for _, d := range ds {
		render.Sanitize(d)
		rows = append(rows, render.DiagnosisRow(p, d, o.wide()))
	}
	render.WatchRows(p, render.DiagnosisHeaders(o.wide()), rows)
	return nil
}
