package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// optedOutByLabel: the injection's answer for a pod its template opts out, with
// the fix that injects it.
func optedOutByLabel(r *injection.InjectionReport) {
	no := false
	r.Injected, r.Expected, r.Mismatch = &no, &no, nil
	r.Verdict = `Not injected, and it would not be if re-created: pod label sidecar.istio.io/inject="false" excludes it from every Istio webhook.`
	r.Fix = `kubectl patch deployment web -n shop --type merge -p '{"spec": {"template": {"metadata": {"labels": {"sidecar.istio.io/inject": null}}}}}'`
}

// waitsForProxy: a Job's pod without a sidecar whose command waits for the
// proxy's readiness and then asks it to quit, running since second 3.
func waitsForProxy(p *corev1.Pod) {
	notInjected(p)
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "report", Controller: &yes}}
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Spec.Containers[0].Command = []string{"sh", "-c", "until wget -q -O- http://127.0.0.1:15021/healthz/ready; do sleep 2; done; run; wget -q -O- --post-data='' http://127.0.0.1:15020/quitquitquit"}
	p.Status.ContainerStatuses = p.Status.ContainerStatuses[1:]
}

// quitFailed: the Job's pod's last step, a POST to the proxy's
// /quitquitquit under sh -e, was refused: the run failed.
func quitFailed(p *corev1.Pod) {
	waitsForProxy(p)
	p.Spec.Containers[0].Command = []string{"sh", "-ec", "run; wget -q -O- --post-data='' http://127.0.0.1:15020/quitquitquit"}
	p.Status.Phase = corev1.PodFailed
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: at(3), FinishedAt: at(4)}}
	p.Status.ContainerStatuses[0].Ready = false
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeSidecarAbsent, pod: waitsForProxy, inj: optedOutByLabel, now: 5 * time.Minute, status: Fail,
		evidence: "app's command calls 127.0.0.1:15021/healthz/ready; app's command calls 127.0.0.1:15020/quitquitquit: ports of Istio's proxy in its own pod, but it has no sidecar (no injector took it",
		fix:      `-p '{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"true"}}}}}' -o json | kubectl replace --force -f -`})
}

