package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// A policy's refusal of a workload's pods, as the dry runs proved it:
// exempting a Job whose pods would get a classic sidecar also gives it a
// native one (else, admitted, it never completes), and any other Job is made
// again (it would wait out its controller's back-off), and a template whose own
// Istio annotations are what the policy refuses is fixed by removing them.
func TestRefusalAnswer(t *testing.T) {
	const exempt = "kubectl patch validatingadmissionpolicybinding no-init --type=json -p '[]'"
	tmpl := func(ann map[string]string) *corev1.PodTemplateSpec {
		t := &corev1.PodTemplateSpec{}
		t.Annotations = ann
		return t
	}
	cases := []struct {
		name             string
		kind, controller string
		sidecar          string
		without          string
		ms               *injection.MeshSide
		ann              map[string]string
		evidence, fix    string
		notIn            string
	}{
		{name: "a Job, classic: exempted, then re-created native", kind: "Job", sidecar: "classic", without: "admitted",
			fix: exempt + "\nkubectl get job migrate -n shop -o json | kubectl patch --local -f - --type=merge"},
		{name: "a CronJob, classic: its jobTemplate made native", kind: "CronJob", sidecar: "classic", without: "admitted",
			fix: `kubectl patch cronjob/migrate -n shop --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/nativeSidecar":"true"}}}}}}}'`},
		{name: "a Job, native: the exemption, then run again at once", kind: "Job", sidecar: "native", without: "admitted", notIn: "nativeSidecar",
			fix: exempt + "\nsleep 3; kubectl get job migrate -n shop -o json | kubectl patch --local -f - --type=merge -p '{\"metadata\":{\"creationTimestamp\":null,\"labels\":{\"batch.kubernetes.io/controller-uid\":null,\"controller-uid\":null}"},
		{name: "a Deployment, classic: the exemption alone", kind: "Deployment", sidecar: "classic", without: "admitted", fix: exempt, notIn: "nativeSidecar"},
		{name: "a Job whose template asks for classic: left so", kind: "Job", sidecar: "classic", without: "admitted",
			ann: map[string]string{"sidecar.istio.io/nativeSidecar": "false"}, fix: exempt, notIn: `"sidecar.istio.io/nativeSidecar":"true"`},
		{name: "its own annotations refused: removed", kind: "StatefulSet", sidecar: "native", without: "refused: denied",
			ms:       &injection.MeshSide{Set: map[string]string{"sidecar.istio.io/proxyCPU": ""}, What: "the template's own Istio annotations (sidecar.istio.io/proxyCPU)"},
			evidence: "it is admitted with a change of the template's own Istio annotations (sidecar.istio.io/proxyCPU): the same template with no sidecar.istio.io/proxyCPU is admitted",
			fix:      `kubectl patch statefulset/migrate -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyCPU":null}}}}}'`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := &WorkloadState{Kind: tc.kind, Namespace: "shop", Name: "migrate", Controller: tc.controller, Template: tmpl(tc.ann)}
			r := &injection.InjectionReport{Sidecar: tc.sidecar, RefusedBy: &injection.Refusal{By: "ValidatingAdmissionPolicy no-init (binding no-init)", Fix: exempt, WithoutSidecar: tc.without, MeshSide: tc.ms}}
			ev, _, fix := refusalAnswer(w, r, "denied request: init containers are not allowed")
			if !strings.Contains(ev, tc.evidence) || !strings.Contains(fix, tc.fix) || tc.notIn != "" && strings.Contains(fix, tc.notIn) {
				t.Errorf("evidence %q\nfix %q\nwant evidence with %q, fix with %q, not %q", ev, fix, tc.evidence, tc.fix, tc.notIn)
			}
		})
	}
}

// A proved mesh-side change on a classic Job: the change, then the native
// sidecar, then the exemption as the other way.
func TestRefusalAnswerMeshSideThenNative(t *testing.T) {
	w := &WorkloadState{Kind: "CronJob", Namespace: "shop", Name: "report", Template: &corev1.PodTemplateSpec{}}
	ms := &injection.MeshSide{Set: map[string]string{"sidecar.istio.io/proxyCPU": "10m"}, What: "the sidecar's CPU request"}
	r := &injection.InjectionReport{Sidecar: "classic", RefusedBy: &injection.Refusal{By: "ValidatingAdmissionPolicy cap", Fix: "kubectl patch validatingadmissionpolicybinding cap", WithoutSidecar: "admitted", MeshSide: ms}}
	_, _, fix := refusalAnswer(w, r, "at most 50m")
	lines := strings.Split(fix, "\n")
	if len(lines) < 3 || !strings.Contains(lines[0], `"sidecar.istio.io/proxyCPU":"10m"`) || !strings.Contains(lines[1], `"sidecar.istio.io/nativeSidecar":"true"`) || !strings.HasPrefix(lines[2], "# or,") {
		t.Errorf("fix %q", fix)
	}
}

