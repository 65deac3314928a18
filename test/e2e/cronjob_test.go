package e2e

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// diagnose cronjob/x follows the CronJob to the Jobs it controls (made as
// `kubectl create job --from=cronjob/x` makes them) and to their pods,
// never to another CronJob's nor to a Job of its own; and the answer for
// its last Job, failed, is a fail.
func TestCronJobFollowsItsJobs(t *testing.T) {
	c := testcluster.Get(t)
	bin := meshBinary(t, c)
	ctx := context.Background()
	ns := c.Namespace(t, "cronjob", nil)
	checks := 0
	yes, backoff, suspend := true, int32(0), true
	cron := func(name, script string) *batchv1.CronJob {
		p := appPod(name, nil, nil)
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", script}
		p.Spec.Containers[0].Ports = nil
		return &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", Suspend: &suspend, JobTemplate: batchv1.JobTemplateSpec{
				Spec: batchv1.JobSpec{BackoffLimit: &backoff, Template: corev1.PodTemplateSpec{Spec: p.Spec}}}}}
	}
	// A Job of the CronJob, as kubectl create job --from=cronjob makes it.
	jobOf := func(cj *batchv1.CronJob, name string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: cj.Name, UID: cj.UID, Controller: &yes}}},
			Spec: cj.Spec.JobTemplate.Spec}
	}
	var made []*batchv1.CronJob
	for _, cj := range []*batchv1.CronJob{cron("nightly", "echo cannot reach the database; exit 3"), cron("hourly", "exit 0")} {
		got, err := c.Client.BatchV1().CronJobs(ns).Create(ctx, cj, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, got)
	}
	jobs := []*batchv1.Job{jobOf(made[0], "nightly-1"), jobOf(made[1], "hourly-1")}
	own := jobOf(made[1], "migrate")
	own.OwnerReferences = nil
	for _, j := range append(jobs, own) {
		if _, err := c.Client.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := catPoll(waitCtx, "nightly-1 failed", func(ctx context.Context) (bool, string) { return jobFailed(ctx, c, ns) }); err != nil {
		t.Fatal(err)
	}
	d, r, err := catRunDiagnose(bin, c.Kubeconfig, ns, "cronjob/nightly")
	if err != nil {
		t.Fatalf("diagnose cronjob/nightly: %v\n%s", err, r.stderr)
	}
	var names []string
	failed := false
	for _, it := range d.all() {
		names = append(names, strings.ToLower(it.WorkloadKind)+"/"+it.Name)
		failed = failed || it.Status == "fail"
	}
	sort.Strings(names)
	checks++
	for _, n := range names {
		if !strings.Contains(n, "nightly") {
			t.Errorf("diagnose cronjob/nightly answers for %s: %v", n, names)
		}
	}
	checks++
	if len(names) == 0 || !failed {
		t.Errorf("diagnose cronjob/nightly, whose last Job failed: %v, none fails", names)
	}
	testreport.Count(t, "CronJob follows its Jobs: %d checks over %v", checks, names)
}

// catRunDiagnose is diagnose of one named target in ns, as JSON.
func catRunDiagnose(bin, kubeconfig, ns, target string) (catDoc, result, error) {
	r, err := catRun(bin, "--kubeconfig", kubeconfig, "diagnose", target, "-n", ns, "-o", "json")
	var d catDoc
	if r.stdout != "" {
		if jerr := json.Unmarshal([]byte(r.stdout), &d); jerr != nil && err == nil {
			err = jerr
		}
	}
	return d, r, err
}
