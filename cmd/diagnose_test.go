package cmd

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// diagnosed are diagnoses of a crash-looping istio-init, a healthy pod, a
// namespace labelled after its pod, a pod whose webhooks could not be read
// and a workload whose pods admission refuses.
func diagnosed() []*diagnose.Diagnosis {
	yes, no := true, false
	healthy := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-7d4b9-x2x8z", CreationTimestamp: mt(0)},
		Spec: corev1.PodSpec{NodeName: "node-1", InitContainers: []corev1.Container{{Name: "istio-init"}, {Name: "istio-proxy", RestartPolicy: ptrTo(corev1.ContainerRestartPolicyAlways)}},
			Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "istio-init", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: mt(1), FinishedAt: mt(2)}}},
				{Name: "istio-proxy", Ready: true, Started: &yes, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: mt(3)}}}},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", Ready: true, Started: &yes, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: mt(5)}}}}},
	}
	broken := healthy.DeepCopy()
	broken.Name = "broken-5c9-abcde"
	broken.Status.Phase = corev1.PodPending
	broken.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "istio-init", RestartCount: 3, Started: &no,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: mt(20), FinishedAt: mt(21)}}}}
	broken.Status.ContainerStatuses = nil
	now := origin.Add(5 * time.Minute)
	report := func(name string, change func(r *injection.InjectionReport)) *injection.InjectionReport {
		r := &injection.InjectionReport{Kind: "Pod", Namespace: "shop", Name: name, Mesh: "istio", Injected: &yes, Expected: &yes, Mismatch: &no,
			Verdict: "Injected by revision default (webhook istio-sidecar-injector/namespace.sidecar-injector.istio.io), as a native sidecar; re-created now, it would be injected the same way."}
		if change != nil {
			change(r)
		}
		return r
	}
	legacy := healthy.DeepCopy()
	legacy.Name, legacy.Namespace = "billing-6f8-k2j4z", "legacy"
	legacy.Spec.InitContainers, legacy.Status.InitContainerStatuses = nil, nil
	facts := []diagnose.Facts{
		{Injection: report(broken.Name, nil), Startup: startup.AnalyzeStartup(startup.StartupFacts{Pod: broken, Now: now,
			Logs: map[string]startup.LogTail{"istio-init": {Previous: []string{"error: iptables-restore: line 5 failed"}}}})},
		{Injection: report(healthy.Name, nil), Startup: startup.AnalyzeStartup(startup.StartupFacts{Pod: healthy, Now: now})},
		{Injection: report(legacy.Name, func(r *injection.InjectionReport) {
			r.Namespace, r.Injected, r.Mismatch = "legacy", &no, &yes
			r.Verdict = "Not injected, but it would be if re-created now, by revision default: it was created before injection was enabled for it."
			r.Fix = "kubectl rollout restart deployment/billing -n legacy"
		}), Startup: startup.AnalyzeStartup(startup.StartupFacts{Pod: legacy, Now: now})},
		{Injection: report("reports-6c7-p9q8r", func(r *injection.InjectionReport) {
			r.Namespace, r.Expected, r.Mismatch = "plain", nil, nil
			r.Verdict = "Injected, but whether it would be if re-created is unknown: the webhooks could not be read."
			r.Needs = []string{"list mutatingwebhookconfigurations.admissionregistration.k8s.io (all namespaces)"}
		}), Startup: startup.AnalyzeStartup(startup.StartupFacts{Pod: func() *corev1.Pod {
			p := healthy.DeepCopy()
			p.Namespace, p.Name = "plain", "reports-6c7-p9q8r"
			return p
		}(), Now: now}),
			CaptureUnknown: "the rules could not be read: not allowed to patch pods/ephemeralcontainers in namespace \"plain\"", CaptureNeeds: []string{"patch pods/ephemeralcontainers in namespace plain"}},
		{Injection: report("refused-at-admission", func(r *injection.InjectionReport) {
			r.Kind, r.Injected, r.CreationBlocked = "Deployment", nil, true
			r.Verdict = `Pods cannot be created: istiod refuses the pod at admission: invalid value "10.0.0.0/33" for annotation traffic.sidecar.istio.io/excludeOutboundIPRanges.`
			r.Fix = "correct or remove the annotation in the pod template: kubectl edit deployment/refused-at-admission -n shop"
		}), NoPod: "admission refuses its pods: none was created"},
	}
	var ds []*diagnose.Diagnosis
	for _, f := range facts {
		ds = append(ds, diagnose.Diagnose(f))
	}
	return ds
}

