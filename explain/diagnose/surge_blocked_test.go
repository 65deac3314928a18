package diagnose

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A rollout that may only add pods, stopped by a new pod the scheduler
// cannot place beside the old one, is named with its strategy's fix; the
// old pod of such a rollout is not the first failure: the rollout
// replaces it.
func TestSurgeBlockedAndSuperseded(t *testing.T) {
	dep := &WorkloadState{Kind: "Deployment", Namespace: "ns", Name: "web", SurgesOnly: true, NewReplicaSet: "web-new"}
	ds := &WorkloadState{Kind: "DaemonSet", Namespace: "ns", Name: "agent", SurgesOnly: true}
	selfAvoiding := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, TopologyKey: "kubernetes.io/hostname"}}}}}}
	checks := 0
	for _, tc := range []struct {
		name string
		w    *WorkloadState
		said string
		fix  string
	}{
		{"anti-affinity", dep, "Unschedulable: 0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules.",
			`kubectl patch deployment/web -n ns --type=merge -p '{"spec":{"strategy":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}}}'`},
		{"host port", ds, "Unschedulable: 0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports.",
			`kubectl patch daemonset/agent -n ns --type=merge -p '{"spec":{"updateStrategy":{"rollingUpdate":{"maxSurge":0,"maxUnavailable":1}}}}'`},
		{"a rollout that removes first", &WorkloadState{Kind: "Deployment", Namespace: "ns", Name: "web"}, "didn't match pod anti-affinity rules", ""},
		{"another reason", dep, "1 node(s) had untolerated taint", ""},
		{"no room (there may be no old pod to make room)", dep, "0/1 nodes are available: 1 Insufficient cpu.", ""},
	} {
		checks++
		_, fix := surgeBlocked(&Input{Facts: Facts{Owner: tc.w, Pod: selfAvoiding}}, tc.said)
		if fix, _, _ = strings.Cut(fix, "   # "); fix != tc.fix {
			t.Errorf("%s: fix %q, want %q", tc.name, fix, tc.fix)
		}
	}
	yes := true
	pod := func(rs string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rs + "-x", Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: rs, Controller: &yes}}}}
	}
	for _, tc := range []struct {
		rs   string
		w    *WorkloadState
		want bool
	}{{"web-old", dep, true}, {"web-new", dep, false}, {"web-old", &WorkloadState{Kind: "Deployment", Name: "web"}, false}, {"other-old", dep, false}} {
		checks++
		why, fix := (&Input{Facts: Facts{Pod: pod(tc.rs), Owner: tc.w}}).superseded()
		if got := why != "" && strings.HasPrefix(fix, "kubectl rollout status deployment/web -n ns"); got != tc.want {
			t.Errorf("ReplicaSet %s (newest %q): superseded = %v (%q), want %v", tc.rs, tc.w.NewReplicaSet, got, why, tc.want)
		}
	}
	// A paused rollout replaces nothing: the fix resumes it first.
	paused := *dep
	paused.Paused = true
	checks++
	if _, fix := (&Input{Facts: Facts{Pod: pod("web-old"), Owner: &paused}}).superseded(); !strings.HasPrefix(fix, "kubectl rollout resume deployment/web -n ns ") ||
		!strings.Contains(fix, "\nkubectl rollout status deployment/web -n ns") {
		t.Errorf("paused: fix %q, want a resume, then the rollout's status", fix)
	}
	t.Logf("%d checks", checks)
}
