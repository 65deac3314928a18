package diagnose

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A CronJob's answer is its last Job's: one that failed fails the CronJob's
// row, and the fix runs the CronJob again once the cause is fixed.
func init() {
	checkCases = append(checkCases, checkCase{code: CodeJobFailed, workload: &WorkloadState{Kind: "Job", Namespace: "shop", Name: "nightly-29012345", Controller: "CronJob/nightly", Since: t0,
		Failed: "Failed (BackoffLimitExceeded): Job has reached the specified backoff limit"},
		status: Fail, evidence: "cronjob/nightly's Job: job/nightly-29012345 failed: Failed (BackoffLimitExceeded)",
		fix: "kubectl create job --from=cronjob/nightly nightly-retry -n shop"})
}

// A run-once pod with a classic sidecar that ended (its proxy stopped by
// the job's /quitquitquit) was not kept alive: no finding.
func TestRunOnceEndedHasNoClassicSidecarFinding(t *testing.T) {
	for _, phase := range []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed} {
		c := checkCase{pod: func(p *corev1.Pod) {
			p.OwnerReferences = nil
			p.Spec.RestartPolicy = corev1.RestartPolicyNever
			p.Status.Phase = phase
		}}
		if fs := only(Diagnose(c.facts()).Findings, CodeJobClassicSidecar); len(fs) != 0 {
			t.Errorf("%s: %+v", phase, fs)
		}
	}
}
