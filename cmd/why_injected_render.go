package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// print prints the reports of a pod, a workload (and its pods) or the
// objects of files; a sweep prints through injectionSweep.
func (o *WhyInjectedOptions) print(reports []*injection.InjectionReport, list bool, incomplete []string) error {
	if o.Output != "" {
		if !list {
			return render.Structured(o.Out, o.Output, render.InjectionReportDoc{APIVersion: render.APIVersion, Kind: "InjectionReport", InjectionReport: reports[0]})
		}
		item := func(i int) any { return reports[i] }
		var encErr error
		if o.Output == render.JSON && !o.Verify {
			enc := &memoEncoder{}
			item = func(i int) any {
				it, err := enc.item(reports[i])
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
			printFactorTable(p, r, o.All)
			fmt.Fprintln(o.Out)
			return printPodRows(p, reports[i+1:], nil)
		}
		printFactorTable(p, r, o.All)
	}
	return nil
}

// printFactorTable prints one workload's answer first — the verdict,
// coloured by outcome, the fix, what is missing — then the factors that
// decided it; factors with no effect are collapsed into a line per kind
// unless all is set.
func printFactorTable(p *render.Printer, r *injection.InjectionReport, all bool) {
	fmt.Fprintf(p.Out, "%s %s/%s (%s)\n", r.Kind, render.Escape(r.Namespace), render.Escape(r.Name), r.Mesh)
	p.Para(p.Bold("Verdict:")+" ", p.Paint(verdictEffect(r), render.Escape(r.Verdict)))
	if r.Fix != "" {
		for i, l := range strings.Split(r.Fix, "\n") {
			prefix := "         "
			if i == 0 {
				prefix = p.Bold("Fix:") + "     "
			}
			p.FixLine(prefix, render.Escape(l))
		}
	}
	if len(r.Needs) > 0 {
		p.Para(p.Bold("Needs:")+"   ", render.Escape(strings.Join(r.Needs, "; ")))
		if hint := canIHint(r.Needs); hint != "" {
			p.Para("         ", render.Escape(hint))
		}
	}
	printProof(p, r)
	for _, w := range r.Warnings {
		p.Para(p.Effect(injection.EffectWarning)+": ", render.Escape(w))
	}
	fmt.Fprintln(p.Out)
	rows := make([][]string, 0, len(r.Factors))
	var quietWebhooks, quietOther []string
	for _, f := range r.Factors {
		if !all && f.Effect == injection.EffectNone {
			if name, ok := strings.CutPrefix(f.Factor, "webhook "); ok && strings.Contains(name, "/") {
				quietWebhooks = append(quietWebhooks, name)
			} else {
				quietOther = append(quietOther, f.Factor)
			}
			continue
		}
		rows = append(rows, []string{render.Escape(f.Factor), render.Escape(f.Value), p.Effect(f.Effect), render.Escape(f.Source)})
	}
	p.Table([]string{"FACTOR", "VALUE", "EFFECT", "SOURCE"}, rows)
	if len(quietWebhooks) > 0 {
		p.Para("", fmt.Sprintf("%s do not match: %s (--all lists them)", countNoun(len(quietWebhooks), "other webhook", "other webhooks"), render.Escape(byConfiguration(quietWebhooks))))
	}
	if len(quietOther) > 0 {
		p.Para("", fmt.Sprintf("%s with no effect: %s (--all lists them)", countNoun(len(quietOther), "factor", "factors"), render.Escape(strings.Join(quietOther, ", "))))
	}
	for _, u := range r.Incomplete {
		p.Para(p.Effect(injection.EffectUnknown)+": ", render.Escape(u))
	}
}

// verdictEffect picks the verdict's colour: red when something is wrong
// (a mismatch, pods refused), magenta when unknown, green when injected as
// expected, none when not injected as expected.
func verdictEffect(r *injection.InjectionReport) string {
	switch {
	case r.IsMismatch() || r.CreationBlocked:
		return injection.EffectBlocks
	case r.Expected == nil:
		return injection.EffectUnknown
	case *r.Expected:
		return injection.EffectInject
	}
	return injection.EffectNone
}

// byConfiguration names webhooks ("<configuration>/<webhook>") by their
// configuration, with a count: "istio-revision-tag-prod ×2, istio-sidecar-injector ×4".
func byConfiguration(webhooks []string) string {
	var order []string
	n := map[string]int{}
	for _, w := range webhooks {
		c, _, _ := strings.Cut(w, "/")
		if n[c] == 0 {
			order = append(order, c)
		}
		n[c]++
	}
	parts := make([]string, 0, len(order))
	for _, c := range order {
		if n[c] > 1 {
			parts = append(parts, fmt.Sprintf("%s ×%d", c, n[c]))
		} else {
			parts = append(parts, c)
		}
	}
	return strings.Join(parts, ", ")
}

func countNoun(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// canIHint is the command that checks the first missing permission.
func canIHint(needs []string) string {
	f := strings.Fields(needs[0])
	if len(f) < 2 {
		return ""
	}
	switch f[0] {
	case "get", "list", "watch", "create", "update", "patch", "delete":
	default:
		return "" // not a permission (e.g. a CEL condition only --verify can settle)
	}
	cmd := "(check: kubectl auth can-i " + f[0] + " " + f[1]
	rest := strings.Join(f[2:], " ")
	switch {
	case strings.HasPrefix(rest, "in namespace "):
		cmd += " -n " + strings.Fields(strings.TrimPrefix(rest, "in namespace "))[0]
	case strings.Contains(rest, "all namespaces"):
		cmd += " -A"
	}
	return cmd + ")"
}

// reportHint says what to do with a disagreement between prediction and proof.
const reportHint = "The prediction and the apiserver disagree: that is a bug in kubectl-mesh's model of the mesh. " +
	"Please report it with the output of the same command with -o yaml (it holds every factor and the proof)."

// printProof prints --verify's proof under the verdict: what admission did,
// and whether the prediction agrees.
func printProof(p *render.Printer, r *injection.InjectionReport) {
	v := r.Verified
	switch {
	case r.NotVerified != "":
		p.Para(p.Bold("Proof:")+"   ", "not verified: "+render.Escape(r.NotVerified))
	case v == nil:
	case v.Agrees == nil:
		p.Para(p.Bold("Proof:")+"   ", render.Escape(v.Summary())+" (dry run; the prediction could not be made, this is the answer)")
	case *v.Agrees:
		p.Para(p.Bold("Proof:")+"   ", p.Paint(injection.EffectInject, "agrees")+": "+render.Escape(v.Summary())+" (dry run through the real admission chain)")
	default:
		p.Para(p.Bold("Proof:")+"   ", p.Paint(injection.EffectBlocks, "DISAGREES")+": "+render.Escape(v.Disagreement))
		p.Para("         ", reportHint)
	}
}

// proofCell is the VERIFIED column of --verify.
func proofCell(p *render.Printer, r *injection.InjectionReport) string {
	v := r.Verified
	switch {
	case v == nil:
		return "-"
	case v.Agrees == nil && v.Refused:
		return "refused"
	case v.Agrees == nil:
		return map[bool]string{true: "injects", false: "no"}[v.Injected]
	case *v.Agrees:
		return p.Paint(injection.EffectInject, "agrees")
	}
	return p.Paint(injection.EffectBlocks, "DISAGREES")
}

// memoEncoder encodes each answer a sweep's pods share (injection.Memo)
// once, and puts each pod's and owner's names into the bytes: the list reads
// exactly as if every report had been encoded (TestMemoEncoderEncodesAsJSON),
// at a small part of the cost. Only for reports nobody changed after the
// memo made them (no --verify).
type memoEncoder struct {
	ids map[*injection.InjectionReport]int
	// compact and indented are the shared answers' encodings, by id
	// (indented under "    ", as printList indents an item, when asked for).
	compact, indented [][]byte
}

var (
	memoNameJSON  = jsonInner(injection.MemoName)
	memoOwnerJSON = jsonInner(injection.MemoOwner)
)

// jsonInner is s as encoding/json writes it inside a string, without the quotes.
func jsonInner(s string) []byte {
	b, _ := json.Marshal(s)
	return b[1 : len(b)-1]
}

// item is r for printList, encoded.
func (e *memoEncoder) item(r *injection.InjectionReport) (any, error) {
	shared, name, owner, ok := r.MemoAnswer()
	if !ok {
		return r, nil
	}
	id, err := e.id(shared)
	if err != nil {
		return nil, err
	}
	return render.EncodedItem(e.named(nil, id, name, owner, true)), nil
}

// id is the shared answer's number, encoded the first time it is asked for.
func (e *memoEncoder) id(shared *injection.InjectionReport) (int, error) {
	if id, ok := e.ids[shared]; ok {
		return id, nil
	}
	b, err := encodeReport(shared)
	if err != nil {
		return 0, err
	}
	if e.ids == nil {
		e.ids = map[*injection.InjectionReport]int{}
	}
	e.ids[shared] = len(e.compact)
	e.compact = append(e.compact, b)
	e.indented = append(e.indented, nil)
	return len(e.compact) - 1, nil
}

// named appends to dst the shared answer id (compact, or indented) with the
// names of the pod and its owner put in.
func (e *memoEncoder) named(dst []byte, id int, name, owner string, indented bool) []byte {
	b := e.compact[id]
	if indented {
		if e.indented[id] == nil {
			e.indented[id] = render.IndentJSON(nil, b, "    ", "  ")
		}
		b = e.indented[id]
	}
	put := func(dst, b, old []byte, new string) []byte {
		for {
			i := bytes.Index(b, old)
			if i < 0 {
				return append(dst, b...)
			}
			dst = append(dst, b[:i]...)
			dst = append(dst, jsonInner(new)...)
			b = b[i+len(old):]
		}
	}
	if !bytes.Contains(b, memoOwnerJSON) {
		return put(dst, b, memoNameJSON, name)
	}
	return put(dst, put(nil, b, memoNameJSON, name), memoOwnerJSON, owner)
}

// encodeReport is r as compact JSON, as printList encodes it.
func encodeReport(r *injection.InjectionReport) ([]byte, error) {
	render.EmptyLists(r)
	return json.Marshal(r)
}
