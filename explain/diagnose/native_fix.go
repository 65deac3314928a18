package diagnose

import (
	"fmt"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// nativeSidecarFix is the command that gives a run-once pod a native
// sidecar (sidecar.istio.io/nativeSidecar "true", which istiod reads from
// Istio 1.24) where its pods are made: a CronJob's job template (its stuck
// run deleted), a Job re-created, a bare pod re-created from the manifest
// it was applied with; "" when none is known (the finding's words stay).
func (in *Input) nativeSidecarFix() string {
	p := in.Pod
	if p == nil {
		return ""
	}
	const why = "   # a native sidecar ends with the pod's own containers (Kubernetes 1.29+)"
	owner := templateOwner(p)
	switch {
	case in.Owner != nil && strings.HasPrefix(in.Owner.Controller, "CronJob/") || in.Owner != nil && in.Owner.Kind == "CronJob":
		cron := strings.TrimPrefix(in.Owner.Controller, "CronJob/")
		if in.Owner.Kind == "CronJob" {
			cron = in.Owner.Name
		}
		job := ""
		if strings.HasPrefix(owner, "job/") {
			job = strings.TrimPrefix(owner, "job/")
		}
		fix := fmt.Sprintf(`kubectl patch cronjob/%s -n %s --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{%q:"true"}}}}}}}'`, cron, p.Namespace, istio.AnnotationNativeSidecar) + why
		if job != "" {
			fix += "\n" + stuckRun(job, cron, p.Namespace)
		}
		return fix
	case strings.HasPrefix(owner, "job/"):
		yes := "true"
		return injection.RecreateJob(strings.TrimPrefix(owner, "job/"), p.Namespace, map[string]*string{istio.AnnotationNativeSidecar: &yes}, nil)
	case owner == "":
		return recreateBarePod(p, "", "merge", fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, istio.AnnotationNativeSidecar))
	}
	return ""
}
