package diagnose

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeOptOutOnWorkload: sidecar.istio.io/inject="false" on a workload's own
// labels (a CronJob's jobTemplate.metadata), where no webhook sees it, and
// its pods get the sidecar the owner meant to keep out.
const CodeOptOutOnWorkload = "KM-INJ-023"

func init() {
	register(&Spec{Code: CodeOptOutOnWorkload, Title: "inject=false on the workload, not its template", Stage: CheckInjection, Kind: Static, Status: Warning,
		Reads:   []Fact{FactPod, FactOwner},
		Means:   "sidecar.istio.io/inject=\"false\" is set on a Job's own metadata.labels (or a CronJob's jobTemplate.metadata, which reaches its Jobs), not on its pod template: the injection webhooks read the pod's labels, so the opt-out does nothing and its pods get the sidecar. Where the sidecar then breaks them (a Job's classic sidecar that never ends), this is the cause, and the fix is the opt-out where it was meant, not a change of the sidecar.",
		Detects: "A Job's pod with the sidecar whose own labels lack sidecar.istio.io/inject, while its Job (from its CronJob's jobTemplate.metadata) has sidecar.istio.io/inject=\"false\" on its own labels. A warning; a failure when the sidecar breaks the pod (a classic sidecar that never ends: it explains that finding). Other workloads' pods are not read for it.",
		Fixes:   "The label inject=\"false\" in the pod template: a CronJob patched (spec.jobTemplate.spec.template), its active Job deleted; a Job made by hand made again; the pods made next run without the sidecar.",
		Source:  "Istio docs, installing the sidecar (controlling the injection policy: the label goes on the pod template); istio/istio issues on sidecar.istio.io/inject put on the workload's own labels",
		Planted: "a Job labelled sidecar.istio.io/inject=\"false\" on its own metadata, its template not, in an injected namespace",
		run:     optOutOnWorkload})
}

// OptOutNeedsOwner says a pod's injection check reads its workload's own
// labels for a misplaced opt-out: a Job's pod with the sidecar (a Job's
// is where a sidecar nobody wanted breaks the pod: it never ends).
func OptOutNeedsOwner(p *corev1.Pod) bool {
	if p == nil || p.Annotations[istio.AnnotationStatus] == "" {
		return false
	}
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "Job"
}

func optOutOnWorkload(in *Input) []Finding {
	p, o := in.Pod, in.Owner
	if p == nil || o == nil || !in.injected() || o.Kind != "Job" && o.Kind != "CronJob" {
		return nil
	}
	if _, set := p.Labels[InjectLabel]; set || o.Labels[InjectLabel] != "false" {
		return nil
	}
	kind, name := strings.ToLower(o.Kind), o.Name
	where := fmt.Sprintf("%s/%s has %s=\"false\" on its own metadata.labels", kind, name, InjectLabel)
	cron, isCron := strings.CutPrefix(o.Controller, "CronJob/")
	if o.Kind == "Job" && isCron {
		where = fmt.Sprintf("job/%s (made by cronjob/%s: its jobTemplate.metadata.labels) has %s=\"false\" on its own metadata.labels", name, cron, InjectLabel)
	}
	labels := fmt.Sprintf(`{"metadata":{"labels":{%q:"false"}}}`, InjectLabel)
	var fix string
	switch {
	case o.Kind == "CronJob" || o.Kind == "Job" && isCron:
		if cron == "" {
			cron = name
		}
		fix = fmt.Sprintf(`kubectl patch cronjob/%s -n %s --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":%s}}}}'   # the opt-out on its Jobs' pods, where the webhooks read it`, cron, o.Namespace, labels)
	default: // a Job made by hand
		no := "false"
		fix = injection.RecreateJob(name, o.Namespace, nil, map[string]*string{InjectLabel: &no}) + ", the opt-out on its pods"
	}
	status := Warning
	if classicJobPod(p) && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		status = Fail // its classic sidecar keeps the Job from ending: the opt-out was meant to keep it out
	}
	return []Finding{{Status: status,
		Evidence: where + "; its pod template (and so pod " + p.Name + ") does not: the injection webhooks read the pod's labels, so the opt-out does nothing and the pod has the sidecar",
		Mesh:     where,
		Fix:      fix,
		explains: []string{CodeJobClassicSidecar, CodeJobHelperRuns, CodeJobFailed, CodeAppFailing, CodePodNotReady, CodeProxyNotReady, CodeProxyFailing}}}
}
