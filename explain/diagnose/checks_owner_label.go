package diagnose

import (
	"fmt"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// CodeInjectLabelOnWorkload: sidecar.istio.io/inject on a workload's own
// labels, where no webhook sees it, instead of its pod template's.
const CodeInjectLabelOnWorkload = "KM-INJ-015"

// InjectLabel is the label a webhook's object selector reads on the pod.
const InjectLabel = "sidecar.istio.io/inject"

func init() {
	register(&Spec{Code: CodeInjectLabelOnWorkload, Title: "inject label on the workload, not its pod template", Stage: CheckInjection, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactOwner},
		Means:   "sidecar.istio.io/inject (or istio.io/rev) is set on a Deployment's, StatefulSet's, DaemonSet's, Job's or CronJob's own metadata.labels: the injection webhooks select pods by their labels, which come from the pod template, so no pod of it is ever injected (or injected by that revision). sidecar.istio.io/inject asks for a sidecar the pods never get: a failure; istio.io/rev alone (some tools label their own workloads with it) is a warning.",
		Detects: "The labels of the workload that made the pod (a ReplicaSet's Deployment, a Job's CronJob: its jobTemplate's labels reach the Job) have sidecar.istio.io/inject (not \"false\") or istio.io/rev, the pod's own labels do not, and the pod has no sidecar and is not in ambient mode; for a manifest (-f), the workload's own labels in the file against its template's, when no webhook would inject the template.",
		Fixes:   "kubectl patch the workload: the same label, with the same value, in its pod template (spec.template.metadata.labels; a CronJob's spec.jobTemplate.spec.template): the rollout re-creates its pods, and a webhook that selects the label (the default revision's object selector) injects them. A Job's template cannot be changed: its CronJob, or a new Job.",
		Source:  "istio/istio issues and questions on sidecar.istio.io/inject put on the Deployment's labels instead of the template's",
		Planted: "a Deployment labelled sidecar.istio.io/inject=true on its own metadata, its template not, in a namespace with no injection label",
		run:     InjectLabelOnWorkload})
}

func InjectLabelOnWorkload(in *Input) []Finding {
	if in.Pod == nil && len(in.Files) > 0 {
		return manifestLabelOnWorkload(in)
	}
	p, o := in.Pod, in.Owner
	if p == nil || o == nil || in.injected() || in.Injection != nil && in.Injection.Ambient {
		return nil
	}
	// The label that asks for a sidecar (or, istio.io/rev, for a
	// revision's), on the workload and not on its pods.
	key, v := "", ""
	for _, k := range []string{InjectLabel, "istio.io/rev"} {
		val, ok := o.Labels[k]
		if _, set := p.Labels[k]; !ok || set || k == InjectLabel && val == "false" || val == "" {
			continue
		}
		key, v = k, val
		break
	}
	if key == "" {
		return nil
	}
	kind, name := strings.ToLower(o.Kind), o.Name
	where := fmt.Sprintf("%s/%s has %s=%s on its own metadata.labels", kind, name, key, v)
	ev := where + "; its pod template (and so pod " + p.Name + ") does not: the injection webhooks read the pod's labels, so none of its pods gets a sidecar"
	patch := func(path string) string {
		return fmt.Sprintf(`--type merge -p '{"spec":%s}'`, strings.Replace(path, "LABELS", fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, v), 1))
	}
	tmpl := patch(`{"template":LABELS}`)
	status := Warning
	if key == InjectLabel {
		status = Fail // it asks for a sidecar, and its pods run without one
	}
	f := Finding{Status: status, Evidence: ev, Mesh: where}
	switch cron, isCron := strings.CutPrefix(o.Controller, "CronJob/"); {
	case o.Kind == "CronJob":
		f.Fix = fmt.Sprintf("kubectl patch cronjob %s -n %s %s   # its next Jobs' pods carry the label", name, o.Namespace, patch(`{"jobTemplate":{"spec":{"template":LABELS}}}`))
	case o.Kind == "Job" && isCron:
		// The label reached the Job from its CronJob's jobTemplate.metadata.
		f.Evidence = fmt.Sprintf("job/%s (made by cronjob/%s: its jobTemplate.metadata.labels) has %s=%s on its own metadata.labels; ", name, cron, key, v) +
			"its pod template (and so pod " + p.Name + ") does not: the injection webhooks read the pod's labels, so none of its pods gets a sidecar"
		f.Fix = fmt.Sprintf("kubectl patch cronjob %s -n %s %s   # its next Jobs' pods carry the label", cron, o.Namespace, patch(`{"jobTemplate":{"spec":{"template":LABELS}}}`))
	case o.Kind == "Job":
		f.Fix = injection.RecreateJob(name, o.Namespace, nil, map[string]*string{key: &v}) + ", the label on its pods"
	default:
		f.Fix = fmt.Sprintf("kubectl patch %s %s -n %s %s   # the rollout re-creates its pods with the label", kind, name, o.Namespace, tmpl)
	}
	return []Finding{f}
}

// manifestLabelOnWorkload is the check for a manifest's workload (-f):
// the injection label on its own metadata, not on its template's, and its
// pods would get no sidecar.
func manifestLabelOnWorkload(in *Input) []Finding {
	r := in.Injection
	if r == nil || r.Kind == "Pod" || r.Ambient || r.Expected == nil || *r.Expected {
		return nil
	}
	key, v := "", ""
	for _, k := range []string{InjectLabel, "istio.io/rev"} {
		if val, ok := r.WorkloadOnlyLabels[k]; ok && val != "" && !(k == InjectLabel && val == "false") {
			key, v = k, val
			break
		}
	}
	if key == "" {
		return nil
	}
	kind := strings.ToLower(r.Kind)
	where := fmt.Sprintf("%s/%s has %s=%s on its own metadata.labels", kind, r.Name, key, v)
	f := Finding{Status: Warning, Mesh: where,
		Evidence: where + " in " + strings.Join(in.Files, ", ") + "; its pod template does not: the injection webhooks read the pod's labels, so none of its pods would get a sidecar"}
	if key == InjectLabel {
		f.Status = Fail
	}
	path := `{"spec":{"template":{"metadata":{"labels":{%q:%q}}}}}`
	if r.Kind == "CronJob" {
		path = `{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"labels":{%q:%q}}}}}}}`
	}
	if r.Kind == "Job" {
		f.Fix = fmt.Sprintf("in %s, put %s: %q under the Job's spec.template.metadata.labels, then kubectl apply -f %s   # a Job's template cannot be patched once created",
			strings.Join(in.Files, ", "), key, v, strings.Join(in.Files, " -f "))
		return []Finding{f}
	}
	f.Fix = fmt.Sprintf("kubectl apply -f %s -n %s && kubectl patch %s %s -n %s --type merge -p '%s'   # creates it, then puts the label on its pod template, where the webhooks read it (move it there in the file too)",
		strings.Join(in.Files, " -f "), r.Namespace, kind, r.Name, r.Namespace, fmt.Sprintf(path, key, v))
	return []Finding{f}
}
