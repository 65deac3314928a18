package diagnose

import "slices"

// Slice is d cut to some of its checks: what a command about one subject
// shows of the same answer (why-injected its injection check, startup its
// init and start checks), with the same codes, statuses and fixes. Its
// status is the worst of those checks, its first the first of them that
// failed (else warned), and its findings theirs.
func Slice(d *Diagnosis, checks ...string) *Diagnosis {
	out := &Diagnosis{WorkloadKind: d.WorkloadKind, Namespace: d.Namespace, Name: d.Name, Incomplete: d.Incomplete}
	for _, c := range d.Checks {
		if slices.Contains(checks, c.Name) {
			out.Checks = append(out.Checks, c)
		}
	}
	for _, f := range d.Findings {
		if slices.Contains(checks, f.Stage) {
			out.Findings = append(out.Findings, f)
		}
	}
	out.Status = out.Worst()
	if !out.setFirst() {
		out.Verdict = "every check that ran passed"
	}
	return out
}
