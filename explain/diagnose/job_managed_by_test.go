package diagnose

import (
	"strings"
	"testing"
	"time"
)

// A Job without pods whose spec.managedBy names another controller: the
// built-in controller leaves it alone, so its answer names the field, not
// "its controller is creating them"; its fix re-creates the Job without it
// (a CronJob's: its jobTemplate patched, the Job deleted); early, a warning.
func TestJobManagedElsewhere(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	job := func(age time.Duration, controller string) *WorkloadState {
		return &WorkloadState{Kind: "Job", Namespace: "batch", Name: "export", Desired: 1, ManagedBy: "kueue.x-k8s.io/multikueue",
			Since: now.Add(-age), Now: now, Controller: controller}
	}
	cases := []struct {
		name   string
		w      *WorkloadState
		status string
		fix    []string
	}{
		{"a Job", job(5*time.Minute, ""), Fail, []string{`kubectl get job export -n batch -o json | kubectl patch --local -f - --type=merge -p '{"metadata":`}},
		{"just created", job(10*time.Second, ""), Warning, []string{"kubectl get job export -n batch -o json"}},
		{"a CronJob's", job(5*time.Minute, "CronJob/nightly"), Fail, []string{
			`kubectl patch cronjob/nightly -n batch --type=merge -p '{"spec":{"jobTemplate":{"spec":{"managedBy":null}}}}'`,
			"kubectl delete job export -n batch "}},
	}
	for _, tc := range cases {
		fs := workloadShort(&Input{Facts: Facts{Workload: tc.w, NoPod: "it has no pods"}})
		if len(fs) != 1 {
			t.Fatalf("%s: %d findings", tc.name, len(fs))
		}
		f := fs[0]
		if f.Status != tc.status || !strings.Contains(f.Evidence, "spec.managedBy is kueue.x-k8s.io/multikueue") || strings.Contains(f.Evidence, "creating them") {
			t.Errorf("%s: %s: %s", tc.name, f.Status, f.Evidence)
		}
		lines := strings.Split(f.Fix, "\n")
		if len(lines) != len(tc.fix) {
			t.Errorf("%s: fix %q", tc.name, f.Fix)
			continue
		}
		for i, w := range tc.fix {
			if !strings.HasPrefix(lines[i], w) {
				t.Errorf("%s: fix line %d %q, want %q", tc.name, i, lines[i], w)
			}
		}
		if tc.w.Controller == "" && !strings.Contains(f.Fix, `"managedBy":null`) {
			t.Errorf("%s: the re-created Job keeps managedBy: %s", tc.name, f.Fix)
		}
	}
}
