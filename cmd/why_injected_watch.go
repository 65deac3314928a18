package cmd

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// watch follows a sweep as kubectl get -w does (diagnose's watch): after
// each burst of changes of its pods and events the sweep runs again, with
// a new engine and the mesh's facts read again, and each row whose answer
// changed (or that is new) is printed, or, with -o, the report as a
// document. Ctrl-C stops it (exit 130).
func (o *WhyInjectedOptions) watch(ctx context.Context, seen map[string]string) error {
	ns := o.namespace
	if o.AllNamespaces {
		ns = ""
	}
	kick := watchScope(ctx, o.client, ns, o.Selector)
	for {
		select {
		case <-ctx.Done():
			return &InterruptedError{Err: errors.New("interrupted")}
		case <-kick:
		}
		settle(ctx, kick)
		eng := o.newEngine()
		pre := eng.StartSweep(ctx)
		facts, err := eng.MeshFacts(ctx)
		if err != nil {
			pre.Close()
			if ctx.Err() != nil {
				return &InterruptedError{Err: errors.New("interrupted")}
			}
			return err
		}
		now := map[string]string{}
		changed := o.newSweep(facts, false)
		n := 0
		err = eng.Sweep(ctx, facts, pre, func(r *injection.InjectionReport, p *corev1.Pod) error {
			d := injectionSlice(r, p, eng.InjectionTemplate(ctx, p))
			k, sig := reportKey(r), reportSignature(r, d)
			now[k] = sig
			if seen[k] == sig {
				return nil
			}
			n++
			if o.Output != "" {
				return render.Structured(o.Out, o.Output, render.InjectionReportDoc{APIVersion: render.APIVersion, Kind: "InjectionReport", InjectionReport: r})
			}
			return changed.add(r, d)
		})
		pre.Close()
		if ctx.Err() != nil {
			return &InterruptedError{Err: errors.New("interrupted")}
		}
		if err != nil {
			return err
		}
		seen = now
		if n > 0 && o.Output == "" {
			if err := changed.printRows(); err != nil {
				return err
			}
		}
	}
}

// printRows prints the kept rows without the table's header, summary or
// fixes: what -w adds.
func (s *injectionSweep) printRows() error {
	cells := len(injectionHeaders(s.verified))
	var rows [][]string
	err := s.list.Each(func(b []byte) error {
		f, err := render.ReadRow(b)
		if err != nil {
			return err
		}
		if len(f) < cells {
			return fmt.Errorf("internal error: a kept row has %d fields", len(f))
		}
		rows = append(rows, f[:cells:cells])
		return nil
	})
	if err != nil {
		return err
	}
	render.WatchRows(s.p, injectionHeaders(s.verified), rows)
	return nil
}
