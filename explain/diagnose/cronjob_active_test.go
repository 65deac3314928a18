package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A fix that patches a CronJob's template, for a Job of it that has not
// finished, also deletes that Job (its old template fails on, and under
// concurrencyPolicy Forbid it blocks every new run); a Job that finished,
// or a fix of another object, is left as it is.
func TestCronJobFixDeletesTheActiveJob(t *testing.T) {
	const patch = `kubectl patch cronjob/backup -n shop --type=json -p '[]'   # its next Jobs get it`
	yes := true
	jobPod := func(phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "backup-29930364-x", Namespace: "shop",
			OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "backup-29930364", Controller: &yes}}}, Status: corev1.PodStatus{Phase: phase}}
	}
	cases := []struct {
		name string
		f    Facts
		fix  string
		want bool
	}{
		{"a running Job's pod", Facts{Pod: jobPod(corev1.PodPending)}, patch, true},
		{"a Job refused at admission", Facts{Workload: &WorkloadState{Kind: "Job", Name: "backup-29930364", Namespace: "shop", Controller: "CronJob/backup", Desired: 1}}, patch, true},
		{"a Job that succeeded", Facts{Pod: jobPod(corev1.PodSucceeded)}, patch, false},
		{"another object's fix", Facts{Pod: jobPod(corev1.PodPending)}, "kubectl patch deployment/web -n shop -p '{}'", false},
	}
	for _, tc := range cases {
		d := &Diagnosis{Findings: []Finding{{Fix: tc.fix}}, Checks: []Check{{Fix: tc.fix}}}
		deleteActiveJob(d, tc.f)
		for _, fix := range []string{d.Findings[0].Fix, d.Checks[0].Fix} {
			got := strings.Contains(fix, "\nkubectl delete job backup-29930364 -n shop   #")
			if got != tc.want {
				t.Errorf("%s: delete line %v, want %v:\n%s", tc.name, got, tc.want, fix)
			}
		}
	}
}
