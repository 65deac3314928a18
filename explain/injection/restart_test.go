package injection

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// What re-creates a live pod so that injection is decided again: a
// Deployment's rollout, a pod deleted for the controllers that create it
// again, and nothing to delete for a Job's finished pod (its next one is
// decided anew).
func TestRestartCommand(t *testing.T) {
	pod := func(phase corev1.PodPhase) *corev1.Pod { return &corev1.Pod{Status: corev1.PodStatus{Phase: phase}} }
	injectedPod := pod(corev1.PodRunning)
	injectedPod.Annotations = map[string]string{"sidecar.istio.io/status": "{}"}
	pendingPod := pod(corev1.PodRunning) // ambient, istio-cni's mark dropped when it is made again
	pendingPod.Annotations = map[string]string{"ambient.istio.io/redirection": "pending"}
	cases := []struct {
		owner *Owner
		pod   *corev1.Pod
		want  string
	}{
		{&Owner{Kind: "Deployment", Name: "web"}, pod(corev1.PodRunning), "kubectl rollout restart deployment/web -n shop"},
		{&Owner{Kind: "StatefulSet", Name: "db"}, pod(corev1.PodRunning), "kubectl delete pod p-1 -n shop   # its StatefulSet db re-creates it"},
		{&Owner{Kind: "Job", Name: "nightly-1"}, pod(corev1.PodRunning), "kubectl delete pod p-1 -n shop   # its Job nightly-1 creates it again"},
		{&Owner{Kind: "Job", Name: "nightly-1"}, pod(corev1.PodSucceeded), "# pod p-1 has finished: the next pod of its Job nightly-1"},
		{&Owner{Kind: "Job", Name: "nightly-1"}, pod(corev1.PodFailed), "# pod p-1 has finished"},
		{nil, pod(corev1.PodRunning), "kubectl get pod p-1 -n shop -o json | kubectl replace --force -f -   # a bare pod"},
		{nil, injectedPod, "kubectl delete pod p-1 -n shop   # a bare pod: create it again from its manifest"},
		{nil, pendingPod, `kubectl get pod p-1 -n shop -o json | kubectl patch --local -f - --type=merge -p '{"metadata":{"annotations":{"ambient.istio.io/redirection":null}}}' -o json | kubectl replace --force -f -`},
	}
	for _, tc := range cases {
		got := restartCommand(&Workload{Name: "p-1", Namespace: "shop", Owner: tc.owner, Pod: tc.pod})
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%+v %s: %q, want %q…", tc.owner, tc.pod.Status.Phase, got, tc.want)
		}
	}
	t.Logf("%d checks", len(cases))
}
