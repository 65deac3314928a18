package diagnose

import (
	"fmt"
	"time"
)

// leaving answers for a pod on its way out: deleted, within its grace
// period (a rollout replaced it, or a pasted fix re-creates it). What it
// met is evidence, not the workload's answer: its failed and warned rows
// are not checked, say so and what they met, and count for nothing; its
// findings are info. A pod still there after its grace period ended is
// stuck, and keeps its answer (so does one without a pod read).
func leaving(d *Diagnosis, f Facts) (why string) {
	p := f.Pod
	if p == nil || p.DeletionTimestamp == nil {
		return ""
	}
	now := time.Now()
	if f.Startup != nil && !f.Startup.Now.IsZero() {
		now = f.Startup.Now
	}
	ends := p.DeletionTimestamp.Time
	if !ends.After(now) {
		return ""
	}
	why = fmt.Sprintf("the pod is being deleted (its grace period ends in %s): its replacement, if any, is what counts", ends.Sub(now).Round(time.Second))
	for i := range d.Checks {
		c := &d.Checks[i]
		if c.Status == Fail || c.Status == Warning {
			c.Status, c.Evidence, c.Fix, c.Code, c.Needs = NotChecked, "not checked: "+why+"; it met: "+c.Evidence, "", "", nil
		}
	}
	for i := range d.Findings {
		if fd := &d.Findings[i]; fd.Status == Fail || fd.Status == Warning {
			fd.Status = Info
		}
	}
	return why
}
