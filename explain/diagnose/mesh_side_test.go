package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A policy proved to refuse what the injector adds gets, beside its
// exemption, the template change that makes the injected parts comply
// where its words say which; a CronJob's Job patches its CronJob.
func TestMeshSideOfRefusal(t *testing.T) {
	dep := &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "api"}
	lean := &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "api", Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"sidecar.istio.io/proxyCPU": "10m"}}}}
	cronJob := &WorkloadState{Kind: "Job", Namespace: "shop", Name: "sync-1", Controller: "CronJob/sync"}
	for _, tc := range []struct {
		w          *WorkloadState
		text, want string
	}{
		{dep, "denied request: every container must set a seccompProfile", `kubectl patch deployment/api -n shop --type=merge -p '{"spec":{"template":{"spec":{"securityContext":{"seccompProfile":{"type":"RuntimeDefault"}}}}}}'`},
		{cronJob, "denied request: init containers may not set restartPolicy Always", `kubectl patch cronjob/sync -n shop --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/nativeSidecar":"false"}}}}}}}'`},
		{dep, "denied request: every emptyDir volume must set sizeLimit", "# or, on the mesh's side"},
		{dep, "denied request: min-cpu-request: every container must request at least 20m CPU", `kubectl patch deployment/api -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyCPU":"20m"}}}}}'`},
		{dep, "denied request: every container must request at least 64Mi of memory", `"sidecar.istio.io/proxyMemory":"64Mi"`},
		{lean, "denied request: pods must be QoS Guaranteed (requests equal to limits)", `kubectl patch deployment/api -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyCPU":"10m","sidecar.istio.io/proxyCPULimit":"10m","sidecar.istio.io/proxyMemory":"128Mi","sidecar.istio.io/proxyMemoryLimit":"128Mi"}}}}}'`},
	} {
		if got := meshSideOfRefusal(tc.w, tc.text); !strings.Contains(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.text, got, tc.want)
		}
	}
}