func ptrTo[T any](v T) *T { return &v }

// One pod's view and the rows of many, piped and at 80 and 120 columns;
// the answer — the failing check and its fix — in the first lines.
func TestDiagnoseGolden(t *testing.T) {
	ds := diagnosed()
	goldenAt(t, "diagnose-broken", func(p *render.Printer) { render.Diagnosis(p, ds[0]) })
	goldenAt(t, "diagnose-healthy", func(p *render.Printer) { render.Diagnosis(p, ds[1]) })
	goldenAt(t, "diagnose-unknown", func(p *render.Printer) { render.Diagnosis(p, ds[3]) })
	sorted := append([]*diagnose.Diagnosis(nil), ds...)
	render.SortDiagnoses(sorted)
	goldenAt(t, "diagnose-rows", func(p *render.Printer) { render.DiagnosisRows(p, sorted, false) })

	checked := 0
	for _, tc := range []struct {
		d          *diagnose.Diagnosis
		first, fix string
	}{
		{ds[0], "init failed", "kubectl logs broken-5c9-abcde -n shop -c istio-init"},
		{ds[2], "injection failed", "kubectl rollout restart deployment/billing"},
		{ds[4], "injection failed", "kubectl edit deployment/refused-at-admission"},
	} {
		for _, w := range widths {
			out := string(renderAt(w, func(p *render.Printer) { render.Diagnosis(p, tc.d) }))
			lines := strings.Split(out, "\n")
			head := strings.Join(lines[:min(len(lines), 7)], "\n")
			// The head's words, as read across wrapped lines.
			words := strings.Join(strings.Fields(strings.ReplaceAll(head, " \\\n", "")), " ")
			if !strings.Contains(strings.SplitN(out, "\n", 2)[0], tc.first) || !strings.Contains(words, strings.Join(strings.Fields(tc.fix), " ")) {
				t.Errorf("width %d: the answer (%q, fix %q) is not on top:\n%s", w, tc.first, tc.fix, out)
			}
			checked++
		}
	}
	// Worst first, grouped by the first failing check.
	var order []string
	for _, d := range sorted {
		order = append(order, d.Status+"/"+d.First+"/"+d.Name)
	}
	want := "fail/injection/billing-6f8-k2j4z fail/injection/refused-at-admission fail/init/broken-5c9-abcde unknown//reports-6c7-p9q8r pass//web-7d4b9-x2x8z"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("order\n got %s\nwant %s", got, want)
	}
	checked++
	t.Logf("%d answers found on top", checked)
}

