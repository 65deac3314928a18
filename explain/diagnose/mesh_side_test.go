package diagnose

import (
	"strings"
	"testing"
)

// A policy proved to refuse what the injector adds gets, beside its
// exemption, the template change that makes the injected parts comply
// where its words say which; a CronJob's Job patches its CronJob.
func TestMeshSideOfRefusal(t *testing.T) {
	dep := &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "api"}
	cronJob := &WorkloadState{Kind: "Job", Namespace: "shop", Name: "sync-1", Controller: "CronJob/sync"}
	for _, tc := range []struct {
		w          *WorkloadState
		text, want string
	}{
		{dep, "denied request: every container must set a seccompProfile", `kubectl patch deployment/api -n shop --type=merge -p '{"spec":{"template":{"spec":{"securityContext":{"seccompProfile":{"type":"RuntimeDefault"}}}}}}'`},
		{cronJob, "denied request: init containers may not set restartPolicy Always", `kubectl patch cronjob/sync -n shop --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/nativeSidecar":"false"}}}}}}}'`},
		{dep, "denied request: every emptyDir volume must set sizeLimit", "# or, on the mesh's side"},
	} {
		if got := meshSideOfRefusal(tc.w, tc.text); !strings.Contains(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.text, got, tc.want)
		}
	}
}
