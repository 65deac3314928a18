package diagnose

import (
	"strings"
	"time"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// managedElsewhere is the answer for a Job without pods whose
// spec.managedBy names another controller than the built-in one: the
// built-in controller leaves it alone, so only that controller (a
// multi-cluster queue's, say) makes its pods. Early on that controller may
// yet act (a warning); past StartGrace with nothing made, the Job is
// re-created without the field (it cannot be changed in place).
func managedElsewhere(w *WorkloadState, ev string) (status, evidence, fix string) {
	ev += "; its spec.managedBy is " + w.ManagedBy + ": the built-in Job controller leaves it to that controller, which has made no pod"
	fix = injection.RecreateJobSpec(w.Name, w.Namespace, map[string]any{"managedBy": nil}) +
		" without spec.managedBy, for the built-in controller; keep it if " + w.ManagedBy + " runs here or the Job is meant for another cluster"
	if cron, ok := strings.CutPrefix(w.Controller, "CronJob/"); ok {
		ev += " (cronjob/" + cron + " sets it from its jobTemplate)"
		fix = "kubectl patch cronjob/" + cron + " -n " + w.Namespace + ` --type=merge -p '{"spec":{"jobTemplate":{"spec":{"managedBy":null}}}}'   # its next Jobs are the built-in controller's; keep it if ` + w.ManagedBy + " runs here or its Jobs are meant for another cluster\n" +
			"kubectl delete job " + w.Name + " -n " + w.Namespace + "   # made with the field, it stays without pods (run one now: kubectl create job " + cron + "-retry --from=cronjob/" + cron + " -n " + w.Namespace + ")"
	}
	age := w.Now.Sub(w.Since)
	if age < StartGrace {
		return Warning, ev + " yet", fix
	}
	return Fail, ev + " in " + age.Round(time.Second).String(), fix
}