// The calls to a missing proxy fail the pod when it shows them failing: a
// wait that never ends, a quit call that fails the run, a probe that keeps
// the pod unready; a pod that tolerates them, an injected pod, a pod whose
// app serves the port itself, and a run still within its first minute
// have no finding.
func TestSidecarAbsent(t *testing.T) {
	probed := func(p *corev1.Pod) {
		notInjected(p)
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz/ready", Port: intstr.FromInt32(15021)}}}
		p.Status.ContainerStatuses = p.Status.ContainerStatuses[1:]
		p.Status.ContainerStatuses[0].Ready = false
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", LastTransitionTime: at(3)}}
	}
	checks := 0
	for _, tc := range []struct {
		name     string
		pod      func(p *corev1.Pod)
		logs     map[string]startup.LogTail
		now      time.Duration
		status   string // "" for no finding
		evidence string
	}{
		{"a Job that waits for ever", waitsForProxy, nil, 5 * time.Minute, Fail, "app still runs after 4m57s, waiting on a proxy that never comes"},
		{"the same within its first minute", waitsForProxy, nil, 50 * time.Second, "", ""},
		{"a run the quit call failed", quitFailed, map[string]startup.LogTail{"app": {Current: []string{"exported 42 rows", "wget: can't connect to remote host (127.0.0.1): Connection refused"}}},
			5 * time.Minute, Fail, "its log: wget: can't connect to remote host (127.0.0.1): Connection refused"},
		{"a run that tolerates it", func(p *corev1.Pod) {
			quitFailed(p)
			p.Status.Phase = corev1.PodSucceeded
			p.Status.ContainerStatuses[0].State.Terminated.ExitCode = 0
		}, nil, 5 * time.Minute, "", ""},
		{"a probe on the health port", probed, nil, 5 * time.Minute, Fail, "readinessProbe calls port 15021 (the proxy's health checks)"},
		{"the app serves 15021 itself", func(p *corev1.Pod) {
			probed(p)
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 15021}}
		}, nil, 5 * time.Minute, "", ""},
		{"an injected pod that waits for its proxy", func(p *corev1.Pod) {
			p.Spec.Containers[1].Command = []string{"sh", "-c", "until wget -q http://127.0.0.1:15021/healthz/ready; do sleep 1; done"}
		}, nil, 5 * time.Minute, "", ""},
	} {
		inj := optedOutByLabel
		if tc.name == "an injected pod that waits for its proxy" {
			inj = nil
		}
		d := Diagnose(checkCase{pod: tc.pod, inj: inj, logs: tc.logs, now: tc.now}.facts())
		var got *Finding
		for i := range d.Findings {
			if d.Findings[i].Code == CodeSidecarAbsent {
				got = &d.Findings[i]
			}
		}
		checks++
		switch {
		case tc.status == "" && got != nil:
			t.Errorf("%s: %s %s, want no finding", tc.name, got.Status, got.Evidence)
		case tc.status != "" && got == nil:
			t.Errorf("%s: no %s finding (findings %+v)", tc.name, CodeSidecarAbsent, d.Findings)
		case got != nil:
			checks += 3
			if got.Status != tc.status || !strings.Contains(got.Evidence, tc.evidence) {
				t.Errorf("%s: %s %q, want %s with %q", tc.name, got.Status, got.Evidence, tc.status, tc.evidence)
			}
			if !strings.Contains(got.Fix, `{"metadata":{"labels":{"sidecar.istio.io/inject":"true"}}}`) || !strings.Contains(got.Fix, "a choice: this injects the pod") ||
				!strings.Contains(got.Fix, "\n# or, if it is meant to run outside the mesh: remove the calls to the proxy from app's") {
				t.Errorf("%s: the fix names both choices, the template labelled for injection first: %s", tc.name, got.Fix)
			}
			// It explains the pod's symptom: the first finding is it, or the
			// symptom with its evidence and fix.
			if first := d.Findings[0]; !strings.Contains(first.Evidence, got.Evidence) || first.Fix != got.Fix {
				t.Errorf("%s: the first finding (%s) does not carry the cause: %s", tc.name, first.Code, first.Evidence)
			}
		}
	}
	t.Logf("%d checks", checks)
}

// Where the pod's template is: a Job re-created, a CronJob's job template
// patched and its stuck run deleted; a namespace whose istio-injection
// label keeps every webhook away gets the injection's own fix.
func TestSidecarAbsentFixWhereTheTemplateIs(t *testing.T) {
	blocked := func(r *injection.InjectionReport) {
		optedOutByLabel(r)
		r.Factors = []injection.Factor{{Factor: "namespace label istio-injection", Effect: injection.EffectBlocks}}
		r.Fix = "kubectl label namespace shop istio-injection=enabled --overwrite"
	}
	checks := 0
	for _, tc := range []struct {
		name  string
		inj   func(r *injection.InjectionReport)
		owner *WorkloadState
		want  []string
	}{
		{"a Job", optedOutByLabel, nil, []string{"kubectl get job report -n shop -o json | ", `"sidecar.istio.io/inject":"true"`, "| kubectl replace --force -f -"}},
		{"a CronJob's Job", optedOutByLabel, &WorkloadState{Kind: "Job", Namespace: "shop", Name: "report", Controller: "CronJob/nightly"},
			[]string{"kubectl patch cronjob/nightly -n shop --type=strategic -p '{\"spec\":{\"jobTemplate\":{\"spec\":{\"template\":{\"metadata\":{\"labels\":{\"sidecar.istio.io/inject\":\"true\"}}}}}}}'", "\nkubectl delete job report -n shop --ignore-not-found"}},
		{"a namespace that keeps webhooks away", blocked, nil, []string{"kubectl label namespace shop istio-injection=enabled --overwrite   # a choice"}},
	} {
		d := Diagnose(checkCase{pod: quitFailed, inj: tc.inj, owner: tc.owner, now: 5 * time.Minute}.facts())
		var fix string
		for _, f := range d.Findings {
			if f.Code == CodeSidecarAbsent {
				fix = f.Fix
			}
		}
		for _, want := range tc.want {
			checks++
			if !strings.Contains(fix, want) {
				t.Errorf("%s: fix %q, want %q in it", tc.name, fix, want)
			}
		}
	}
	t.Logf("%d checks", checks)
}
