package diagnose

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// StartNeedsOwner says the init and start checks of a pod read its
// workload (FactOwner): a Job's pod with a classic sidecar (its fix
// changes the Job, or its CronJob), an injected pod whose proxy is not
// ready (the template's own istio-proxy may be why), or a pod the
// scheduler cannot place (its workload's rollout may only add pods).
func StartNeedsOwner(p *corev1.Pod) bool {
	if p == nil || p.DeletionTimestamp != nil {
		return false
	}
	return classicJobPod(p) || proxyInTrouble(p) || unschedulable(p) || statefulSetUnready(p) || len(p.Spec.SchedulingGates) > 0
}

// statefulSetUnready: a StatefulSet's pod not ready (its revision against
// its StatefulSet's: staleStatefulSetPod).
func statefulSetUnready(p *corev1.Pod) bool {
	ref := metav1.GetControllerOf(p)
	return ref != nil && ref.Kind == "StatefulSet" && p.Labels["controller-revision-hash"] != "" && !isReady(p)
}

// unschedulable: the scheduler could not place the pod (its workload's
// rollout strategy may be why: SurgesOnly).
func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// StartNeedsServices says the start checks of a pod read the Services
// that select it (FactServices): an injected pod whose app declares a port
// of the proxy's (the fix moves their targetPort with it).
func StartNeedsServices(p *corev1.Pod) bool {
	if p == nil || p.Annotations[istio.AnnotationStatus] == "" {
		return false
	}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if istio.IsIstioContainer(c.Name) {
				continue
			}
			for _, port := range c.Ports {
				if slices.Contains(istio.ReservedPorts, port.ContainerPort) {
					return true
				}
			}
		}
	}
	return false
}

// classicJobPod: a Job's pod with a classic istio-proxy container.
func classicJobPod(p *corev1.Pod) bool {
	ref := controllerOf(p)
	if ref == nil || ref.Kind != "Job" {
		return false
	}
	for _, c := range p.Spec.Containers {
		if c.Name == istio.ProxyContainer {
			return true
		}
	}
	return false
}

// proxyInTrouble: an injected pod whose istio-proxy is not ready.
func proxyInTrouble(p *corev1.Pod) bool {
	if p.Annotations[istio.AnnotationStatus] == "" {
		return false
	}
	for _, sts := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, st := range sts {
			if st.Name == istio.ProxyContainer && !st.Ready {
				return true
			}
		}
	}
	return false
}

// controllerOf is the pod's controller reference (nil for a bare pod).
func controllerOf(p *corev1.Pod) *metav1.OwnerReference {
	for i := range p.OwnerReferences {
		if ref := &p.OwnerReferences[i]; ref.Controller != nil && *ref.Controller {
			return ref
		}
	}
	return nil
}
