package diagnose

import (
	"regexp"
	"strings"
)

// invalidProbePort is the apiserver's refusal of a pod whose probe has a
// port out of range: the container's index and the probe.
var invalidProbePort = regexp.MustCompile(`spec\.containers\[(\d+)\]\.(readiness|liveness|startup)Probe\.httpGet\.port: Invalid value: 0`)

// statusPortRefusal: the apiserver refuses the pods because a probe's port
// is 0, and the template sets the sidecar's status port to 0: Istio's
// injector rewrites the app's HTTP probes to go through the agent's status
// port, which is then 0 (the template's own probes have real ports). The
// mesh's cause; the fix removes the annotation from what makes the pods.
func statusPortRefusal(w *WorkloadState, text string) (ev, mesh, fix string, ok bool) {
	t := w.Template
	if t == nil || !invalidProbePort.MatchString(text) {
		return "", "", "", false
	}
	const key = "status.sidecar.istio.io/port"
	if v := strings.TrimSpace(t.Annotations[key]); v != "0" {
		return "", "", "", false
	}
	mesh = "the template's " + key + `="0"`
	ev = "the app's HTTP probes have real ports in the template; Istio's injector rewrote them to go through the sidecar's status port, which " + mesh + " sets to 0: the apiserver refuses a probe on port 0"
	owner := strings.ToLower(w.Kind) + "/" + w.Name
	if cron, isCron := strings.CutPrefix(w.Controller, "CronJob/"); isCron && w.Kind == "Job" {
		owner = "cronjob/" + cron
	}
	fix = templatePatch(owner, w.Namespace, []string{key}) + "   # the probes are then rewritten to the default status port 15021; to keep the app's probes as they are, set sidecar.istio.io/rewriteAppHTTPProbers: \"false\" instead"
	return ev, mesh, fix, true
}
