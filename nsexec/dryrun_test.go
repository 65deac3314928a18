package nsexec

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A dry run hands over the object each way would create, as it would be
// sent, and sends nothing: no access review, no create, no patch.
func TestDryRunSendsNothing(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec:       corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", ContainerID: "containerd://0123456789abcdef0123", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	for _, via := range []string{ViaEphemeral, ViaNode} {
		client := fake.NewClientset()
		var got []any
		r := &Runner{Client: client, DryRun: func(obj any) error { got = append(got, obj); return nil },
			Announce: func(s string) { t.Errorf("%s: announced %q in a dry run", via, s) }}
		res, err := r.Dump(context.Background(), Request{Pod: pod, Via: via, Image: "proxyv2:1.28", NodeNamespace: "kmesh", Timeout: time.Minute})
		if !errors.Is(err, ErrDryRun) || res != nil {
			t.Fatalf("%s: %v, %v; want ErrDryRun", via, res, err)
		}
		if a := client.Actions(); len(a) != 0 {
			t.Errorf("%s: a dry run sent %d requests: %v", via, len(a), a)
		}
		if len(got) != 1 {
			t.Fatalf("%s: %d objects printed, want 1", via, len(got))
		}
		switch via {
		case ViaEphemeral:
			doc := got[0].(map[string]any)
			ecs := doc["spec"].(map[string]any)["ephemeralContainers"].([]corev1.EphemeralContainer)
			want := EphemeralContainer(ecs[0].Name, "proxyv2:1.28", script(1, 0, "", true, true))
			if doc["kind"] != "Pod" || !reflect.DeepEqual(doc["metadata"], map[string]any{"name": "web", "namespace": "shop"}) || !reflect.DeepEqual(ecs, []corev1.EphemeralContainer{want}) {
				t.Errorf("ephemeral: printed %+v", doc)
			}
		case ViaNode:
			p := got[0].(*corev1.Pod)
			if p.Kind != "Pod" || p.APIVersion != "v1" || p.Namespace != "kmesh" || p.Spec.NodeName != "node-1" || !p.Spec.HostPID ||
				p.Spec.Containers[0].Image != "proxyv2:1.28" || p.Labels[NodePodLabel] != "node" {
				t.Errorf("node: printed %+v", p)
			}
		}
	}

	// A node dump of several pods: one node pod, nothing sent.
	client := fake.NewClientset()
	var got []any
	r := &Runner{Client: client, DryRun: func(obj any) error { got = append(got, obj); return nil }}
	_, _, err := r.DumpNode(context.Background(), NodeRequest{Node: "node-1", Namespace: "kmesh", Image: "proxyv2:1.28", Pods: []*corev1.Pod{pod}, Timeout: time.Minute})
	if !errors.Is(err, ErrDryRun) || len(got) != 1 || len(client.Actions()) != 0 {
		t.Errorf("node dump: %v, %d objects, %d requests", err, len(got), len(client.Actions()))
	}
}
