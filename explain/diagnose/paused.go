package diagnose

import (
	"fmt"
	"strings"
)

// resumePaused makes the fixes that restart a paused Deployment work:
// kubectl refuses "rollout restart" on one ("can't restart paused
// deployment"), and a paused Deployment creates no new pods, so each such
// fix first resumes it. Resuming also rolls out whatever was changed in its
// template while it was paused: the line says so, since that is the user's
// choice to make.
func resumePaused(d *Diagnosis, f Facts) {
	var paused []*WorkloadState
	for _, w := range []*WorkloadState{f.Owner, f.Workload} {
		if w != nil && w.Paused && w.Kind == "Deployment" {
			paused = append(paused, w)
		}
	}
	if len(paused) == 0 {
		return
	}
	fix := func(s string) string {
		for _, w := range paused {
			restart := "kubectl rollout restart deployment/" + w.Name + " -n " + w.Namespace
			if !strings.Contains(s, restart) || strings.Contains(s, "kubectl rollout resume deployment/"+w.Name+" ") {
				continue
			}
			resume := fmt.Sprintf("kubectl rollout resume deployment/%s -n %s   # it is paused (kubectl rollout pause): it creates no pods and refuses a restart; resuming also rolls out any template change made while paused", w.Name, w.Namespace)
			s = strings.Replace(s, restart, resume+"\n"+restart, 1)
		}
		return s
	}
	for i := range d.Findings {
		d.Findings[i].Fix = fix(d.Findings[i].Fix)
	}
	for i := range d.Checks {
		d.Checks[i].Fix = fix(d.Checks[i].Fix)
	}
}
