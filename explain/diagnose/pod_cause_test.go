package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// A failed Job's finding names what its pod's row names (a cause a check
// found, with its fix), and stays the platform's own when the pod's
// failure is.
func TestJobFailedTakesItsPodsCause(t *testing.T) {
	plainFailed := func(p *corev1.Pod) {
		quitFailed(p)
		p.Spec.Containers[0].Command = []string{"sh", "-c", "exit 1"}
	}
	checks := 0
	for _, tc := range []struct {
		name  string
		pod   func(p *corev1.Pod)
		cause string // the code the Job's finding names; "" for none
	}{
		{"the quit call to a missing proxy", quitFailed, CodeSidecarAbsent},
		{"the app's own failure", plainFailed, ""},
	} {
		logs := map[string]startup.LogTail{"app": {Current: []string{"wget: can't connect to remote host (127.0.0.1): Connection refused"}}}
		d := Diagnose(checkCase{pod: tc.pod, inj: optedOutByLabel, logs: logs, now: 5 * time.Minute}.facts())
		c := PodCause("report-x1", d)
		w := &WorkloadState{Kind: "Job", Namespace: "shop", Name: "report", Failed: "Failed (BackoffLimitExceeded): Job has reached the specified backoff limit",
			PodCause: c, Now: t0.Add(5 * time.Minute)}
		job := Diagnose(Facts{Injection: injected(optedOutByLabel), Workload: w, NoPod: "it has no pods"})
		var got *Finding
		for i := range job.Findings {
			if job.Findings[i].Code == CodeJobFailed {
				got = &job.Findings[i]
			}
		}
		checks++
		if got == nil {
			t.Fatalf("%s: no %s finding: %+v", tc.name, CodeJobFailed, job.Findings)
		}
		checks++
		switch {
		case tc.cause == "" && (c != nil || !strings.Contains(got.Evidence, noMeshCause)):
			t.Errorf("%s: the Job's finding names a cause (%v): %s", tc.name, c, got.Evidence)
		case tc.cause != "" && (c == nil || !strings.Contains(got.Evidence, "the likely cause ("+tc.cause+"), pod report-x1: ") || got.Fix != c.Fix || strings.Contains(got.Evidence, noMeshCause)):
			t.Errorf("%s: the Job's finding does not carry its pod's cause %s: %s (fix %q)", tc.name, tc.cause, got.Evidence, got.Fix)
		}
	}
	t.Logf("%d checks", checks)
}
