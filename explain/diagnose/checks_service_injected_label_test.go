package diagnose

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pinned is a Service pinned to version v1 by the injector's label.
var pinned = corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-v1"},
	Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web", "service.istio.io/canonical-revision": "v1"}}}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeServiceInjectedLabel, pod: func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "web", "version": "v2", "service.istio.io/canonical-revision": "v2"}
	}, missing: []corev1.Service{pinned}, status: Warning, evidence: `Service web-v1 selects service.istio.io/canonical-revision="v1" (this pod's: "v2"`,
		fix: `kubectl patch service web-v1 -n shop --type=json -p '[{"op":"remove","path":"/spec/selector/service.istio.io~1canonical-revision"}]'`})
}

// A Service misses a pod for a label the injector sets only when every
// other key of its selector matches the pod.
func TestInjectedLabelMiss(t *testing.T) {
	pod := &corev1.Pod{}
	pod.Labels = map[string]string{"app": "web", "version": "v2", "service.istio.io/canonical-revision": "v2", "security.istio.io/tlsMode": "istio"}
	checks := 0
	for _, tc := range []struct {
		selector map[string]string
		want     string
	}{
		{map[string]string{"app": "web", "service.istio.io/canonical-revision": "v1"}, "[service.istio.io/canonical-revision]"},
		{map[string]string{"app": "web", "service.istio.io/canonical-name": "web"}, "[service.istio.io/canonical-name]"}, // the pod has none
		{map[string]string{"app": "web", "service.istio.io/canonical-revision": "v2"}, "[]"},                             // it selects the pod
		{map[string]string{"app": "api", "service.istio.io/canonical-revision": "v1"}, "[]"},                             // another app's
		{map[string]string{"service.istio.io/canonical-revision": "v1"}, "[]"},                                           // nothing else to go by
		{map[string]string{"app": "web", "security.istio.io/tlsMode": "disabled"}, "[security.istio.io/tlsMode]"},
	} {
		checks++
		if got := fmt.Sprint(InjectedLabelMiss(tc.selector, pod)); got != tc.want {
			t.Errorf("selector %v: %s, want %s", tc.selector, got, tc.want)
		}
	}
	t.Logf("%d checks", checks)
}

// A Service that selects by the revision label (red team round 21's 05):
// while its pods are on that revision, a hazard; once they moved to
// another, the Service misses them; a Service by the pod's own labels is
// left alone.
func TestRevisionSelected(t *testing.T) {
	svc := func(sel map[string]string) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"}, Spec: corev1.ServiceSpec{Selector: sel}}
	}
	onCanary := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web", "istio.io/rev": "canary"} }
	moved := func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web", "istio.io/rev": "default"} }
	checks := 0
	for _, tc := range []struct {
		name              string
		pod               func(p *corev1.Pod)
		services, missing []corev1.Service
		evidence          string
	}{
		{"selected by its revision", onCanary, []corev1.Service{svc(map[string]string{"app": "web", "istio.io/rev": "canary"})}, nil, `Service web selects istio.io/rev="canary" beside the pod's own labels`},
		{"moved to another revision", moved, nil, []corev1.Service{svc(map[string]string{"app": "web", "istio.io/rev": "canary"})}, `Service web selects istio.io/rev="canary" (this pod's: "default"; the revision label`},
		{"by its own labels", onCanary, []corev1.Service{svc(map[string]string{"app": "web"})}, nil, ""},
	} {
		f := checkCase{pod: tc.pod}.facts()
		f.Services, f.ServicesMissing = tc.services, tc.missing
		d := Diagnose(f)
		got := ""
		for _, fd := range d.Findings {
			if fd.Code == CodeServiceInjectedLabel {
				got = fd.Evidence
				checks++
				if !strings.Contains(fd.Fix, `kubectl patch service web -n shop --type=json -p '[{"op":"remove","path":"/spec/selector/istio.io~1rev"}]'`) {
					t.Errorf("%s: fix %q", tc.name, fd.Fix)
				}
			}
		}
		checks++
		if tc.evidence == "" && got != "" || !strings.Contains(got, tc.evidence) {
			t.Errorf("%s: evidence %q, want %q", tc.name, got, tc.evidence)
		}
	}
	t.Logf("%d checks", checks)
}
