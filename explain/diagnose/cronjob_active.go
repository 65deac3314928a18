package diagnose

import (
	"encoding/json"
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

// recreateJob is a fix's line that re-creates a Job with its template
// changed (injection.RecreateJob), after an optional wait.
var recreateJob = regexp.MustCompile(`^((?:sleep \d+; )?)kubectl get job ([a-z0-9][-a-z0-9.]*) -n ([a-z0-9][-a-z0-9]*) -o json \| kubectl patch --local -f - --type=merge -p '(\{.*?\})' -o json \| kubectl replace --force -f -(.*)$`)

// recreatedJobComment is the comment RecreateJob puts after its command.
var recreatedJobComment = regexp.MustCompile(`^\s+# a Job's pod template cannot be patched: this deletes job/[-a-z0-9.]+ and creates it again with the change`)

// cronJobTemplates turns the fixes that re-create a Job a CronJob made
// into patches of the CronJob's template (round 24's 05: the Job re-created
// with the change, its CronJob's next run had the fault again): the same
// change, under spec.jobTemplate.spec.template; deleteActiveJob then
// deletes the Job that runs on the old template.
func cronJobTemplates(d *Diagnosis, f Facts) {
	o := f.Owner
	if f.Pod == nil || o == nil {
		return
	}
	cron, ok := strings.CutPrefix(o.Controller, "CronJob/")
	if o.Kind == "CronJob" {
		cron, ok = o.Name, true
	}
	ref := metav1.GetControllerOf(f.Pod)
	if !ok || ref == nil || ref.Kind != "Job" || !strings.HasPrefix(ref.Name, cron+"-") {
		return // (a Job made by hand from the CronJob is re-created, beside its patch)
	}
	rewrite := func(fix string) string {
		if m := cronPatch.FindStringSubmatch(fix); m != nil && m[1] == cron {
			return fix // the fix patches the CronJob already
		}
		lines := strings.Split(fix, "\n")
		for i, line := range lines {
			m := recreateJob.FindStringSubmatch(line)
			if m == nil || m[2] != ref.Name {
				continue
			}
			var patch struct {
				Spec struct {
					Template map[string]any `json:"template"`
				} `json:"spec"`
			}
			if json.Unmarshal([]byte(m[4]), &patch) != nil || patch.Spec.Template == nil {
				continue
			}
			if meta, _ := patch.Spec.Template["metadata"].(map[string]any); meta != nil {
				if labels, _ := meta["labels"].(map[string]any); labels != nil {
					delete(labels, "controller-uid")
					delete(labels, "batch.kubernetes.io/controller-uid")
					if len(labels) == 0 {
						delete(meta, "labels")
					}
				}
				if len(meta) == 0 {
					delete(patch.Spec.Template, "metadata")
				}
			}
			if len(patch.Spec.Template) == 0 {
				continue
			}
			rest := recreatedJobComment.ReplaceAllString(m[5], "")
			lines[i] = "kubectl patch cronjob/" + cron + " -n " + m[3] + " --type=merge -p '" +
				plainJSON(map[string]any{"spec": map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": patch.Spec.Template}}}}) +
				"'   # its next runs get the change (job/" + ref.Name + " was made by cronjob/" + cron + ")" + rest
		}
		return strings.Join(lines, "\n")
	}
	for i := range d.Findings {
		d.Findings[i].Fix = rewrite(d.Findings[i].Fix)
	}
	for i := range d.Checks {
		d.Checks[i].Fix = rewrite(d.Checks[i].Fix)
	}
}
