package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// A CronJob's refusals on Jobs older than its newest completed Job are
// over; those of newer Jobs, or of a CronJob none of whose Jobs completed,
// stand.
func TestPastCompleted(t *testing.T) {
	job := func(name string, desired int32, failed string) inspect.Workload {
		return inspect.Workload{WorkloadState: diagnose.WorkloadState{Kind: "Job", Name: name, Desired: desired, Failed: failed}}
	}
	refused := func(job string) corev1.Event {
		return corev1.Event{Reason: "FailedCreate", InvolvedObject: corev1.ObjectReference{Kind: "Job", Name: job}}
	}
	events := []corev1.Event{refused("report-3"), refused("report-1"), refused("report-0")}
	// Newest first: report-3 refused (wants its pod), report-2 completed.
	jobs := []inspect.Workload{job("report-3", 1, ""), job("report-2", 0, ""), job("report-1", 1, ""), job("report-0", 0, "Failed (BackoffLimitExceeded)")}
	got := pastCompleted(events, jobs)
	if len(got) != 1 || got[0].InvolvedObject.Name != "report-3" {
		t.Errorf("after report-2 completed: %v", got)
	}
	// No Job completed: every refusal stands.
	if got := pastCompleted(events, []inspect.Workload{job("report-3", 1, ""), job("report-1", 1, ""), job("report-0", 0, "Failed")}); len(got) != 3 {
		t.Errorf("no Job completed: %v", got)
	}
}
