package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// A status port of 0 makes the injector rewrite the app's probes to port
// 0, which the apiserver refuses: the mesh's cause, fixed by removing the
// annotation; the same refusal without it is not put on the mesh.
func TestStatusPortZeroRefusal(t *testing.T) {
	const ev = `FailedCreate (16×): Create Pod search-0 in StatefulSet search failed error: Pod "search-0" is invalid: spec.containers[0].readinessProbe.httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive`
	for _, tc := range []struct {
		ann  map[string]string
		want string
	}{
		{map[string]string{"status.sidecar.istio.io/port": "0"}, `kubectl patch statefulset/search -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/status.sidecar.istio.io~1port"}]'`},
		{nil, "kubectl describe statefulset/search"},
	} {
		tmpl := &corev1.PodTemplateSpec{}
		tmpl.Annotations = tc.ann
		w := &WorkloadState{Kind: "StatefulSet", Namespace: "shop", Name: "search", Desired: 1, Events: []string{ev}, Template: tmpl, Since: time.Unix(0, 0), Now: time.Unix(3600, 0)}
		fs := workloadShort(&Input{Facts: Facts{Workload: w}})
		if len(fs) != 1 || !strings.HasPrefix(fs[0].Fix, tc.want) || (tc.ann != nil) != (fs[0].Mesh != "") {
			t.Errorf("%v: %+v", tc.ann, fs)
		}
	}
}
