package diagnose

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// stale is a Service that selects a Deployment's pods by an old template's
// pod-template-hash.
var stale = corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart"},
	Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "cart", "pod-template-hash": "db9fbd689"}}}

func init() {
	checkCases = append(checkCases, checkCase{code: CodeServiceTemplateLabel, pod: func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "cart", "pod-template-hash": "58c86c6c49"}
	}, missing: []corev1.Service{stale}, status: Fail, evidence: `Service cart selects pod-template-hash="db9fbd689" (this pod's: "58c86c6c49"`,
		fix: `kubectl patch service cart -n shop --type=json -p '[{"op":"remove","path":"/spec/selector/pod-template-hash"}]'`})
}

// A Service misses a pod for a per-template label only when every other
// key of its selector matches; one that selects the pod by it now is a
// hazard for the next rollout; one by the pod's own labels, nothing.
func TestServiceTemplateLabel(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cart-x", Namespace: "shop",
		Labels: map[string]string{"app": "cart", "pod-template-hash": "58c86c6c49", "controller-revision-hash": "r1"}}}
	checks := 0
	for _, tc := range []struct {
		selector map[string]string
		want     string
	}{
		{map[string]string{"app": "cart", "pod-template-hash": "db9fbd689"}, "[pod-template-hash]"},
		{map[string]string{"app": "cart", "pod-template-hash": "58c86c6c49"}, "[]"}, // it selects the pod
		{map[string]string{"app": "api", "pod-template-hash": "db9fbd689"}, "[]"},   // another app's
		{map[string]string{"pod-template-hash": "db9fbd689"}, "[]"},                 // nothing else to go by
		{map[string]string{"app": "cart", "controller-revision-hash": "r0"}, "[controller-revision-hash]"},
	} {
		checks++
		if got := fmt.Sprint(TemplateLabelMiss(tc.selector, pod)); got != tc.want {
			t.Errorf("selector %v: %s, want %s", tc.selector, got, tc.want)
		}
	}
	svc := func(sel map[string]string) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "cart", Namespace: "shop"}, Spec: corev1.ServiceSpec{Selector: sel}}
	}
	for _, tc := range []struct {
		name   string
		in     *Input
		status string
	}{
		{"misses it", &Input{Facts: Facts{Pod: pod, ServicesMissing: []corev1.Service{svc(map[string]string{"app": "cart", "pod-template-hash": "old"})}}}, Fail},
		{"selects it now", &Input{Facts: Facts{Pod: pod, Services: []corev1.Service{svc(map[string]string{"app": "cart", "pod-template-hash": "58c86c6c49"})}}}, Warning},
		{"its own labels", &Input{Facts: Facts{Pod: pod, Services: []corev1.Service{svc(map[string]string{"app": "cart"})}}}, ""},
	} {
		checks++
		fs := serviceTemplateLabel(tc.in)
		switch {
		case tc.status == "" && len(fs) != 0:
			t.Errorf("%s: %+v, want nothing", tc.name, fs)
		case tc.status != "" && (len(fs) != 1 || fs[0].Status != tc.status || !strings.Contains(fs[0].Fix, `"path":"/spec/selector/pod-template-hash"`)):
			t.Errorf("%s: %+v, want one %s with the selector's key removed", tc.name, fs, tc.status)
		}
	}
	t.Logf("%d checks", checks)
}

// diagnose service/NAME looks for the pods a Service is meant for by its
// selector less the per-template labels.
func TestWithoutTemplateLabels(t *testing.T) {
	got := WithoutTemplateLabels(map[string]string{"app": "cart", "pod-template-hash": "x", "controller-revision-hash": "y"})
	if len(got) != 1 || got["app"] != "cart" {
		t.Errorf("%v, want only app=cart", got)
	}
}
