package cmd

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// injectionSlice is diagnose's answer for a report, cut to its injection
// check: the slice why-injected shows, whose status decides its exit by
// diagnose's rule (p, when given, is the report's pod, which some checks
// read).
func injectionSlice(r *injection.InjectionReport, p *corev1.Pod) *diagnose.Diagnosis {
	f := diagnose.Facts{Injection: r, Pod: p, NoPod: "why-injected checks injection only"}
	d := diagnose.Diagnose(f)
	inj := d.Checks[0]
	out := &diagnose.Diagnosis{WorkloadKind: d.WorkloadKind, Namespace: d.Namespace, Name: d.Name, Status: inj.Status, Checks: d.Checks[:1]}
	if inj.Status == diagnose.Fail {
		out.First = inj.Name
	}
	for _, fd := range d.Findings {
		if fd.Stage == diagnose.CheckInjection {
			out.Findings = append(out.Findings, fd)
		}
	}
	return out
}
