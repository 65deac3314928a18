package inspect

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
)

// NodeRoomCache is what the pods bound to each node request, read the
// first time a pod waits for room (diagnose.NeedsNodeRoom), once a run.
type NodeRoomCache struct {
	once sync.Once
	room diagnose.NodeRoom
}

// Of is the nodes' room, read with c the first time.
func (n *NodeRoomCache) Of(ctx context.Context, c *Client) diagnose.NodeRoom {
	n.once.Do(func() { n.room = c.NodeRoom(ctx) })
	return n.room
}

// NodeRoom reads each node's allocatable and sums, by node, the requests
// of the pods bound to it that have not ended: one LIST of the nodes, one
// of the cluster's pods, at once.
func (c *Client) NodeRoom(ctx context.Context) diagnose.NodeRoom {
	var (
		nodes         *corev1.NodeList
		list          *corev1.PodList
		nodeErr, pErr error
	)
	all(
		func() { nodes, nodeErr = c.Proto.CoreV1().Nodes().List(ctx, metav1.ListOptions{}) },
		func() {
			list, pErr = c.Proto.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"})
		})
	for _, e := range []struct {
		err  error
		what string
	}{{nodeErr, "list nodes"}, {pErr, "list pods (all namespaces)"}} {
		switch {
		case e.err == nil:
		case apierrors.IsForbidden(e.err):
			return diagnose.NodeRoom{Unknown: "forbidden: " + e.what}
		default:
			return diagnose.NodeRoom{Unknown: e.what + ": " + e.err.Error()}
		}
	}
	room := diagnose.NodeRoom{Allocatable: map[string]corev1.ResourceList{}, Requested: map[string]corev1.ResourceList{}}
	for _, n := range nodes.Items {
		room.Allocatable[n.Name] = n.Status.Allocatable
	}
	out := room.Requested
	for i := range list.Items {
		p := &list.Items[i]
		sum := out[p.Spec.NodeName]
		if sum == nil {
			sum = corev1.ResourceList{}
			out[p.Spec.NodeName] = sum
		}
		for r, q := range diagnose.SchedRequests(&p.Spec) {
			t := sum[r]
			t.Add(q)
			sum[r] = t
		}
	}
	return room
}
