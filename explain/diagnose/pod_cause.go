package diagnose

import "strings"

// PodCause is the finding of pod's diagnosis d that names why it failed, as
// a Job's finding quotes it: the first failure a check puts down to a
// cause of its own (not a symptom, which quotes its cause: the cause
// itself); nil when the pod's failure is the platform's own or nothing
// failed.
func PodCause(pod string, d *Diagnosis) *Finding {
	for _, f := range d.Findings {
		if f.Status != Fail || isPlatform(f) || strings.Contains(f.Evidence, "; the likely cause: ") {
			continue
		}
		c := f
		c.Evidence = "pod " + pod + ": " + c.Evidence
		return &c
	}
	return nil
}
