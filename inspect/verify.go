package inspect

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DryRunCreate creates pod with dryRun=All: the apiserver runs it through the
// whole admission chain — the mutating webhooks are called (Istio's declare
// sideEffects: None) — and persists nothing. It returns the pod admission
// made, or admission's refusal as an error.
func (c *Client) DryRunCreate(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	return c.Kube.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
}

// CanCreatePods asks the apiserver whether the user may create pods in
// namespace (a dry run needs the same permission as a real create).
func (c *Client) CanCreatePods(ctx context.Context, namespace string) (bool, error) {
	attrs := DryRunPermission(namespace)
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &attrs}}
	res, err := c.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return res.Status.Allowed, nil
}

// OwnerTemplate reads the pod template of the controller that re-creates a
// pod (its ReplicaSet, StatefulSet, DaemonSet, Job or ReplicationController):
// what the pod would be created from now. ok is false for a pod no
// controller re-creates.
func (c *Client) OwnerTemplate(ctx context.Context, p *corev1.Pod) (tmpl *corev1.PodTemplateSpec, owner string, ok bool, err error) {
	tmpl, owner, _, ok, err = c.OwnerState(ctx, p)
	return tmpl, owner, ok, err
}

// OwnerState is OwnerTemplate, and whether the controller is short of the
// pods it wants now (a ReplicaSet, StatefulSet or ReplicationController
// with fewer than its replicas, a DaemonSet that has not scheduled every
// pod, a Job that has not finished and runs none): a refusal it reported
// once matters only while it is.
func (c *Client) OwnerState(ctx context.Context, p *corev1.Pod) (tmpl *corev1.PodTemplateSpec, owner string, short, ok bool, err error) {
	ref := metav1.GetControllerOf(p)
	if ref == nil {
		return nil, "", false, false, nil
	}
	ns := p.Namespace
	owner = ref.Kind + "/" + ref.Name
	want := func(r *int32) int32 {
		if r == nil {
			return 1
		}
		return *r
	}
	switch ref.Kind {
	case "ReplicaSet":
		o, err := c.Proto.AppsV1().ReplicaSets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, owner, false, false, ownerErr(err, "get replicasets.apps", ns)
		}
		return &o.Spec.Template, owner, o.Status.Replicas < want(o.Spec.Replicas), true, nil
	case "StatefulSet":
		o, err := c.Proto.AppsV1().StatefulSets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, owner, false, false, ownerErr(err, "get statefulsets.apps", ns)
		}
		return &o.Spec.Template, owner, o.Status.Replicas < want(o.Spec.Replicas), true, nil
	case "DaemonSet":
		o, err := c.Proto.AppsV1().DaemonSets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, owner, false, false, ownerErr(err, "get daemonsets.apps", ns)
		}
		return &o.Spec.Template, owner, o.Status.CurrentNumberScheduled < o.Status.DesiredNumberScheduled, true, nil
	case "Job":
		o, err := c.Proto.BatchV1().Jobs(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, owner, false, false, ownerErr(err, "get jobs.batch", ns)
		}
		done := false
		for _, cond := range o.Status.Conditions {
			if (cond.Type == batchv1.JobComplete || cond.Type == batchv1.JobFailed) && cond.Status == corev1.ConditionTrue {
				done = true
			}
		}
		return &o.Spec.Template, owner, !done && o.Status.Active == 0, true, nil
	case "ReplicationController":
		o, err := c.Proto.CoreV1().ReplicationControllers(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, owner, false, false, ownerErr(err, "get replicationcontrollers", ns)
		}
		if o.Spec.Template == nil {
			return nil, owner, false, false, nil
		}
		return o.Spec.Template, owner, o.Status.Replicas < want(o.Spec.Replicas), true, nil
	}
	return nil, owner, false, false, nil
}

// ownerErr names the permission a refused owner read needs.
func ownerErr(err error, verb, ns string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("forbidden: the user may not %s in namespace %s", verb, ns)
	}
	return err
}

// DryRunPermission is what a server-side dry-run create of a pod in
// namespace takes: the same as a real create.
func DryRunPermission(namespace string) authorizationv1.ResourceAttributes {
	return authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "create", Resource: "pods"}
}
