package diagnose

import (
	"slices"
	"strings"
)

// explainSymptoms puts each failing symptom down to the finding that says
// it is its cause (a check's Finding.explains): the symptom's fix becomes
// the cause's, and its evidence says why, so the first failing check is
// fixed at its cause. A cause that only warned fails once a symptom it
// explains is there.
func explainSymptoms(d *Diagnosis, noPod bool) {
	for ci := range d.Findings {
		cause := &d.Findings[ci]
		if len(cause.explains) == 0 || cause.Status != Fail && cause.Status != Warning {
			continue
		}
		changed := map[string]bool{}
		for i := range d.Findings {
			f := &d.Findings[i]
			if i == ci || f.Status != Fail || !slices.Contains(cause.explains, f.Code) || strings.Contains(f.Evidence, cause.Evidence) {
				continue
			}
			f.Evidence += "; the likely cause: " + cause.Evidence
			f.Fix, f.Mesh = cause.Fix, cause.Mesh
			changed[f.Code] = true
		}
		if len(changed) == 0 {
			continue
		}
		if cause.Status == Warning {
			cause.Status = Fail
			for i := range d.Checks {
				decide(&d.Checks[i], d.Findings, noPod)
			}
		}
		for i := range d.Checks {
			if c := &d.Checks[i]; changed[c.Code] && !strings.Contains(c.Evidence, cause.Evidence) {
				c.Evidence += "; the likely cause: " + cause.Evidence
				c.Fix = cause.Fix
			}
		}
	}
}
