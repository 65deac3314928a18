package injection

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// A quota that refuses pods with their sidecar: the sidecar is sized to
// the room the quota leaves after the pod's own containers (worked out from
// the refusal's figures, never a canned size), or, with no room for one,
// the quota is raised by what one pod asks for.
func TestQuotaFixIsArithmetic(t *testing.T) {
	const mem = `Error creating: pods "nightly-29-x" is forbidden: exceeded quota: team-quota, requested: requests.memory=96Mi, used: requests.memory=0, limited: requests.memory=80Mi.`
	const full = `Error creating: pods "nightly-29-x" is forbidden: exceeded quota: team-quota, requested: requests.memory=96Mi, used: requests.memory=40Mi, limited: requests.memory=80Mi`
	const two = `Error creating: pods "web-1" is forbidden: exceeded quota: compute, requested: limits.cpu=2010m,requests.cpu=60m, used: limits.cpu=0,requests.cpu=0, limited: limits.cpu=500m,requests.cpu=1`
	const limitsOnly = `pods "web-cp6rf" is forbidden: exceeded quota: team-quota, requested: limits.cpu=2200m,limits.memory=1152Mi, used: limits.cpu=0,limits.memory=0, limited: limits.cpu=1,limits.memory=96Mi`
	app := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi"), corev1.ResourceCPU: resource.MustParse("50m")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}}}}
	cases := []struct {
		name, kind, msg string
		owner           *Owner
		labels          map[string]string
		want, not       []string
	}{
		{name: "room for a smaller sidecar: a CronJob", kind: "CronJob", msg: mem,
			want: []string{`kubectl patch cronjob/nightly -n shop --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyMemory":"48Mi"}}}}}}}'`,
				`or raise the quota: kubectl patch resourcequota team-quota -n shop --type=merge -p '{"spec":{"hard":{"requests.memory":"96Mi"}}}'`},
			not: []string{"128Mi", "256Mi", "proxyCPU"}},
		{name: "no room for a sidecar: raise the quota", kind: "Deployment", msg: full,
			want: []string{`kubectl patch resourcequota team-quota -n shop --type=merge -p '{"spec":{"hard":{"requests.memory":"136Mi"}}}'   # room for one more pod`},
			not:  []string{"proxyMemory"}},
		{name: "limits and requests: the request kept within the new limit", kind: "Pod", owner: &Owner{Kind: "ReplicaSet", Name: "web-6f7d9"}, labels: map[string]string{"pod-template-hash": "6f7d9"}, msg: two,
			want: []string{`"sidecar.istio.io/proxyCPU":"300m"`, `"sidecar.istio.io/proxyCPULimit":"300m"`, "kubectl patch deployment/web -n shop"}},
		{name: "limits only: Istio's default request kept below the new limit", kind: "Deployment", msg: limitsOnly,
			want: []string{`{"sidecar.istio.io/proxyCPULimit":"800m","sidecar.istio.io/proxyMemory":"96Mi","sidecar.istio.io/proxyMemoryLimit":"96Mi"}`},
			not:  []string{`"sidecar.istio.io/proxyCPU":`}},
		{name: "a ReplicaSet no Deployment owns (no pod-template-hash): itself", kind: "Pod", owner: &Owner{Kind: "ReplicaSet", Name: "web-6f7d9"}, msg: two,
			want: []string{"kubectl patch replicaset/web-6f7d9 -n shop"}, not: []string{"deployment/web"}},
		{name: "a bare pod: its manifest", kind: "Pod", msg: mem,
			want: []string{"set the annotations proxyMemory=48Mi (sidecar.istio.io/…) in the pod's manifest, then re-create it"}},
		{name: "a count the sidecar does not size (a scoped pods quota): raise it", kind: "StatefulSet", msg: `exceeded quota: sandbox-besteffort-only, requested: pods=1, used: pods=0, limited: pods=0`,
			want: []string{`kubectl patch resourcequota sandbox-besteffort-only -n shop --type=merge -p '{"spec":{"hard":{"pods":"1"}}}'   # room for one more pod`, "Burstable"},
			not:  []string{"proxyCPU", "proxyMemory"}},
		{name: "no figures: no arithmetic", kind: "Deployment", msg: `exceeded quota: team-quota, must specify limits.memory`, not: []string{"patch"}},
	}
	checked := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "nightly"
			if tc.kind != "CronJob" {
				name = "web-1"
			}
			w := &Workload{Kind: tc.kind, Namespace: "shop", Name: name, Spec: app, Owner: tc.owner, Labels: tc.labels}
			fix := quotaFix(w, "the apiserver rejected pod creation: "+tc.msg)
			for _, s := range tc.want {
				checked++
				if !strings.Contains(fix, s) {
					t.Errorf("fix lacks %q:\n%s", s, fix)
				}
			}
			for _, s := range tc.not {
				checked++
				if strings.Contains(fix, s) {
					t.Errorf("fix has %q:\n%s", s, fix)
				}
			}
		})
	}
	t.Logf("%d assertions", checked)
}

// A quota refusal fits once the old pod is gone when what it used frees
// room for what the new pod asks; not when even then it does not.
func TestQuotaFitsWithout(t *testing.T) {
	old := &corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("105m")}}}}}
	cases := []struct {
		msg      string
		fits, ok bool
	}{
		{`pods "web-x" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=1, limited: pods=1`, true, true},
		{`exceeded quota: cpu, requested: requests.cpu=210m, used: requests.cpu=300m, limited: requests.cpu=405m`, true, true},
		{`exceeded quota: cpu, requested: requests.cpu=310m, used: requests.cpu=300m, limited: requests.cpu=405m`, false, true},
		{`admission webhook "x" denied the request`, false, false},
	}
	for _, tc := range cases {
		fits, ok := QuotaFitsWithout(old, tc.msg)
		if fits != tc.fits || ok != tc.ok {
			t.Errorf("%s: fits %v ok %v, want %v %v", tc.msg, fits, ok, tc.fits, tc.ok)
		}
	}
}

// A quota that refuses Istio's containers for a resource they do not set
// gets the sidecar's missing annotation, from the mesh's defaults.
func TestMustSpecifyFix(t *testing.T) {
	w := &Workload{Kind: "StatefulSet", Namespace: "shop", Name: "db", Annotations: map[string]string{"sidecar.istio.io/proxyCPU": "10m"}}
	fix := RefusalFix(w, `pods "db-0" is forbidden: failed quota: mem: must specify requests.memory for: istio-init,istio-proxy`)
	if !strings.Contains(fix, `kubectl patch statefulset/db -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"sidecar.istio.io/proxyMemory":"128Mi"}}}}}'`) {
		t.Errorf("fix %q", fix)
	}
	if fix := RefusalFix(w, `failed quota: mem: must specify requests.memory for: app,istio-proxy`); fix != "" {
		t.Errorf("the app lacks it too: %q", fix)
	}
}
