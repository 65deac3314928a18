package inspect

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// What each controller's status says it wants, and why it lacks pods.
func TestWorkloadWants(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	later := metav1.NewTime(t0.Add(time.Hour))
	two, yes := int32(2), true
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", CreationTimestamp: t0},
		Spec: appsv1.DeploymentSpec{Replicas: &two},
		Status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"},
			{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: `serviceaccount "x" not found`, LastTransitionTime: later},
		}}}
	w := DeploymentWorkload(d)
	if w.Desired != 2 || len(w.Conditions) != 1 || !strings.Contains(w.Conditions[0], `ReplicaFailure (FailedCreate): serviceaccount "x" not found`) || !w.Since.Equal(later.Time) {
		t.Errorf("deployment: %+v", w.WorkloadState)
	}
	d.Spec.Paused = true
	if w := DeploymentWorkload(d); w.Desired != 0 {
		t.Errorf("a paused Deployment wants %d pods", w.Desired)
	}
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate", Namespace: "shop"},
		Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}}}
	if w := JobWorkload(j); w.Desired != 0 || w.Failed != "Failed (BackoffLimitExceeded): Job has reached the specified backoff limit" || !w.Short() {
		t.Errorf("failed job: %+v", w.WorkloadState)
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if w := JobWorkload(j); w.Desired != 0 || w.Short() {
		t.Errorf("complete job: %+v", w.WorkloadState)
	}
	j.Status.Conditions, j.Spec.Suspend = nil, &yes
	if w := JobWorkload(j); w.Desired != 0 {
		t.Errorf("suspended job wants %d", w.Desired)
	}
	ds := &appsv1.DaemonSet{Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 3}}
	if w := DaemonSetWorkload(ds); w.Desired != 3 {
		t.Errorf("daemonset wants %d", w.Desired)
	}
	events := map[string][]corev1.Event{
		"shop/ReplicaSet/web-5d8f9b7c4": {{Reason: "FailedCreate", Message: "quota", Count: 7, LastTimestamp: later}},
		"shop/Deployment/web":           {{Reason: "SomethingNew", Message: "a message we never saw", LastTimestamp: t0}},
		"shop/ReplicaSet/other-5d8f9":   {{Reason: "FailedCreate", Message: "not ours"}},
	}
	got := WorkloadEvents(events, "shop", "Deployment", "web", 3)
	if len(got) != 2 || got[0] != "FailedCreate (7×): quota" || got[1] != "SomethingNew: a message we never saw" {
		t.Errorf("events of deployment/web: %q", got)
	}
}

// A rollout whose newest ReplicaSet admission refuses, its old pods
// serving: stuck, the ReplicaSet and the Progressing condition named; one
// in progress, finished or paused is not.
func TestDeploymentRolloutStuck(t *testing.T) {
	two := int32(2)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", Generation: 3, Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Replicas: &two},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 0, AvailableReplicas: 2, Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated", Message: `ReplicaSet "web-7c9d8" is progressing.`},
			{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: `pods "web-7c9d8-x" is forbidden: exceeded quota: pods`},
		}}}
	w := DeploymentWorkload(d)
	if !w.Short() || w.NewReplicaSet != "web-7c9d8" || !strings.Contains(w.Rollout, "0 pods of its newest ReplicaSet web-7c9d8 exist, of 2 wanted") ||
		w.Progressing != `Progressing=True (ReplicaSetUpdated): ReplicaSet "web-7c9d8" is progressing.` || w.Labels["app"] != "web" {
		t.Errorf("stuck rollout: %+v", w.WorkloadState)
	}
	// Past its deadline: Progressing=False is among its conditions.
	d.Status.Conditions[1] = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-7c9d8" has timed out progressing.`}
	if w := DeploymentWorkload(d); w.Rollout == "" || w.Progressing != "" || len(w.Conditions) != 2 {
		t.Errorf("stuck past its deadline: %+v", w.WorkloadState)
	}
	// In progress, with no failure: not stuck.
	ok := d.DeepCopy()
	ok.Status.Conditions = ok.Status.Conditions[:1]
	ok.Status.UpdatedReplicas = 1
	w = DeploymentWorkload(ok)
	if w.Pods = 2; w.Rollout != "" || w.Short() {
		t.Errorf("a rollout in progress: %+v", w.WorkloadState)
	}
	// Not observed yet, paused, scaled to zero: not stuck.
	for name, mod := range map[string]func(*appsv1.Deployment){
		"unobserved": func(d *appsv1.Deployment) { d.Generation = 4 },
		"paused":     func(d *appsv1.Deployment) { d.Spec.Paused = true },
		"zero":       func(d *appsv1.Deployment) { zero := int32(0); d.Spec.Replicas = &zero },
		"done":       func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 2 },
	} {
		c := d.DeepCopy()
		mod(c)
		if w := DeploymentWorkload(c); w.Rollout != "" {
			t.Errorf("%s: %+v", name, w.WorkloadState)
		}
	}
}

// A rolling update that may only add pods (no pod may be unavailable, one
// may be surged), as the controller rounds percentages.
func TestSurgesOnly(t *testing.T) {
	n := int32(1)
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(i int) *intstr.IntOrString { v := intstr.FromInt32(int32(i)); return &v }
	checks := 0
	for _, tc := range []struct {
		replicas       int32
		surge, unavail *intstr.IntOrString
		recreate, want bool
	}{
		{n, pct("25%"), pct("25%"), false, true}, // the default on one replica: 25% of 1 is none down, one up
		{4, pct("25%"), pct("25%"), false, false},
		{n, num(1), num(0), false, true},
		{n, num(0), num(1), false, false},
		{n, nil, nil, true, false},
	} {
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &tc.replicas}}
		if tc.recreate {
			d.Spec.Strategy.Type = appsv1.RecreateDeploymentStrategyType
		} else {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: tc.surge, MaxUnavailable: tc.unavail}}
		}
		checks++
		if got := DeploymentWorkload(d).SurgesOnly; got != tc.want {
			t.Errorf("%d replicas, surge %v, unavailable %v: SurgesOnly = %v, want %v", tc.replicas, tc.surge, tc.unavail, got, tc.want)
		}
	}
	t.Logf("%d checks", checks)
}