// A pod refused for an Istio container twice, under overlapping webhooks,
// is put down to the one not of the selected revision: deleted, then the
// workload restarted; without an extra one known, the answer is the
// refusal's own.
func TestRefusalInjectedTwice(t *testing.T) {
	w := &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "api", Template: &corev1.PodTemplateSpec{}}
	text := `Pod "api-5b-x" is invalid: spec.initContainers[1].name: Duplicate value: "istio-proxy"`
	r := &injection.InjectionReport{OverlapExtra: []string{"istio-sidecar-injector-1-30"}, RefusedBy: &injection.Refusal{By: "the apiserver's validation of the pod", WithoutSidecar: "admitted",
		MeshSide: &injection.MeshSide{Set: map[string]string{"sidecar.istio.io/nativeSidecar": "false"}, What: "the native sidecar"}}}
	ev, mesh, fix := refusalAnswer(w, r, text)
	if !strings.Contains(ev, "the second adds istio-proxy again") || !strings.Contains(mesh, "istio-sidecar-injector-1-30") ||
		!strings.HasPrefix(fix, "kubectl delete mutatingwebhookconfiguration istio-sidecar-injector-1-30   #") || !strings.Contains(fix, "\nsleep 3; kubectl rollout restart deployment/api -n shop") {
		t.Errorf("evidence %q\nmesh %q\nfix %q", ev, mesh, fix)
	}
	r.OverlapExtra = nil
	if _, _, fix := refusalAnswer(w, r, text); strings.Contains(fix, "mutatingwebhookconfiguration") {
		t.Errorf("no extra webhook known: %q", fix)
	}
}

// The apiserver's validation refusing only what the injector adds, with
// nothing proved to make it valid: the opt-out, said to be a choice.
func TestRefusalAnswerValidationOptOut(t *testing.T) {
	w := &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "api", Template: &corev1.PodTemplateSpec{}}
	r := &injection.InjectionReport{RefusedBy: &injection.Refusal{By: "the apiserver's validation of the pod", WithoutSidecar: "admitted"}}
	_, mesh, fix := refusalAnswer(w, r, `Pod "api-1" is invalid: spec.initContainers[0].securityContext.runAsUser: Forbidden`)
	if mesh == "" || !strings.HasPrefix(fix, `kubectl patch deployment/api -n shop --type=merge -p '{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"false"}}}}}'`) || !strings.Contains(fix, "a choice") {
		t.Errorf("mesh %q\nfix %q", mesh, fix)
	}
	r.RefusedBy.WithoutSidecar = "refused"
	if _, _, fix := refusalAnswer(w, r, "x"); strings.Contains(fix, "inject") {
		t.Errorf("refused without the sidecar too: %q", fix)
	}
}

// A webhook's matchCondition failing on the pod is the webhook's: its fix,
// no dry-run proof about the injected parts.
func TestRefusalAnswerCondition(t *testing.T) {
	w := &WorkloadState{Kind: "StatefulSet", Namespace: "db", Name: "db", Template: &corev1.PodTemplateSpec{}}
	r := &injection.InjectionReport{RefusedBy: &injection.Refusal{By: "MutatingWebhookConfiguration tag-teal (webhook w)'s matchCondition skip", Condition: true, WithoutSidecar: "admitted",
		Fix: "kubectl patch mutatingwebhookconfiguration tag-teal --type=json -p '[]'"}}
	ev, mesh, fix := refusalAnswer(w, r, "expression 'x' resulted in error: no such key: k")
	if !strings.Contains(ev, "cannot evaluate on this pod") || strings.Contains(ev, "without the sidecar") || !strings.Contains(mesh, "matchCondition") || fix != r.RefusedBy.Fix {
		t.Errorf("evidence %q\nmesh %q\nfix %q", ev, mesh, fix)
	}
}
