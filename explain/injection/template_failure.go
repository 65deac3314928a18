package injection

import (
	"sort"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// templateFailure puts istiod's refusal "failed to run injection template"
// (or "failed applying injection overlay") down to the pod's setting that
// made its templates fail, when the message names none of its annotations:
// the templates it asks for by inject.istio.io/templates (a gateway's or a
// waypoint's template on an app pod), or proxyMetadata values holding a
// double quote (the template writes each into an env value inside double
// quotes: the pod it makes is not valid JSON). It returns the reason and
// the fix; ok is false when neither is so.
func templateFailure(msg string, w *Workload) (reason, fix string, ok bool) {
	if !strings.Contains(msg, "denied the request") || !strings.Contains(msg, "injection template") && !strings.Contains(msg, "injection overlay") {
		return "", "", false
	}
	if t := strings.TrimSpace(w.Annotations[istio.AnnotationTemplates]); t != "" && t != "sidecar" {
		reason = "refused at admission: istiod's injection template fails on the templates the pod asks for (" + istio.AnnotationTemplates + "=" + t + "): they are not a sidecar's"
		fix = removeTemplateAnnotations(w, []string{istio.AnnotationTemplates}, "the "+t+" template is not for this pod; without the annotation it gets the sidecar template")
		if fix == "" {
			fix = "remove the annotation " + istio.AnnotationTemplates + " from the pod's manifest (its " + t + " template is not for this pod), then re-create the pod"
		}
		return reason, fix, true
	}
	if keys, kept, ok := quotedMetadata(w.Annotations[istio.AnnotationProxyConfig]); ok {
		reason = "refused at admission: the proxyMetadata value of " + strings.Join(keys, ", ") + " in " + istio.AnnotationProxyConfig + " holds a double quote, which istiod's injection template writes inside double quotes: the pod it makes is not valid"
		kind, name := templateOwnerOf(w)
		why := "a choice: " + strings.Join(keys, ", ") + " left out of proxyMetadata (or give it a value without double quotes)"
		switch {
		case kind == "Pod":
			fix = "in the pod's manifest, set " + istio.AnnotationProxyConfig + " to " + kept + " (" + why + "), then re-create the pod"
		case kept == "{}":
			fix = removeTemplateAnnotations(w, []string{istio.AnnotationProxyConfig}, why)
		default:
			fix = SetTemplateAnnotations(kind, name, w.Namespace, map[string]*string{istio.AnnotationProxyConfig: &kept}) + why
		}
		return reason, fix, true
	}
	return "", "", false
}

// quotedMetadata are the proxyMetadata keys of a proxy.istio.io/config
// value whose values hold a double quote, and the config without them (as
// JSON); ok is false when there is none, or the value does not parse.
func quotedMetadata(cfg string) (keys []string, kept string, ok bool) {
	if strings.TrimSpace(cfg) == "" {
		return nil, "", false
	}
	kept, ok = EditProxyMetadata(cfg, func(md map[string]any) bool {
		for k, v := range md {
			if s, isString := v.(string); isString && strings.Contains(s, `"`) {
				keys = append(keys, k)
				delete(md, k)
			}
		}
		return len(keys) > 0
	})
	if !ok {
		return nil, "", false
	}
	sort.Strings(keys)
	if kept == "" {
		kept = "{}"
	}
	return keys, kept, true
}

// staleJobs is, after the fix of a CronJob's template, the deletion of
// the Jobs its refusals are about: made from the old template (a Job's
// cannot change), they never get their pod, and while they are active a
// CronJob with concurrencyPolicy Forbid starts no other run. "" when the
// events name none.
func staleJobs(w *Workload) string {
	seen := map[string]bool{}
	var jobs []string
	for _, e := range w.Events {
		if e.InvolvedObject.Kind == "Job" && e.InvolvedObject.Name != "" && !seen[e.InvolvedObject.Name] {
			seen[e.InvolvedObject.Name] = true
			jobs = append(jobs, e.InvolvedObject.Name)
		}
	}
	if len(jobs) == 0 {
		return ""
	}
	sort.Strings(jobs)
	return "\nkubectl delete job " + strings.Join(jobs, " ") + " -n " + w.Namespace + " --ignore-not-found   # made from the old template, they never get their pod; while one is active, concurrencyPolicy Forbid starts no other run"
}
