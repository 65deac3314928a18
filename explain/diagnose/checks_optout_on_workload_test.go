package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// optedOutJob: a CronJob's Job's pod with a sidecar, the opt-out put on the
// jobTemplate's own labels (red team round 27's 08). Its classic sidecar
// keeps the Job from ending (KM-START-007), which the opt-out explains: fail.
func optedOutJob(p *corev1.Pod) {
	yes := true
	p.Name = "report-29300000-x1"
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "report-29300000", Controller: &yes}}
	p.Labels = map[string]string{"job-name": "report-29300000"}
}

func optOutOwner(kind, name, controller string) *WorkloadState {
	return &WorkloadState{Kind: kind, Namespace: "shop", Name: name, Controller: controller, Labels: map[string]string{"sidecar.istio.io/inject": "false"}}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeOptOutOnWorkload, pod: optedOutJob, owner: optOutOwner("Job", "report-29300000", "CronJob/report"), status: Fail,
		evidence: `job/report-29300000 (made by cronjob/report: its jobTemplate.metadata.labels) has sidecar.istio.io/inject="false" on its own metadata.labels`,
		fix:      `kubectl patch cronjob/report -n shop --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"false"}}}}}}}'`})
}

// The opt-out on the workload warns for an injected pod without the label
// of its own; the label on the pod, no sidecar, or no opt-out says
// nothing; the fix puts it on the template of what makes the pod. Only a
// Job's pods are read for it (OptOutNeedsOwner).
func TestOptOutOnWorkload(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		name  string
		pod   func(p *corev1.Pod)
		owner *WorkloadState
		want  string // in the fix; "" no finding
	}{
		{"a CronJob's Job", optedOutJob, optOutOwner("Job", "report-29300000", "CronJob/report"), "kubectl patch cronjob/report -n shop"},
		{"a Deployment (not read)", optedOutJob, optOutOwner("Deployment", "web", ""), ""},
		{"a Job by hand", optedOutJob, optOutOwner("Job", "report-manual", ""), "kubectl get job report-manual -n shop -o json"},
		{"the pod has it too", func(p *corev1.Pod) { optedOutJob(p); p.Labels["sidecar.istio.io/inject"] = "true" }, optOutOwner("Job", "report-29300000", "CronJob/report"), ""},
		{"no sidecar", func(p *corev1.Pod) { optedOutJob(p); notInjected(p) }, optOutOwner("Job", "report-29300000", "CronJob/report"), ""},
		{"the owner asks for it", optedOutJob, &WorkloadState{Kind: "Job", Name: "j", Labels: map[string]string{"sidecar.istio.io/inject": "true"}}, ""},
	} {
		got := optOutOnWorkload(&Input{Facts: Facts{Pod: pod(tc.pod), Injection: injected(nil), Owner: tc.owner}})
		checks++
		switch {
		case tc.want == "" && len(got) > 0, tc.want != "" && (len(got) != 1 || !strings.Contains(got[0].Fix, tc.want)):
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
	checks += 2
	p := pod(optedOutJob)
	p.Annotations = map[string]string{"sidecar.istio.io/status": "{}"}
	if !OptOutNeedsOwner(p) || OptOutNeedsOwner(pod(func(p *corev1.Pod) { optedOutJob(p); p.OwnerReferences[0].Kind = "ReplicaSet" })) {
		t.Errorf("OptOutNeedsOwner: a Job's injected pod only")
	}
	t.Logf("%d checks", checks)
}
