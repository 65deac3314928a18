package inject

import (
	"context"
	"sort"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// A CronJob's reports follow its Jobs to their pods: the pods of the Jobs
// it controls, not another CronJob's nor a bare Job's.
func TestCronJobPods(t *testing.T) {
	yes := true
	ref := func(kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: kind, Name: name, Controller: &yes}}
	}
	job := func(name, cron string) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}}
		if cron != "" {
			j.OwnerReferences = ref("CronJob", cron)
		}
		return j
	}
	pod := func(name, job string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, OwnerReferences: ref("Job", job),
			Labels: map[string]string{"job-name": job, "batch.kubernetes.io/job-name": job}},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "job"}}}}
	}
	cs := fake.NewClientset(job("nightly-1", "nightly"), job("nightly-2", "nightly"), job("hourly-1", "hourly"), job("migrate", ""),
		pod("nightly-1-a", "nightly-1"), pod("nightly-2-a", "nightly-2"), pod("nightly-2-b", "nightly-2"), pod("hourly-1-a", "hourly-1"), pod("migrate-a", "migrate"))
	e := &Engine{Client: &inspect.Client{Kube: cs, Proto: cs, PagesOnly: true}, Mesh: injection.Istio{}}
	facts := &injection.ClusterFacts{Unknown: map[string]string{}}
	reports, err := e.cronJobPods(context.Background(), facts, "shop", "nightly", nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range reports {
		names = append(names, r.Kind+"/"+r.Name)
	}
	sort.Strings(names)
	if len(names) != 3 || names[0] != "Pod/nightly-1-a" || names[2] != "Pod/nightly-2-b" {
		t.Errorf("reports %q, want the 3 pods of nightly's Jobs", names)
	}
}
