package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A LimitRange's maxLimitRequestRatio that refuses the injected sidecar:
// said to be the sidecar's when no app container breaks the ratio, fixed
// by the sidecar's annotations (its request kept, its limit the ratio times
// it), on the object whose template makes the pods.
func TestWorkloadShortLimitRatio(t *testing.T) {
	const ratio20 = `FailedCreate (7×): Error creating: pods "search-6f7d9-" is forbidden: cpu max limit to request ratio per Container is 4, but provided ratio is 20.000000`
	const noLimit = `FailedCreate (3×): Error creating: pods "search-6f7d9-" is forbidden: cpu max limit to request ratio per Container is 4, but no limit is specified or limit is 0`
	const memRatio = `FailedCreate (3×): Error creating: pods "search-6f7d9-" is forbidden: memory max limit to request ratio per Container is 2, but provided ratio is 8.000000`
	app := func(req, lim string) corev1.Container {
		c := corev1.Container{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}}
		if req != "" {
			c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(req)
		}
		if lim != "" {
			c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse(lim)
		}
		return c
	}
	tmpl := func(ann map[string]string, cs ...corev1.Container) *corev1.PodTemplateSpec {
		t := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: cs}}
		t.Annotations = ann
		return t
	}
	cases := []struct {
		name                 string
		kind, controller     string
		rollout              bool
		event                string
		tmpl                 *corev1.PodTemplateSpec
		evidence, fix, notIn string
	}{
		{name: "Istio's defaults, app within the ratio", kind: "Deployment", event: ratio20, tmpl: tmpl(nil, app("250m", "500m")),
			evidence: "the injected sidecar (istio-proxy) does, cpu: request 100m, limit 2000m (Istio's defaults), a ratio above 4",
			fix:      `kubectl patch deployment/search -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyCPU":"100m","sidecar.istio.io/proxyCPULimit":"400m"}}}}}'`},
		{name: "the template's proxyCPU kept", kind: "Deployment", event: ratio20, tmpl: tmpl(map[string]string{"sidecar.istio.io/proxyCPU": "10m"}, app("", "")),
			evidence: "request 10m, limit 2000m (the template's sidecar.istio.io/proxyCPU, Istio's default limit)",
			fix:      `{"sidecar.istio.io/proxyCPU":"10m","sidecar.istio.io/proxyCPULimit":"40m"}`},
		{name: "no limit: the same fix", kind: "Deployment", event: noLimit, tmpl: tmpl(nil, app("", "")),
			fix: `"sidecar.istio.io/proxyCPULimit":"400m"`},
		{name: "memory", kind: "StatefulSet", event: memRatio, tmpl: tmpl(nil),
			evidence: "memory: request 128Mi, limit 1Gi", fix: `kubectl patch statefulset/search -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyMemory":"128Mi","sidecar.istio.io/proxyMemoryLimit":"256Mi"}}}}}'`},
		{name: "a stuck rollout", kind: "Deployment", rollout: true, event: ratio20, tmpl: tmpl(nil, app("1", "2")),
			evidence: "rollout is stuck", fix: `kubectl patch deployment/search -n shop --type=merge`},
		{name: "a CronJob's Job: its CronJob's jobTemplate", kind: "Job", controller: "CronJob/search", event: ratio20, tmpl: tmpl(nil),
			fix: `kubectl patch cronjob/search -n shop --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyCPU":"100m","sidecar.istio.io/proxyCPULimit":"400m"}}}}}}}'`},
		{name: "a Job of its own: re-created", kind: "Job", event: ratio20, tmpl: tmpl(nil),
			fix: `kubectl get job search -n shop -o json | kubectl patch --local -f - --type=merge`, notIn: "kubectl patch job"},
		{name: "an app container breaks the ratio: not the sidecar", kind: "Deployment", event: ratio20, tmpl: tmpl(nil, app("100m", "2")),
			fix: "kubectl describe deployment/search", notIn: "sidecar.istio.io"},
		{name: "an app container with a request and no limit: not the sidecar", kind: "Deployment", event: noLimit, tmpl: tmpl(nil, app("100m", "")),
			fix: "kubectl describe deployment/search", notIn: "sidecar.istio.io"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := &WorkloadState{Kind: tc.kind, Namespace: "shop", Name: "search", Desired: 1, Controller: tc.controller,
				Events: []string{tc.event}, Template: tc.tmpl, Since: time.Unix(0, 0), Now: time.Unix(3600, 0)}
			if tc.rollout {
				w.Pods, w.Rollout = 1, "0 pods of its newest ReplicaSet search-6f7d9 exist, of 1 wanted"
			}
			fs := workloadShort(&Input{Facts: Facts{Workload: w}})
			if len(fs) != 1 {
				t.Fatalf("findings %v", fs)
			}
			f := fs[0]
			if f.Status != Fail || !strings.Contains(f.Evidence, tc.evidence) || !strings.Contains(f.Fix, tc.fix) || tc.notIn != "" && strings.Contains(f.Fix+f.Evidence, tc.notIn) {
				t.Errorf("got %s\n evidence %q\n fix %q\nwant evidence with %q, fix with %q, neither with %q", f.Status, f.Evidence, f.Fix, tc.evidence, tc.fix, tc.notIn)
			}
		})
	}
}
