package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// jobPodOptedOut is Job migrate's pod, labelled inject=false at admission
// (its template is not), not injected.
func jobPodOptedOut(p *corev1.Pod) {
	yes := true
	p.Labels = map[string]string{"app": "migrate", "sidecar.istio.io/inject": "false", "batch.kubernetes.io/job-name": "migrate"}
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "migrate", Controller: &yes}}
	p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
	p.Spec.Containers, p.Status.ContainerStatuses = p.Spec.Containers[1:], p.Status.ContainerStatuses[1:]
}

func migrateJob() *WorkloadState {
	return &WorkloadState{Kind: "Job", Namespace: "shop", Name: "migrate",
		Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "migrate"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}}
}

const mapExempt = `kubectl patch mutatingadmissionpolicybinding no-sidecar-for-jobs --type=json -p '[{"op":"add","path":"/spec/matchResources/namespaceSelector","value":{"matchExpressions":[{"key":"kubernetes.io/metadata.name","operator":"NotIn","values":["shop"]}]}}]'`

func withMAP(r *injection.InjectionReport) {
	no := false
	r.Injected, r.Expected, r.Mismatch = &no, &no, &no
	r.OtherMutators = []injection.Mutator{{By: "MutatingAdmissionPolicyBinding no-sidecar-for-jobs (policy no-sidecar-for-jobs)", Exempt: mapExempt}}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeInjectLabelChanged, pod: jobPodOptedOut, inj: withMAP, owner: migrateJob(),
		status: Fail, evidence: `the pod has label sidecar.istio.io/inject="false", which its template does not set (template: job/migrate): it was changed when the pod was created, by an admission mutator; the pod is not injected: MutatingAdmissionPolicyBinding no-sidecar-for-jobs`,
		fix: mapExempt})
}

// A pod whose injection labels are not its template's is put down to the
// mutator that matches it, and a Job is re-created after the exemption;
// with no mutator matching, the template changed since (nothing); with
// mutators unreadable, unknown; labels as the template has them: nothing.
func TestInjectLabelChanged(t *testing.T) {
	cases := []struct {
		name   string
		inj    func(r *injection.InjectionReport)
		pod    func(p *corev1.Pod)
		status string
		want   string
	}{
		{name: "a MAP labels the Job's pod", inj: withMAP, pod: jobPodOptedOut, status: Fail, want: "kubectl get job migrate -n shop -o json"},
		{name: "no mutator matches: the template changed since", inj: func(r *injection.InjectionReport) { withMAP(r); r.OtherMutators = nil }, pod: jobPodOptedOut},
		{name: "mutators unreadable", inj: func(r *injection.InjectionReport) {
			withMAP(r)
			r.OtherMutators, r.OtherMutatorsUnknown = nil, "forbidden: list mutatingadmissionpolicybindings"
		}, pod: jobPodOptedOut, status: Unknown, want: "forbidden"},
		{name: "labels as the template has them", inj: withMAP, pod: func(p *corev1.Pod) {
			jobPodOptedOut(p)
			delete(p.Labels, "sidecar.istio.io/inject")
		}},
	}
	for _, tc := range cases {
		fs := only(Diagnose(checkCase{pod: tc.pod, inj: tc.inj, owner: migrateJob()}.facts()).Findings, CodeInjectLabelChanged)
		if tc.status == "" {
			if len(fs) != 0 {
				t.Errorf("%s: %+v", tc.name, fs)
			}
			continue
		}
		if len(fs) != 1 || fs[0].Status != tc.status || !strings.Contains(fs[0].Evidence+"\n"+fs[0].Fix, tc.want) {
			t.Errorf("%s: want one %s with %q, got %+v", tc.name, tc.status, tc.want, fs)
		}
	}
	t.Logf("%d cases", len(cases))
}
