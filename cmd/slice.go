package cmd

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// injectionSlice is diagnose's answer for a report, cut to its injection
// check: the slice why-injected shows, whose status decides its exit by
// diagnose's rule (p, when given, is the report's pod, which some checks
// read).
func injectionSlice(r *injection.InjectionReport, p *corev1.Pod, owner ...*diagnose.WorkloadState) *diagnose.Diagnosis {
	f := diagnose.Facts{Injection: r, Pod: p, NoPod: "why-injected checks injection only"}
	if len(owner) > 0 {
		f.Owner = owner[0]
	}
	d := diagnose.Diagnose(f)
	return diagnose.Slice(d, diagnose.CheckInjection)
}

// manifestSlice is injectionSlice for a report of a manifest (-f): its
// fixes name the files.
func manifestSlice(r *injection.InjectionReport, files []string) *diagnose.Diagnosis {
	d := diagnose.Diagnose(diagnose.Facts{Injection: r, Files: files, NoPod: "why-injected checks injection only"})
	return diagnose.Slice(d, diagnose.CheckInjection)
}

// startupSlice is diagnose's answer for a pod's startup, cut to its init
// and start checks: the slice startup shows, with the same codes, statuses
// and fixes, whose status decides its exit by diagnose's rule.
func startupSlice(r *startup.StartupReport, p *corev1.Pod, extra ...diagnose.Facts) *diagnose.Diagnosis {
	var f diagnose.Facts
	if len(extra) > 0 {
		f = extra[0] // what the engine read for the pod's checks
	}
	f.Startup, f.Pod = r, p
	d := diagnose.Diagnose(f)
	return diagnose.Slice(d, diagnose.CheckInit, diagnose.CheckStart)
}
