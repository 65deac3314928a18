package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// An injected proxy that never becomes ready, whose pod template has an
// istio-proxy container of its own overriding the injector's probe: put
// down to the template, the fix removes that container from it (a
// CronJob's jobTemplate for its Job's pod); a template's istio-proxy that
// overrides nothing, or no template read, changes nothing.
func TestTemplateOverridesProxy(t *testing.T) {
	notReady := then(ofDeployment("NET_ADMIN", "NET_RAW"), func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = false })
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz/ready", Port: intstr.FromInt32(15022)}}}
	tmpl := func(c corev1.Container) *corev1.PodTemplateSpec {
		return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, c}}}
	}
	for _, tc := range []struct {
		name  string
		owner *WorkloadState
		fix   string // "" for none of the override's
	}{
		{name: "a Deployment's template overrides the readiness probe",
			owner: &WorkloadState{Kind: "Deployment", Name: "web", Template: tmpl(corev1.Container{Name: "istio-proxy", Image: "auto", ReadinessProbe: probe})},
			fix:   `kubectl patch deployment web -n shop --type=strategic -p '{"spec":{"template":{"spec":{"containers":[{"name":"istio-proxy","$patch":"delete"}]}}}}'`},
		{name: "a CronJob's Job's template overrides the image",
			owner: &WorkloadState{Kind: "Job", Name: "report-1", Controller: "CronJob/report", Template: tmpl(corev1.Container{Name: "istio-proxy", Image: "kmesh.local/mesh-test:v1"})},
			fix:   `kubectl patch cronjob report -n shop --type=strategic -p '{"spec":{"jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"istio-proxy","$patch":"delete"}]}}}}}}'`},
		{name: "a template's istio-proxy that overrides nothing", owner: &WorkloadState{Kind: "Deployment", Name: "web", Template: tmpl(corev1.Container{Name: "istio-proxy", Image: "auto"})}},
		{name: "no owner read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Diagnose(checkCase{pod: notReady, owner: tc.owner, now: 10 * time.Minute}.facts())
			fs := only(d.Findings, CodeProxyNotReady)
			if len(fs) != 1 {
				t.Fatalf("KM-START-003 findings %+v", d.Findings)
			}
			if got := strings.Contains(fs[0].Fix, "$patch"); got != (tc.fix != "") || tc.fix != "" && !strings.HasPrefix(fs[0].Fix, tc.fix) {
				t.Fatalf("fix %q, want %q", fs[0].Fix, tc.fix)
			}
			if tc.fix != "" && !strings.Contains(fs[0].Evidence, "istio-proxy of its own") {
				t.Errorf("evidence %q", fs[0].Evidence)
			}
		})
	}
}
