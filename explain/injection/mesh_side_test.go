package injection

import (
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// The candidates change one part of the injection each, the least change
// first, and never one the template has already.
func TestMeshSideCandidates(t *testing.T) {
	cases := []struct {
		name  string
		ann   map[string]string
		first map[string]string
		n     int
		none  string // a key no candidate sets to what it is
	}{
		{"plain template", nil, map[string]string{annMergeMetrics: "false"}, 6, ""},
		{"merging off already", map[string]string{annMergeMetrics: "false"},
			map[string]string{annProxyCPU: "100m", annProxyMem: "128Mi", annProxyCPULimit: "", annProxyMemLimit: ""}, 4, annMergeMetrics},
		{"requests only already, native off", map[string]string{annMergeMetrics: "false", annProxyCPU: "10m", annProxyMem: "32Mi", istio.AnnotationNativeSidecar: "false"},
			map[string]string{annProxyCPU: "10m", annProxyMem: "32Mi", annProxyCPULimit: "10m", annProxyMemLimit: "32Mi"}, 2, annMergeMetrics},
	}
	checks := 0
	for _, tc := range cases {
		got := MeshSideCandidates(tc.ann)
		checks++
		if len(got) != tc.n {
			t.Errorf("%s: %d candidates, want %d: %+v", tc.name, len(got), tc.n, got)
			continue
		}
		checks++
		for k, v := range tc.first {
			if got[0].Set[k] != v || len(got[0].Set) != len(tc.first) {
				t.Errorf("%s: first candidate %v, want %v", tc.name, got[0].Set, tc.first)
				break
			}
		}
		for _, c := range got {
			checks++
			if c.What == "" {
				t.Errorf("%s: a candidate says not what it changes: %v", tc.name, c.Set)
			}
			if v, ok := c.Set[tc.none]; tc.none != "" && ok && v == tc.ann[tc.none] {
				t.Errorf("%s: a candidate sets %s to what it is", tc.name, tc.none)
			}
		}
		last := got[len(got)-1]
		if tc.ann[istio.AnnotationNativeSidecar] == "false" {
			checks++
			if last.Set[istio.AnnotationNativeSidecar] != "true" {
				t.Errorf("%s: a classic template's flip is not to native: %v", tc.name, last.Set)
			}
		}
	}
	t.Logf("%d checks", checks)
}
