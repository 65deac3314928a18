package diagnose

import (
	"strings"
	"testing"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// A manifest refused by PodSecurity whose file declares the namespace with
// the label the fix changes: the fix applies the namespace from the file
// with the new value, then the rest without it; a file that declares no
// such label keeps the plain apply.
func TestFileRelabel(t *testing.T) {
	psa := func(labels map[string]string) func(r *injection.InjectionReport) {
		return func(r *injection.InjectionReport) {
			r.CreationBlocked, r.BlockedBy = true, injection.RefusalOf(`pods "web-1" is forbidden: violates PodSecurity "restricted:latest": non-default capabilities (container "istio-init" must not include "NET_ADMIN", "NET_RAW" in securityContext.capabilities.add)`)
			r.Verdict, r.Fix = "Pods cannot be created: violates PodSecurity", "kubectl label namespace shop pod-security.kubernetes.io/enforce=privileged --overwrite   # istio-init needs NET_ADMIN"
			r.FileNamespaceLabels = labels
		}
	}
	cases := []struct {
		name   string
		labels map[string]string
		want   []string
	}{
		{"the file says restricted", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}, []string{
			"kubectl apply -f app.yaml -l 'pod-security.kubernetes.io/enforce=restricted' --dry-run=client -o yaml | kubectl label --local -f - pod-security.kubernetes.io/enforce=privileged --overwrite -o yaml | kubectl apply -f -",
			"sleep 3; kubectl apply -f app.yaml -n shop -l 'pod-security.kubernetes.io/enforce!=restricted'"}},
		{"the file declares the namespace, not the label", map[string]string{"team": "a"}, []string{
			"kubectl label namespace shop pod-security.kubernetes.io/enforce=privileged --overwrite", "sleep 3; kubectl apply -f app.yaml -n shop"}},
		{"no namespace in the file", nil, []string{
			"kubectl label namespace shop pod-security.kubernetes.io/enforce=privileged --overwrite", "sleep 3; kubectl apply -f app.yaml -n shop"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := checkCase{inj: psa(tc.labels), files: []string{"app.yaml"}}
			fs := only(Diagnose(c.facts()).Findings, CodePodSecurity)
			if len(fs) != 1 {
				t.Fatalf("findings %+v", Diagnose(c.facts()).Findings)
			}
			lines := strings.Split(fs[0].Fix, "\n")
			if len(lines) < len(tc.want) {
				t.Fatalf("fix %q", fs[0].Fix)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("line %d: %q, want it to start %q", i, lines[i], w)
				}
			}
		})
	}
}

// A manifest's pod that admission admits with its annotations changed: the
// file is applied with them (a removal as KEY-, a value quoted).
func TestFileMeshSideFix(t *testing.T) {
	r := &injection.InjectionReport{Namespace: "shop", Verified: &injection.Verification{MeshSide: &injection.MeshSide{
		Set: map[string]string{"sidecar.istio.io/nativeSidecar": "true", "sidecar.istio.io/proxyCPU": ""}}}}
	got := fileMeshSideFix([]string{"api.yaml"}, r)
	want := "kubectl annotate --local -f api.yaml 'sidecar.istio.io/nativeSidecar=true' sidecar.istio.io/proxyCPU- --overwrite -o json | kubectl apply -n shop -f -"
	if !strings.HasPrefix(got, want) {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := fileMeshSideFix([]string{"api.yaml"}, &injection.InjectionReport{}); got != "" {
		t.Errorf("nothing proved: %q", got)
	}
}
