package inject

import (
	"context"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// cronJobPods adds to a CronJob's reports those of the pods of its Jobs: a
// CronJob selects no pods, its Jobs do. One list of the namespace's Jobs,
// one of the pods labelled with their names.
func (e *Engine) cronJobPods(ctx context.Context, facts *injection.ClusterFacts, ns, name string, reports []*injection.InjectionReport) ([]*injection.InjectionReport, error) {
	jobs, err := e.Client.CronJobJobs(ctx, ns, name)
	if err != nil || len(jobs) == 0 {
		return reports, err
	}
	names := make([]string, 0, len(jobs))
	owned := map[string]bool{}
	for _, j := range jobs {
		names = append(names, j.Name)
		owned[j.Name] = true
	}
	sort.Strings(names)
	// job-name: the label every Job's pods carry (batch.kubernetes.io/job-name
	// too, from Kubernetes 1.27).
	sel := "job-name in (" + strings.Join(names, ",") + ")"
	err = e.Client.EachPodPage(ctx, ns, sel, func(pods []corev1.Pod) error {
		for i := range pods {
			if o := inspect.OwnerOf(&pods[i]); o == nil || o.Kind != "Job" || !owned[o.Name] {
				continue
			}
			r := e.Mesh.Explain(facts, inspect.PodWorkload(&pods[i], facts))
			e.recordLive(r, &pods[i])
			reports = append(reports, r)
		}
		return nil
	})
	if err != nil {
		return nil, inspect.ExplainAPIError(err, "list pods")
	}
	return reports, nil
}
