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
func (e *Engine) cronJobPods(ctx context.Context, facts *injection.ClusterFacts, ns string, jobs []inspect.Workload, reports []*injection.InjectionReport) ([]*injection.InjectionReport, error) {
	if len(jobs) == 0 {
		return reports, nil
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
	err := e.Client.EachPodPage(ctx, ns, sel, func(pods []corev1.Pod) error {
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

// pastCompleted drops the refusals of a CronJob's Jobs older than its
// newest Job that completed (jobs: newest first): its template is admitted
// now, and those refusals are over.
func pastCompleted(events []corev1.Event, jobs []inspect.Workload) []corev1.Event {
	older := map[string]bool{}
	done := false
	for _, j := range jobs {
		if done {
			older[j.Name] = true
		} else if j.Desired == 0 && j.Failed == "" {
			done = true
		}
	}
	var out []corev1.Event
	for _, ev := range events {
		if ev.InvolvedObject.Kind == "Job" && older[ev.InvolvedObject.Name] {
			continue
		}
		out = append(out, ev)
	}
	return out
}
