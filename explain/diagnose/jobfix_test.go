package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Job's pod template is immutable: the fixes that change a template
// re-create a Job, and patch the others.
func TestTemplateFixesOfAJob(t *testing.T) {
	yes := true
	pod := func(kind, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p", Labels: map[string]string{"pod-template-hash": "abc"},
			Annotations:     map[string]string{"sidecar.istio.io/interceptionMode": "TPROXY_V2"},
			OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: name, Controller: &yes}}}}
	}
	cases := []struct{ name, fix, want, mustNot string }{
		{"remove from a Job's template", templatePatch("job/migrate", "shop", []string{"sidecar.istio.io/proxyCPU"}),
			`kubectl get job migrate -n shop -o json | kubectl patch --local -f - --type=merge -p '{"metadata":`, "kubectl patch job"},
		{"remove from a Deployment's template", templatePatch("deployment/web", "shop", []string{"sidecar.istio.io/proxyCPU"}),
			`kubectl patch deployment/web -n shop --type=json`, ""},
		{"rename on a Job's pod", annotationPatch(pod("Job", "migrate"), "sidecar.istio.io/interceptionMode", "sidecar.istio.io/x"),
			`"sidecar.istio.io/interceptionMode":null,"sidecar.istio.io/x":"TPROXY_V2"`, "kubectl patch job"},
		{"set on a Job's pod", specFixAnnotation(pod("Job", "migrate"), "proxy.istio.io/config", "{}"),
			`"proxy.istio.io/config":"{}"`, "kubectl patch job"},
		{"set on a Deployment's pod", specFixAnnotation(pod("ReplicaSet", "web-abc"), "proxy.istio.io/config", "{}"),
			`kubectl patch deployment/web -n shop --type=merge`, ""},
	}
	for _, tc := range cases {
		if !strings.Contains(tc.fix, tc.want) || tc.mustNot != "" && strings.Contains(tc.fix, tc.mustNot) {
			t.Errorf("%s: fix %q, want %q (and not %q)", tc.name, tc.fix, tc.want, tc.mustNot)
		}
		if strings.Contains(tc.fix, "kubectl get job") && !strings.Contains(tc.fix, "| kubectl replace --force -f -") {
			t.Errorf("%s: fix %q does not replace the Job", tc.name, tc.fix)
		}
	}
}
