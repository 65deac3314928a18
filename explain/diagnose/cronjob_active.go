package diagnose

import (
	"regexp"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// cronPatch is a fix's command that patches a CronJob's template.
var cronPatch = regexp.MustCompile(`(?m)^kubectl patch cronjob/([a-z0-9][-a-z0-9.]*) -n ([a-z0-9][-a-z0-9]*) `)

// deleteActiveJob completes the fixes that patch a CronJob's template for
// a Job it made that has not finished: that Job keeps its old template and
// goes on failing, and while it runs, a CronJob with concurrencyPolicy
// Forbid starts no new one (the fix would never be tried). The Job is
// deleted after the patch; the CronJob's next run uses the new template.
func deleteActiveJob(d *Diagnosis, f Facts) {
	job := ""
	switch {
	case f.Pod != nil:
		if ref := metav1.GetControllerOf(f.Pod); ref != nil && ref.Kind == "Job" && f.Pod.Status.Phase != "Succeeded" {
			job = ref.Name
		}
	case f.Workload != nil && f.Workload.Kind == "Job" && strings.HasPrefix(f.Workload.Controller, "CronJob/") && f.Workload.Desired > 0:
		job = f.Workload.Name
	}
	if job == "" {
		return
	}
	add := func(fix string) string {
		m := cronPatch.FindStringSubmatch(fix)
		if m == nil || strings.Contains("\n"+fix, "\nkubectl delete job "+job+" ") || !strings.HasPrefix(job, m[1]+"-") {
			return fix
		}
		return fix + "\nkubectl delete job " + job + " -n " + m[2] + "   # made from the old template, it goes on failing (and under concurrencyPolicy Forbid no new run starts while it is active)"
	}
	for i := range d.Findings {
		d.Findings[i].Fix = add(d.Findings[i].Fix)
	}
	for i := range d.Checks {
		d.Checks[i].Fix = add(d.Checks[i].Fix)
	}
}
