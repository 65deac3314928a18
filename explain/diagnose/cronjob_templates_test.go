package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// A fix that re-creates a Job, on the pod of a Job a CronJob made (red team
// round 24's 05: the proxy image variant the nodes cannot pull, under
// concurrencyPolicy Forbid), patches the CronJob's template instead, with
// the same change, then deletes the stuck Job; a Job of its own keeps the
// re-create.
func TestCronJobTemplatesTakeTheJobsFix(t *testing.T) {
	checks := 0
	for _, tc := range []struct {
		name  string
		owner *WorkloadState
		want  []string
	}{
		{"a CronJob's Job", &WorkloadState{Kind: "Job", Namespace: "batch", Name: "export-29932192", Controller: "CronJob/export"}, []string{
			`kubectl patch cronjob/export -n batch --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyImageType":null}}}}}}}'   # its next runs get the change (job/export-29932192 was made by cronjob/export)   # the image variant`,
			"\nkubectl delete job export-29932192 -n batch   # made from the old template",
		}},
		{"a Job of its own", &WorkloadState{Kind: "Job", Namespace: "batch", Name: "export-29932192"}, []string{
			"kubectl get job export-29932192 -n batch -o json | kubectl patch --local -f - ",
		}},
	} {
		p := pod(func(p *corev1.Pod) {
			p.Namespace = "batch"
			yes := true
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "export-29932192", Controller: &yes}}
			p.Status.Phase = corev1.PodPending
		})
		fix := injection.RecreateJob("export-29932192", "batch", map[string]*string{"sidecar.istio.io/proxyImageType": nil}, nil) + "   # the image variant \"distroless\" is not one the nodes can pull"
		d := &Diagnosis{Findings: []Finding{{Code: CodeCannotStart, Status: Fail, Fix: fix}}, Checks: []Check{{Name: CheckInit, Status: Fail, Fix: fix}}}
		f := Facts{Pod: p, Owner: tc.owner}
		cronJobTemplates(d, f)
		deleteActiveJob(d, f)
		for _, got := range []string{d.Findings[0].Fix, d.Checks[0].Fix} {
			for _, w := range tc.want {
				checks++
				if !strings.Contains(got, w) {
					t.Errorf("%s: fix %q lacks %q", tc.name, got, w)
				}
			}
		}
	}
	t.Logf("%d checks", checks)
}
