package diagnose

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A pod-level budget (spec.resources) that the template's own containers
// fit in and the injected sidecar tips over: the mesh's cause, fixed by
// raising the pod-level request to the aggregate the apiserver named, never
// by removing the sidecar's annotations (which gives it the mesh's larger
// defaults). Over budget on its own, it is not the sidecar's.
func TestWorkloadShortPodLevelBudget(t *testing.T) {
	const cpu = `FailedCreate (6×): Error creating: Pod "batch-worker-7cbd55b7cf-bwwwr" is invalid: spec.resources.requests[cpu]: Invalid value: "50m": must be greater than or equal to aggregate container requests of 60m`
	const both = cpu + `, spec.resources.requests[memory]: Invalid value: "64Mi": must be greater than or equal to aggregate container requests of 160Mi`
	res := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i+1 < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return l
	}
	tmpl := func(appCPU string, budget *corev1.ResourceRequirements) *corev1.PodTemplateSpec {
		t := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Resources: budget,
			Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: res("cpu", appCPU, "memory", "32Mi")}}}}}
		t.Annotations = map[string]string{"sidecar.istio.io/proxyCPU": "10m"}
		return t
	}
	budget := &corev1.ResourceRequirements{Requests: res("cpu", "50m", "memory", "64Mi"), Limits: res("cpu", "100m", "memory", "64Mi")}
	cases := []struct {
		name, kind, controller, event string
		tmpl                          *corev1.PodTemplateSpec
		want, not                     []string
	}{
		{name: "cpu", kind: "Deployment", event: cpu, tmpl: tmpl("50m", budget),
			want: []string{`kubectl patch deployment/batch-worker -n shop --type=merge -p '{"spec":{"template":{"spec":{"resources":{"requests":{"cpu":"60m"}}}}}}'`,
				"cpu: the pod-level request is 50m, its own containers ask for 50m, with the injected istio-proxy 60m"},
			not: []string{`"op":"remove"`, "proxyCPU\"", "limits"}},
		{name: "cpu and memory: the memory limit raised too", kind: "StatefulSet", event: both, tmpl: tmpl("50m", budget),
			want: []string{`kubectl patch statefulset/batch-worker -n shop --type=merge -p '{"spec":{"template":{"spec":{"resources":{"limits":{"memory":"160Mi"},"requests":{"cpu":"60m","memory":"160Mi"}}}}}}'`}},
		{name: "a CronJob's Job: its CronJob", kind: "Job", controller: "CronJob/batch-worker", event: cpu, tmpl: tmpl("50m", budget),
			want: []string{`kubectl patch cronjob/batch-worker -n shop --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"spec":{"resources":{"requests":{"cpu":"60m"}}}}}}}}'`}},
		{name: "a Job of its own: re-created", kind: "Job", event: cpu, tmpl: tmpl("50m", budget),
			want: []string{"kubectl get job batch-worker -n shop -o json | kubectl patch --local -f -", `"template":{"metadata":{"labels":{"controller-uid":null,"batch.kubernetes.io/controller-uid":null}},"spec":{"resources":{"requests":{"cpu":"60m"}}}}`, "| kubectl replace --force -f -"},
			not:  []string{"kubectl patch job"}},
		{name: "the app alone is over its budget: not the sidecar", kind: "Deployment", event: cpu, tmpl: tmpl("70m", budget),
			not: []string{`"resources":{"requests"`, "pod-level budget"}},
	}
	checked := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := &WorkloadState{Kind: tc.kind, Namespace: "shop", Name: "batch-worker", Desired: 1, Controller: tc.controller,
				Events: []string{tc.event}, Template: tc.tmpl, Since: time.Unix(0, 0), Now: time.Unix(3600, 0)}
			fs := workloadShort(&Input{Facts: Facts{Workload: w}})
			if len(fs) != 1 || fs[0].Status != Fail {
				t.Fatalf("findings %+v", fs)
			}
			got := fs[0].Evidence + "\n" + fs[0].Fix
			for _, w := range tc.want {
				checked++
				if !strings.Contains(got, w) {
					t.Errorf("lacks %q:\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				checked++
				if strings.Contains(fs[0].Fix, n) {
					t.Errorf("fix has %q:\n%s", n, fs[0].Fix)
				}
			}
		})
	}
	t.Logf("%d assertions", checked)
}

// A template's own request is summed as the scheduler sums it: an init
// container after the template's own native sidecar runs beside it, so
// both count; one before it does not.
func TestOwnRequestsNativeSidecarBeforeInit(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	req := func(cpu string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
	shipper := corev1.Container{Name: "shipper", RestartPolicy: &always, Resources: req("100m")}
	migrate := corev1.Container{Name: "migrate", Resources: req("500m")}
	app := corev1.Container{Name: "app", Resources: req("50m")}
	for _, tc := range []struct {
		name  string
		inits []corev1.Container
		want  string
	}{
		{"the init container after the sidecar", []corev1.Container{shipper, migrate}, "600m"},
		{"the init container before it", []corev1.Container{migrate, shipper}, "500m"},
		{"no init container", []corev1.Container{shipper}, "150m"},
	} {
		tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{InitContainers: tc.inits, Containers: []corev1.Container{app}}}
		if got := ownRequests(tmpl, corev1.ResourceCPU); got.Cmp(resource.MustParse(tc.want)) != 0 {
			t.Errorf("%s: %s, want %s", tc.name, got.String(), tc.want)
		}
	}
}
