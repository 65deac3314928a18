package injection

import (
	"strings"
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
		{"plain template", nil, map[string]string{annMergeMetrics: "false"}, 9, ""},
		{"merging off already", map[string]string{annMergeMetrics: "false"},
			map[string]string{annProxyCPU: "100m", annProxyMem: "128Mi", annProxyCPULimit: "", annProxyMemLimit: ""}, 7, annMergeMetrics},
		{"requests only already, native off", map[string]string{annMergeMetrics: "false", annProxyCPU: "10m", annProxyMem: "32Mi", istio.AnnotationNativeSidecar: "false"},
			map[string]string{annProxyCPU: "10m", annProxyMem: "32Mi", annProxyCPULimit: "10m", annProxyMemLimit: "32Mi"}, 3, annMergeMetrics},
		// What gives istio-proxy privileges, asked for by the template:
		// taken away first.
		{"TPROXY", map[string]string{istio.AnnotationInterceptionMode: "TPROXY"}, map[string]string{istio.AnnotationInterceptionMode: ""}, 10, ""},
		{"capNetBindService", map[string]string{annCapNetBind: "true"}, map[string]string{annCapNetBind: ""}, 10, ""},
		{"trace logging in the pod's config", map[string]string{istio.AnnotationProxyConfig: "proxyMetadata:\n  IPTABLES_TRACE_LOGGING: \"true\"\n  OTHER: x\n"},
			map[string]string{istio.AnnotationProxyConfig: `{"proxyMetadata":{"IPTABLES_TRACE_LOGGING":"false","OTHER":"x"}}`}, 9, ""},
	}
	checks := 0
	// A template whose sidecar requests are above the least: the lowered
	// ones are asked too (a policy capping a container's request).
	lowered := 0
	for _, c := range MeshSideCandidates(map[string]string{annProxyCPU: "200m"}) {
		if c.Set[annProxyCPU] == "10m" && len(c.Set) == 1 || c.Set[annProxyMem] == "40Mi" && len(c.Set) == 1 {
			lowered++
		}
	}
	checks++
	if lowered != 2 {
		t.Errorf("%d lowered-request candidates, want 2 (CPU, memory)", lowered)
	}
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
			last = got[len(got)-2] // the trace logging's override is last of all
			checks++
			if last.Set[istio.AnnotationNativeSidecar] != "true" {
				t.Errorf("%s: a classic template's flip is not to native: %v", tc.name, last.Set)
			}
		}
	}
	t.Logf("%d checks", checks)
}

// A refusal of privileges on a template that gives istio-proxy some (TPROXY,
// capNetBindService, trace logging) is put down to istio-proxy and the
// setting, even where the policy's message names istio-init (its
// exemption); on a template without them, the message decides as before.
func TestProxyPrivilegePart(t *testing.T) {
	msg := "NET_ADMIN/NET_RAW may only be added to the istio-init container"
	cases := []struct {
		ann  map[string]string
		msg  string
		want string
	}{
		{map[string]string{istio.AnnotationInterceptionMode: "TPROXY"}, msg, "for sidecar.istio.io/interceptionMode=TPROXY"},
		{map[string]string{annCapNetBind: "true"}, "containers must run as non-root (istio-init exempted)", "for sidecar.istio.io/capNetBindService=true"},
		{map[string]string{istio.AnnotationProxyConfig: `{"proxyMetadata":{"IPTABLES_TRACE_LOGGING":"true"}}`}, "privileged containers are not allowed", "IPTABLES_TRACE_LOGGING"},
		{nil, msg, "container istio-init, which the injector adds"},
		{map[string]string{istio.AnnotationInterceptionMode: "TPROXY"}, "image registry not allowed", ""},
		// "root" as a part of another word is not about privileges.
		{map[string]string{istio.AnnotationInterceptionMode: "TPROXY"}, "every container must set readOnlyRootFilesystem", ""},
		{map[string]string{istio.AnnotationInterceptionMode: "TPROXY"}, "containers must not run as root", "for sidecar.istio.io/interceptionMode=TPROXY"},
	}
	for _, tc := range cases {
		got := injectedPart(tc.msg, &Workload{Annotations: tc.ann})
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%v, %q: %q, want %q", tc.ann, tc.msg, got, tc.want)
		}
	}
	t.Logf("%d checks", len(cases))
}

// A template's own Istio annotations are taken away one at a time (at most
// four), then all together; other annotations are never touched.
func TestOwnSettingsCandidates(t *testing.T) {
	got := OwnSettingsCandidates(map[string]string{annProxyCPU: "10m", annProxyMem: "32Mi", "example.com/owner": "team-a"})
	if len(got) != 3 || len(got[0].Set) != 1 || len(got[2].Set) != 2 {
		t.Fatalf("candidates %+v, want each of the two, then both", got)
	}
	for _, c := range got {
		if _, ok := c.Set["example.com/owner"]; ok || c.What == "" {
			t.Errorf("candidate %+v", c)
		}
	}
	if n := len(OwnSettingsCandidates(map[string]string{"example.com/owner": "team-a"})); n != 0 {
		t.Errorf("no Istio annotation: %d candidates", n)
	}
}

// A LimitRange's minimum names the change: the sidecar's requests raised
// to it, cpu and memory alike; any other refusal has none.
func TestMinimumCandidates(t *testing.T) {
	got := MinimumCandidates(`pods "a" is forbidden: [minimum cpu usage per Container is 150m, but request is 100m, minimum memory usage per Container is 256Mi, but request is 128Mi]`)
	if len(got) != 1 || got[0].Set[annProxyCPU] != "150m" || got[0].Set[annProxyMem] != "256Mi" || !strings.Contains(got[0].What, "cpu 150m, memory 256Mi") {
		t.Errorf("got %+v", got)
	}
	if got := MinimumCandidates("maximum cpu usage per Container is 1, but limit is 2"); got != nil {
		t.Errorf("a maximum: %+v", got)
	}
}
