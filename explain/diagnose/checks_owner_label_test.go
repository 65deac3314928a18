package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// notInjected: the pod has no sidecar, and the namespace's webhooks would
// not give it one.
func notInjected(p *corev1.Pod) {
	p.Spec.InitContainers, p.Spec.Containers = nil, p.Spec.Containers[1:]
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d8f9", Controller: &yes}}
	p.Labels = map[string]string{"app": "web", "pod-template-hash": "5d8f9"}
}

func notExpected(r *injection.InjectionReport) {
	no := false
	r.Injected, r.Expected, r.Mismatch, r.Verdict = &no, &no, nil, "Not injected: no webhook selects it"
}

func labelled(kind, name, value, controller string) *WorkloadState {
	return &WorkloadState{Kind: kind, Namespace: "shop", Name: name, Labels: map[string]string{"app": name, InjectLabel: value}, Controller: controller}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeInjectLabelOnWorkload, pod: notInjected, inj: notExpected, owner: labelled("Deployment", "web", "true", ""),
		status: Fail, evidence: "deployment/web has sidecar.istio.io/inject=true on its own metadata.labels",
		fix: `kubectl patch deployment web -n shop --type merge -p '{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"true"}}}}}'`})
}

// The check names the workload and patches where the pods' labels come
// from; a pod that is injected, labelled itself, in ambient mode, or whose
// workload says "false" or nothing, has no finding.
func TestInjectLabelOnWorkload(t *testing.T) {
	cases := []struct {
		name  string
		owner *WorkloadState
		pod   func(p *corev1.Pod)
		inj   func(r *injection.InjectionReport)
		// fix is what the fix contains, "" for no finding.
		evidence, fix string
	}{
		{name: "statefulset", owner: labelled("StatefulSet", "db", "enabled", ""),
			evidence: "statefulset/db has sidecar.istio.io/inject=enabled", fix: `kubectl patch statefulset db -n shop --type merge -p '{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"enabled"}}}}}'`},
		{name: "daemonset", owner: labelled("DaemonSet", "agent", "true", ""), fix: "kubectl patch daemonset agent -n shop"},
		{name: "cronjob", owner: labelled("CronJob", "nightly", "true", ""),
			fix: `kubectl patch cronjob nightly -n shop --type merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"true"}}}}}}}'`},
		{name: "a CronJob's Job: the CronJob is patched", owner: labelled("Job", "nightly-2901", "true", "CronJob/nightly"),
			evidence: "made by cronjob/nightly", fix: `kubectl patch cronjob nightly -n shop --type merge -p '{"spec":{"jobTemplate":{"spec":{"template":`},
		{name: "a Job of its own: re-created", owner: labelled("Job", "migrate", "true", ""), fix: "kubectl replace --force"},
		{name: "injected", owner: labelled("Deployment", "web", "true", ""), pod: func(p *corev1.Pod) {}},
		{name: "the pod has the label", owner: labelled("Deployment", "web", "true", ""), pod: func(p *corev1.Pod) {
			notInjected(p)
			p.Labels[InjectLabel] = "false"
		}},
		{name: "false", owner: labelled("Deployment", "web", "false", "")},
		{name: "no label", owner: &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"}}},
		{name: "istio.io/rev on a StatefulSet's own labels", owner: &WorkloadState{Kind: "StatefulSet", Namespace: "shop", Name: "db", Labels: map[string]string{"app": "db", "istio.io/rev": "canary"}},
			evidence: "statefulset/db has istio.io/rev=canary", fix: `kubectl patch statefulset db -n shop --type merge -p '{"spec":{"template":{"metadata":{"labels":{"istio.io/rev":"canary"}}}}}'`},
		{name: "owner unread"},
		{name: "ambient", owner: labelled("Deployment", "web", "true", ""), inj: func(r *injection.InjectionReport) { notExpected(r); r.Ambient = true }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := checkCase{pod: notInjected, inj: notExpected, owner: tc.owner}
			if tc.pod != nil {
				c.pod = tc.pod
			}
			if tc.inj != nil {
				c.inj = tc.inj
			}
			fs := only(Diagnose(c.facts()).Findings, CodeInjectLabelOnWorkload)
			// The inject label asks for a sidecar: a failure; istio.io/rev
			// alone, a warning.
			want := Fail
			if tc.owner != nil && tc.owner.Labels[InjectLabel] == "" {
				want = Warning
			}
			switch {
			case tc.fix == "" && len(fs) != 0:
				t.Errorf("want no finding, got %+v", fs)
			case tc.fix == "":
			case len(fs) != 1:
				t.Errorf("want one finding, got %+v", fs)
			case fs[0].Status != want || !strings.Contains(fs[0].Evidence, tc.evidence) || !strings.Contains(fs[0].Fix, tc.fix):
				t.Errorf("got %s %q fix %q; want evidence with %q, fix with %q", fs[0].Status, fs[0].Evidence, fs[0].Fix, tc.evidence, tc.fix)
			}
		})
	}
}

// A manifest's workload (-f) with the inject label on its own metadata:
// a failure with the apply-then-patch fix (a Job's: the file to change);
// istio.io/rev alone warns; a template that would be injected, or a label
// "false", has no finding.
func TestManifestLabelOnWorkload(t *testing.T) {
	no, yes := false, true
	cases := []struct {
		name, kind string
		labels     map[string]string
		expected   *bool
		status     string
		fix        string
	}{
		{"deployment", "Deployment", map[string]string{InjectLabel: "true"}, &no, Fail,
			`kubectl apply -f app.yaml -n shop && kubectl patch deployment web -n shop --type merge -p '{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"true"}}}}}'`},
		{"cronjob", "CronJob", map[string]string{InjectLabel: "true"}, &no, Fail, `-p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"labels":`},
		{"job: the file", "Job", map[string]string{InjectLabel: "true"}, &no, Fail, "in app.yaml, put sidecar.istio.io/inject: \"true\" under the Job's spec.template.metadata.labels"},
		{"istio.io/rev: a warning", "StatefulSet", map[string]string{"istio.io/rev": "canary"}, &no, Warning, "kubectl patch statefulset web"},
		{"injected anyway", "Deployment", map[string]string{InjectLabel: "true"}, &yes, "", ""},
		{"false", "Deployment", map[string]string{InjectLabel: "false"}, &no, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := checkCase{inj: func(r *injection.InjectionReport) {
				r.Kind, r.Name, r.Injected, r.Expected, r.Mismatch, r.WorkloadOnlyLabels = tc.kind, "web", nil, tc.expected, nil, tc.labels
			}, files: []string{"app.yaml"}}
			fs := only(Diagnose(c.facts()).Findings, CodeInjectLabelOnWorkload)
			if tc.status == "" {
				if len(fs) != 0 {
					t.Fatalf("fired: %+v", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Status != tc.status || !strings.Contains(fs[0].Fix, tc.fix) {
				t.Fatalf("got %+v, want %s with fix %q", fs, tc.status, tc.fix)
			}
		})
	}
}
