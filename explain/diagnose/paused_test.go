package diagnose

import (
	"strings"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// A paused Deployment refuses "kubectl rollout restart": the fix resumes
// it first, and says what resuming also does; one not paused is restarted
// as before.
func TestRestartOfPausedDeploymentResumesFirst(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		name   string
		paused bool
		want   []string
		not    []string
	}{
		{name: "paused", paused: true, want: []string{
			"kubectl rollout resume deployment/web -n shop   # it is paused",
			"any template change made while paused\nkubectl rollout restart deployment/web -n shop"}},
		{name: "not paused", want: []string{"kubectl rollout restart deployment/web -n shop"}, not: []string{"resume"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Diagnose(Facts{
				Injection: injected(func(r *injection.InjectionReport) {
					r.Injected, r.Mismatch, r.Fix = &no, &yes, "kubectl rollout restart deployment/web -n shop"
				}),
				Pod:   pod(nil),
				Owner: &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "web", Paused: c.paused},
			})
			if d.First == "" {
				t.Fatalf("no first failing check: %+v", d.Checks)
			}
			checked := 0
			for _, fix := range []string{d.Fix, d.Findings[0].Fix} {
				for _, w := range c.want {
					checked++
					if !strings.Contains(fix, w) {
						t.Errorf("fix %q lacks %q", fix, w)
					}
				}
				for _, n := range c.not {
					checked++
					if strings.Contains(fix, n) {
						t.Errorf("fix %q has %q", fix, n)
					}
				}
			}
			t.Logf("%d assertions on the fix", checked)
		})
	}
}
