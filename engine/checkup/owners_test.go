package checkup

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// Which pods' diagnoses wait for their workload's labels, and which
// workload a sweep gives them.
func TestOwnerWanted(t *testing.T) {
	yes, no := true, false
	owned := func(kind, name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name + "-x", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: name, Controller: &yes}}}}
	}
	plain := &injection.InjectionReport{Injected: &no}
	list := []inspect.Workload{inspect.DeploymentWorkload(&appsDeployment)}
	index := ownerIndex(list)
	cases := []struct {
		name string
		r    *injection.InjectionReport
		p    *corev1.Pod
		want bool
	}{
		{"a Deployment's pod", plain, owned("ReplicaSet", "web-5d8f9", map[string]string{"pod-template-hash": "5d8f9"}), true},
		{"a Job's pod", plain, owned("Job", "migrate", nil), true},
		{"a bare ReplicaSet's pod", plain, owned("ReplicaSet", "rs", nil), false},
		{"a bare pod", plain, &corev1.Pod{}, false},
		{"injected", &injection.InjectionReport{Injected: &yes}, owned("Job", "migrate", nil), false},
		{"ambient", &injection.InjectionReport{Injected: &no, Ambient: true}, owned("Job", "migrate", nil), false},
		{"labelled itself: its template is read too (a mutator may have set the label)", plain, owned("Job", "migrate", map[string]string{diagnose.InjectLabel: "false"}), true},
		{"injected, its proxy not ready", &injection.InjectionReport{Injected: &yes}, unready(owned("ReplicaSet", "web-5d8f9", map[string]string{"pod-template-hash": "5d8f9"})), true},
		{"a bare pod, its proxy not ready", &injection.InjectionReport{Injected: &yes}, unready(&corev1.Pod{}), false},
	}
	for _, tc := range cases {
		if got := ownerWanted(tc.r, tc.p); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	it := &item{facts: diagnose.Facts{Injection: plain}}
	setOwner(it, cases[0].p, index)
	if it.facts.Owner == nil || it.facts.Owner.Name != "web" || it.facts.Owner.Labels[diagnose.InjectLabel] != "true" {
		t.Errorf("the Deployment's pod's owner: %+v", it.facts.Owner)
	}
}

var appsDeployment = appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Labels: map[string]string{diagnose.InjectLabel: "true"}}}

// unready: p is injected, its istio-proxy not ready.
func unready(p *corev1.Pod) *corev1.Pod {
	p.Annotations = map[string]string{"sidecar.istio.io/status": "{}"}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "istio-proxy"}}
	return p
}
