package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

func init() {
	windows := &corev1.PodTemplateSpec{}
	windows.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
	checkCases = append(checkCases, checkCase{code: CodeWindowsPod, status: Fail,
		workload: &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "web", Desired: 1, Since: t0, Template: windows,
			Conditions: []string{`ReplicaFailure (FailedCreate): Pod "web-1" is invalid: [spec.initContainers[0].securityContext.capabilities: Forbidden: cannot be set for a windows pod]`}},
		evidence: "deployment/web's pod template sets spec.os.name: windows, and Istio's injector selects it",
		fix:      `kubectl patch deployment/web -n shop --type=merge -p '{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"false"}}}}}'`})
}

// A Windows template the injector selects fails, fixed by the opt-out on
// its template (a Deployment patched, a Job made again, a manifest
// edited); a Linux one, or one not to be injected, says nothing (red team
// round 30's 01).
func TestWindowsPod(t *testing.T) {
	checks := 0
	yes, no := true, false
	tmpl := func(os corev1.OSName) *corev1.PodTemplateSpec {
		t := &corev1.PodTemplateSpec{}
		if os != "" {
			t.Spec.OS = &corev1.PodOS{Name: os}
		}
		return t
	}
	for _, tc := range []struct {
		name     string
		kind     string
		os       corev1.OSName
		expected *bool
		files    []string
		fix      string // "" none
	}{
		{"deployment", "Deployment", corev1.Windows, &yes, nil, `kubectl patch deployment/winsvc -n w --type=merge -p '{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"false"}}}}}'`},
		{"job", "Job", corev1.Windows, &yes, nil, "kubectl get job winsvc -n w -o json | kubectl patch --local -f -"},
		{"manifest", "Deployment", corev1.Windows, &yes, []string{"app.yaml"}, `in app.yaml, put sidecar.istio.io/inject: "false" under deployment/winsvc's pod template`},
		{"linux", "Deployment", corev1.Linux, &yes, nil, ""},
		{"no os", "Deployment", "", &yes, nil, ""},
		{"opted out", "Deployment", corev1.Windows, &no, nil, ""},
		{"unknown", "Deployment", corev1.Windows, nil, nil, ""},
	} {
		r := &injection.InjectionReport{Kind: tc.kind, Name: "winsvc", Namespace: "w", Expected: tc.expected}
		in := &Input{Facts: Facts{Injection: r, Files: tc.files}}
		if tc.files == nil {
			in.Workload = &WorkloadState{Kind: tc.kind, Name: "winsvc", Namespace: "w", Desired: 1, Template: tmpl(tc.os)}
		} else {
			r.Template = tmpl(tc.os)
		}
		fs := windowsPod(in)
		checks++
		switch {
		case tc.fix == "" && len(fs) != 0:
			t.Errorf("%s: %+v, want nothing", tc.name, fs)
		case tc.fix != "" && (len(fs) != 1 || fs[0].Status != Fail || !strings.HasPrefix(fs[0].Fix, tc.fix) || !strings.Contains(fs[0].Evidence, "Linux only")):
			t.Errorf("%s: %+v, want a failure fixed by %q", tc.name, fs, tc.fix)
		}
	}
	t.Logf("%d checks", checks)
}
