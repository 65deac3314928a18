package render

import (
	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/explain/upgrade"
)

// The -o json|yaml documents of one report: the report with its
// apiVersion (APIVersion) and kind. Lists are written by List.

// InjectionReportDoc is one report as printed with -o json|yaml.
type InjectionReportDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	*injection.InjectionReport
}

// StartupReportDoc is one pod's report as printed with -o json|yaml.
type StartupReportDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	StartupItem
}

// StartupItem is one pod's report, and diagnose's init and start checks on
// it (the same codes, statuses and fixes).
type StartupItem struct {
	*startup.StartupReport
	Diagnosis *diagnose.Diagnosis `json:"diagnosis,omitempty"`
}

// CaptureReportDoc is the -o json|yaml document of `kubectl mesh iptables`.
type CaptureReportDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	*capture.CaptureReport
}

// DiagnosisDoc is one diagnosis as printed with -o json|yaml.
type DiagnosisDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	*diagnose.Diagnosis
}

// UpgradePlanDoc is `kubectl mesh upgrade-plan`'s -o json|yaml document.
type UpgradePlanDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	*upgrade.Plan
}
