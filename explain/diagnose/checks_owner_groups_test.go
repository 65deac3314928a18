package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// groupsExcluded: a StatefulSet's pod whose proxy.istio.io/config lets
// group 0 out, its app setting no group (red team round 20's 07).
func groupsExcluded(p *corev1.Pod) {
	yes := true
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "reconciler", Controller: &yes}}
	p.Annotations = map[string]string{"proxy.istio.io/config": `{"proxyMetadata": {"ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE": "0"}}`}
	p.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: "ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE", Value: "0"}}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeOwnerGroupBypass, pod: groupsExcluded, status: Warning,
		evidence: `istio-init's environment sets ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE="0" (these groups' traffic is let out) (from proxyMetadata): container app runs as group 0 (no runAsGroup in the spec: its image's group, root's unless the image's user has another), which that leaves out`,
		fix:      `kubectl patch statefulset/reconciler -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"proxy.istio.io/config":null}}}}}'`})
}

// Let out by group, captured only by group, by name; the app's group from
// its spec or assumed; the default filter and a captured group pass.
func TestOwnerGroupBypass(t *testing.T) {
	gid := func(n int64) *int64 { return &n }
	env := func(name, value string) func(p *corev1.Pod) {
		return func(p *corev1.Pod) { p.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: name, Value: value}} }
	}
	withGroup := func(change func(p *corev1.Pod), g int64) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			change(p)
			p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsGroup: gid(g)}
		}
	}
	checks := 0
	for _, tc := range []struct {
		name   string
		pod    func(p *corev1.Pod)
		status string
	}{
		{"exclude 0, group not set", groupsExcluded, Warning},
		{"exclude 0, group 0 set", withGroup(groupsExcluded, 0), Fail},
		{"exclude 0, group 1000", withGroup(groupsExcluded, 1000), ""},
		{"exclude root by name, group 0", withGroup(env("ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE", "root"), 0), Fail},
		{"exclude a name, group 1000", withGroup(env("ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE", "ftp"), 1000), ""},
		{"include 2000, group 1000", withGroup(env("ISTIO_OUTBOUND_OWNER_GROUPS", "2000"), 1000), Fail},
		{"include 1000, group 1000", withGroup(env("ISTIO_OUTBOUND_OWNER_GROUPS", "2000,1000"), 1000), ""},
		{"include a name, group 1000: unknown", withGroup(env("ISTIO_OUTBOUND_OWNER_GROUPS", "java"), 1000), ""},
		{"include *, exclude 1000, group 1000", withGroup(func(p *corev1.Pod) {
			p.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: "ISTIO_OUTBOUND_OWNER_GROUPS", Value: "*"}, {Name: "ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE", Value: "1000"}}
		}, 1000), Fail},
		{"include 1000: exclude not read", withGroup(func(p *corev1.Pod) {
			p.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: "ISTIO_OUTBOUND_OWNER_GROUPS", Value: "1000"}, {Name: "ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE", Value: "1000"}}
		}, 1000), ""},
		{"no settings", nil, ""},
		{"no sidecar", func(p *corev1.Pod) { groupsExcluded(p); notInjected(p) }, ""},
	} {
		d := Diagnose(checkCase{pod: tc.pod}.facts())
		got := ""
		for _, f := range d.Findings {
			if f.Code == CodeOwnerGroupBypass {
				got = f.Status
				checks++
				if !strings.Contains(f.Evidence, "bypass the proxy") {
					t.Errorf("%s: evidence %q", tc.name, f.Evidence)
				}
			}
		}
		checks++
		if got != tc.status {
			t.Errorf("%s: status %q, want %q", tc.name, got, tc.status)
		}
	}
	t.Logf("%d checks", checks)
}

// istio-init fails on a group name its image does not have (red team round
// 20's 05): KM-INIT-003 quotes the option and the value, and its fix takes
// the owner-group settings out of the pod's proxy.istio.io/config.
func TestOwnerGroupInitFailure(t *testing.T) {
	d := Diagnose(checkCase{pod: func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "StatefulSet", Name: "search", Controller: &yes}}
		p.Annotations = map[string]string{"proxy.istio.io/config": `{"proxyMetadata":{"ISTIO_OUTBOUND_OWNER_GROUPS":"search-egress","KEEP":"1"}}`}
		p.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: "ISTIO_OUTBOUND_OWNER_GROUPS", Value: "search-egress"}}
		initFailed(`iptables-restore v1.8.10 (legacy): owner: Bad value for "--gid-owner" option: "search-egress"
Error occurred at line: 20`)(p)
	}}.facts())
	checks := 3
	if d.Code != CodeInitFailed || !strings.Contains(d.Verdict, `(its log: --gid-owner "search-egress")`) {
		t.Errorf("first %s: %s", d.Code, d.Verdict)
	}
	if want := `kubectl patch statefulset/search -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"proxy.istio.io/config":"{\"proxyMetadata\":{\"KEEP\":\"1\"}}"}}}}}'`; !strings.HasPrefix(d.Fix, want) {
		t.Errorf("fix %q, want %q", d.Fix, want)
	}
	if !strings.Contains(d.Verdict, "give groups by number") {
		t.Errorf("verdict %q does not say how to give the group", d.Verdict)
	}
	t.Logf("%d checks", checks)
}