// The exit: a problem found (4) over an unknown (3); unknown alone 3;
// warnings fail only with --fail-on warning; the counts add up.
func TestDiagnoseExit(t *testing.T) {
	ds := diagnosed()
	run := func(failOn string, ds []*diagnose.Diagnosis, incomplete []string) int {
		ds = append([]*diagnose.Diagnosis(nil), ds...) // finish sorts them
		var out, errOut bytes.Buffer
		o := &DiagnoseOptions{FailOn: failOn, Output: render.JSON}
		o.Out, o.ErrOut = &out, &errOut
		return exitCode(o.finish(ds, true, incomplete), &errOut)
	}
	warned := []*diagnose.Diagnosis{{WorkloadKind: "Pod", Namespace: "shop", Name: "slow", Status: diagnose.Warning, First: diagnose.CheckStart,
		Checks: []diagnose.Check{{Name: diagnose.CheckStart, Status: diagnose.Warning}}}}
	warnedUnknown := []*diagnose.Diagnosis{{WorkloadKind: "Pod", Namespace: "shop", Name: "slow", Status: diagnose.Unknown, First: diagnose.CheckStart,
		Checks: []diagnose.Check{{Name: diagnose.CheckInjection, Status: diagnose.Unknown}, {Name: diagnose.CheckStart, Status: diagnose.Warning}}}}
	cases := []struct {
		name       string
		failOn     string
		ds         []*diagnose.Diagnosis
		incomplete []string
		want       int
	}{
		{"every diagnosis", diagnose.Fail, ds, nil, ExitProblem},
		{"healthy", diagnose.Fail, ds[1:2], nil, ExitOK},
		{"healthy, a fact unread", diagnose.Fail, ds[1:2], []string{"events: forbidden"}, ExitIncomplete},
		{"unknown", diagnose.Fail, ds[3:4], nil, ExitIncomplete},
		{"unknown and failed", diagnose.Fail, ds[2:4], nil, ExitProblem},
		{"a warning", diagnose.Fail, warned, nil, ExitOK},
		{"a warning, --fail-on warning", diagnose.Warning, warned, nil, ExitProblem},
		{"a warning and an unknown, --fail-on warning", diagnose.Warning, warnedUnknown, nil, ExitProblem},
		{"a warning and an unknown", diagnose.Fail, warnedUnknown, nil, ExitIncomplete},
	}
	for _, tc := range cases {
		if got := run(tc.failOn, tc.ds, tc.incomplete); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
	}
	counts := render.CountChecks(ds)
	for _, c := range counts {
		if n := c.Pass + c.Warning + c.Fail + c.Unknown + c.NotChecked; n != len(ds) {
			t.Errorf("check %s counts %d statuses over %d diagnoses", c.Name, n, len(ds))
		}
	}
	if counts[0].First != 2 || counts[0].Fail != 2 || counts[1].First != 1 || counts[3].Unknown != 1 {
		t.Errorf("counts %+v", counts)
	}
	var problem *ProblemError
	o := &DiagnoseOptions{FailOn: diagnose.Fail}
	o.Out, o.ErrOut = &bytes.Buffer{}, &bytes.Buffer{}
	if err := o.finish(diagnosed()[:1], false, nil); !errors.As(err, &problem) || !strings.Contains(err.Error(), "pod shop/broken-5c9-abcde (init)") {
		t.Errorf("a failed check: %v, want a ProblemError naming the pod and its check", err)
	}
}

// A sweep keeps only what it prints of each diagnosis, in arrival order,
// and prints exactly what printing the sorted diagnoses prints: JSON, YAML
// and the table, whatever order they come in.
func TestDiagnoseSweepPrintsAsDiagnoses(t *testing.T) {
	orders := [][]int{{0, 1, 2, 3, 4}, {4, 3, 2, 1, 0}, {2, 0, 4, 1, 3}}
	incomplete := []string{"events: forbidden: the user may not list events (all namespaces)"}
	checked := 0
	for _, format := range []string{render.JSON, render.YAML, ""} {
		var want bytes.Buffer
		o := &DiagnoseOptions{Output: format, FailOn: diagnose.Fail}
		o.Out, o.ErrOut = &want, &bytes.Buffer{}
		ds := diagnosed()
		render.SortDiagnoses(ds)
		if err := o.print(ds, true, incomplete); err != nil {
			t.Fatal(err)
		}
		for _, order := range orders {
			var got bytes.Buffer
			o.Out = &got
			s := newDiagnoseSweep(o)
			fresh := diagnosed()
			for _, i := range order {
				if err := s.add(fresh[i]); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.print(incomplete); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("format %q, order %v:\n--- sweep\n%s\n--- sorted diagnoses\n%s", format, order, got.String(), want.String())
			}
			if s.outcome.nFailed != 3 || !s.outcome.unknown {
				t.Errorf("order %v: %d failed, unknown %v", order, s.outcome.nFailed, s.outcome.unknown)
			}
			checked++
		}
	}
	t.Logf("%d sweeps printed as their diagnoses", checked)
}
