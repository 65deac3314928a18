package diagnose

import (
	"strings"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// The proved mesh-side change is the fix, as the command of the object
// whose template makes the pods; the exemption follows, commented out, so
// that a paste runs the mesh's knob only.
func TestMeshSideFix(t *testing.T) {
	ms := &injection.MeshSide{Set: map[string]string{"prometheus.istio.io/merge-metrics": "false", "sidecar.istio.io/proxyCPULimit": ""}, What: "the scrape annotations"}
	exempt := "kubectl patch validatingadmissionpolicybinding b --type=json -p '[]'\nsleep 3; kubectl rollout restart deployment/web -n shop"
	cases := []struct {
		w    WorkloadState
		want string
	}{
		{WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "web"}, `kubectl patch deployment/web -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"prometheus.istio.io/merge-metrics":"false","sidecar.istio.io/proxyCPULimit":null}}}}}'`},
		{WorkloadState{Kind: "Job", Namespace: "shop", Name: "nightly-1", Controller: "CronJob/nightly"}, `kubectl patch cronjob/nightly -n shop --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"prometheus.istio.io/merge-metrics":"false","sidecar.istio.io/proxyCPULimit":null}}}}}}}'`},
		{WorkloadState{Kind: "Job", Namespace: "shop", Name: "once"}, `kubectl get job once -n shop -o json | kubectl patch --local -f -`},
	}
	checks := 0
	for _, tc := range cases {
		fix := MeshSideFix(&tc.w, ms, exempt)
		lines := strings.Split(fix, "\n")
		checks++
		if !strings.HasPrefix(lines[0], tc.want) {
			t.Errorf("%s: first line %q, want it to start %q", tc.w.Kind, lines[0], tc.want)
		}
		var commands int
		for _, l := range lines {
			if !strings.HasPrefix(l, "#") {
				commands++
			}
		}
		checks++
		want := 1
		if tc.w.Controller != "" {
			want = 2 // the stuck run goes too
		}
		if commands != want {
			t.Errorf("%s: %d command lines, want %d (the exemption commented out): %s", tc.w.Kind, commands, want, fix)
		}
		checks++
		if !strings.Contains(fix, "# or, keeping the template and exempting it") || !strings.Contains(fix, "#   sleep 3") {
			t.Errorf("%s: the exemption is not the commented alternative: %s", tc.w.Kind, fix)
		}
	}
	checks++
	if got := ProvedMeshSide(ms); !strings.Contains(got, `prometheus.istio.io/merge-metrics="false" and no sidecar.istio.io/proxyCPULimit`) {
		t.Errorf("the proof's words: %s", got)
	}
	t.Logf("%d checks", checks)
}
