package inspect

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A CronJob's Jobs are those it controls, newest first; another CronJob's
// and a Job of its own are not.
func TestCronJobJobs(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	yes := true
	job := func(name, cron string, age time.Duration, failed bool) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))}}
		if cron != "" {
			j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cron, Controller: &yes}}
		}
		if failed {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: "True", Reason: "BackoffLimitExceeded"}}
		}
		return j
	}
	cs := fake.NewClientset(job("nightly-1", "nightly", 2*time.Hour, false), job("nightly-2", "nightly", time.Hour, true),
		job("hourly-1", "hourly", time.Minute, false), job("migrate", "", time.Minute, false))
	c := &Client{Kube: cs, Proto: cs}
	jobs, err := c.CronJobJobs(context.Background(), "shop", "nightly")
	if err != nil || len(jobs) != 2 || jobs[0].Name != "nightly-2" || jobs[1].Name != "nightly-1" {
		t.Fatalf("jobs %+v, %v", jobs, err)
	}
	if w := jobs[0]; !w.Short() || w.Controller != "CronJob/nightly" || w.Failed == "" {
		t.Errorf("the last Job: %+v", w.WorkloadState)
	}
}
