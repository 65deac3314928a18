package diagnose

// A CronJob's answer is its last Job's: one that failed fails the CronJob's
// row, and the fix runs the CronJob again once the cause is fixed.
func init() {
	checkCases = append(checkCases, checkCase{code: CodeJobFailed, workload: &WorkloadState{Kind: "Job", Namespace: "shop", Name: "nightly-29012345", Controller: "CronJob/nightly", Since: t0,
		Failed: "Failed (BackoffLimitExceeded): Job has reached the specified backoff limit"},
		status: Fail, evidence: "cronjob/nightly's Job: job/nightly-29012345 failed: Failed (BackoffLimitExceeded)",
		fix: "kubectl create job --from=cronjob/nightly nightly-retry -n shop"})
}
