package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// proxyGIDEnv: a Deployment's pod whose proxy.istio.io/config sets
// PROXY_GID=0 (red team round 30's 02).
func proxyGIDEnv(p *corev1.Pod) {
	yes := true
	p.Labels = map[string]string{"pod-template-hash": "h"}
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "api-h", Controller: &yes}}
	p.Annotations = map[string]string{"proxy.istio.io/config": `{"proxyMetadata":{"PROXY_GID":"0","OTHER":"x"}}`}
	p.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: "PROXY_GID", Value: "0"}, {Name: "OTHER", Value: "x"}}
}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeInitEnv, pod: proxyGIDEnv, status: Fail,
		evidence: `istio-init's environment sets PROXY_GID="0" (from proxyMetadata), flags its arguments do not give`,
		fix:      `kubectl patch deployment/api -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"proxy.istio.io/config":"{\"proxyMetadata\":{\"OTHER\":\"x\"}}"}}}}}'`})
}

// Each variable fails, warns or says nothing by its value, by the flags
// the arguments give (they win), by the proxy's own group and by the
// release that reads it.
func TestInitEnvSettings(t *testing.T) {
	checks := 0
	gid := func(g int64) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			for i := range p.Spec.Containers {
				if p.Spec.Containers[i].Name == "istio-proxy" {
					p.Spec.Containers[i].SecurityContext = &corev1.SecurityContext{RunAsGroup: &g}
				}
			}
		}
	}
	for _, tc := range []struct {
		name, env, value, arg, image string
		also                         func(*corev1.Pod)
		want                         string // status, "" none
		says                         string
	}{
		{name: "gid 0", env: "PROXY_GID", value: "0", want: Fail, says: "every process of group 0"},
		{name: "gid 1337", env: "PROXY_GID", value: "1337", want: ""},
		{name: "gid of the proxy", env: "PROXY_GID", value: "2000", also: gid(2000), want: ""},
		{name: "gid given by -g", env: "PROXY_GID", value: "0", arg: "-g", want: ""},
		{name: "skip", env: "SKIP_RULE_APPLY", value: "true", want: Fail, says: "writes no rules"},
		{name: "skip false", env: "SKIP_RULE_APPLY", value: "false", want: ""},
		{name: "cleanup 1.24", env: "CLEANUP_ONLY", value: "1", image: "docker.io/istio/proxyv2:1.24.2", want: Fail},
		{name: "cleanup 1.23", env: "CLEANUP_ONLY", value: "1", image: "docker.io/istio/proxyv2:1.23.1", want: ""},
		{name: "cleanup unknown", env: "CLEANUP_ONLY", value: "1", image: "kmesh.local/proxy:dev", want: Unknown, says: "if its release is 1.24 or later"},
		{name: "ports", env: "ISTIO_LOCAL_OUTBOUND_PORTS_EXCLUDE", value: "5432", want: Warning, says: "ports 5432 bypasses"},
		{name: "ports by -o", env: "ISTIO_LOCAL_OUTBOUND_PORTS_EXCLUDE", value: "5432", arg: "-o", want: ""},
		{name: "interfaces", env: "ISTIO_EXCLUDE_INTERFACES", value: "eth0", want: Warning},
		{name: "not read", env: "INBOUND_PORTS", value: "80", want: ""},
	} {
		p := pod(proxyGIDEnv)
		p.Spec.InitContainers[0].Env = []corev1.EnvVar{{Name: tc.env, Value: tc.value}}
		p.Annotations = map[string]string{"proxy.istio.io/config": `{"proxyMetadata":{"` + tc.env + `":"` + tc.value + `"}}`}
		if tc.arg != "" {
			p.Spec.InitContainers[0].Args = append(p.Spec.InitContainers[0].Args, tc.arg, tc.value)
		}
		if tc.image != "" {
			p.Spec.InitContainers[0].Image = tc.image
		}
		if tc.also != nil {
			tc.also(p)
		}
		fs := initEnvSettings(&Input{Facts: Facts{Pod: p}})
		checks++
		switch {
		case tc.want == "" && len(fs) != 0:
			t.Errorf("%s: %+v, want nothing", tc.name, fs)
		case tc.want != "" && (len(fs) != 1 || fs[0].Status != tc.want || !strings.Contains(fs[0].Evidence, tc.says) ||
			!strings.HasPrefix(fs[0].Fix, "kubectl patch deployment/api") || strings.Contains(strings.Split(fs[0].Fix, "   #")[0], tc.env)):
			t.Errorf("%s: %+v, want %s saying %q, fixed by a patch without %s", tc.name, fs, tc.want, tc.says, tc.env)
		}
	}
	t.Logf("%d checks", checks)
}
