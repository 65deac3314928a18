package e2e

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
)

// faultsRoom are the faults of what the kubelet and the scheduler make of
// a sidecar pod's spec: a probe sent to the node's loopback, a pod the
// sidecar's requests keep off every node; and an opt-out that never
// reaches the pod.
func (b *catBed) faultsRoom() []*catFault {
	c, inj, createPod := b.c, b.inj, b.createPod
	return []*catFault{
		{code: "KM-INJ-023", ns: b.rev, name: "optout-on-job", how: `a Job labelled sidecar.istio.io/inject="false" on its own metadata.labels, its pod template not, in a namespace of revision canary (classic sidecars): the opt-out does nothing, its pod's sidecar keeps it from ending`,
			plant: func(ctx context.Context, f *catFault) error {
				job := optOutJob(b.rev)
				if _, err := c.Client.BatchV1().Jobs(b.rev).Create(ctx, job, metav1.CreateOptions{}); err != nil {
					return err
				}
				pod, err := catPodOf(ctx, c, b.rev, "job-name=optout-on-job")
				if err != nil {
					return err
				}
				f.pod, f.state = pod, "its work done, the classic sidecar running"
				_, err = catWaitPod(ctx, c, b.rev, pod, f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "app")
					return s != nil && s.State.Terminated != nil && s.State.Terminated.ExitCode == 0
				})
				return err
			}},
		{code: "KM-INJ-024", ns: inj, name: "windows-pod", workload: true, how: "a Deployment whose template sets spec.os.name windows, in a namespace that asks for injection: the apiserver refuses the Linux securityContext of istio-init and istio-proxy on a Windows pod (FailedCreate)",
			plant: func(ctx context.Context, f *catFault) error {
				return b.refused(ctx, f, inj, catLean(), func(s *corev1.PodSpec) { s.OS = &corev1.PodOS{Name: corev1.Windows} }, "cannot be set for a windows pod")
			}},
		{code: "KM-START-023", ns: inj, name: "probe-host-local", how: "a sidecar pod whose app's readiness probe is httpGet host localhost on 8080: the injector's rewrite keeps the host, the kubelet asks the node's loopback, never ready",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("probe-host-local", nil, catLean())
				p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 2, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "localhost", Path: "/", Port: intstr.FromInt32(8080)}}}
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "running, its probe to the node's loopback failing"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "app")
					return p.Status.Phase == corev1.PodRunning && s != nil && s.State.Running != nil && !s.Ready && time.Since(s.State.Running.StartedAt.Time) > 10*time.Second
				})
				return err
			}},
		{code: "KM-START-024", ns: inj, name: "sidecar-tips-room", how: "a sidecar pod (proxyMemory 1Gi, a native sidecar) whose init container after istio-proxy requests the node's memory left less 512Mi: with the sidecar beside it no node has room, without it one would",
			plant: func(ctx context.Context, f *catFault) error {
				left, err := memoryLeft(ctx, c.Client)
				if err != nil {
					return err
				}
				p := appPod("sidecar-tips-room", nil, catLean("sidecar.istio.io/proxyMemory", "1Gi"))
				p.Spec.InitContainers = []corev1.Container{{Name: "warm-cache", Image: testImage, ImagePullPolicy: corev1.PullNever, Command: []string{"/bin/sh", "-c", "true"},
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: *resource.NewQuantity(left-512<<20, resource.BinarySI)}}}}
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "unschedulable for want of memory"
				_, err = catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool { return diagnose.NeedsNodeRoom(p) })
				return err
			}},
	}
}

// memoryLeft is the most memory a node has left for a new pod's requests
// (allocatable less what its pods request), in bytes.
func memoryLeft(ctx context.Context, c kubernetes.Interface) (int64, error) {
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		return 0, err
	}
	used := map[string]int64{}
	for i := range pods.Items {
		q := diagnose.SchedRequests(&pods.Items[i].Spec)[corev1.ResourceMemory]
		used[pods.Items[i].Spec.NodeName] += q.Value()
	}
	best := int64(-1)
	for _, n := range nodes.Items {
		if left := n.Status.Allocatable.Memory().Value() - used[n.Name]; left > best {
			best = left
		}
	}
	if best < 1<<30 {
		return 0, fmt.Errorf("no node has 1Gi of memory left (%d bytes)", best)
	}
	return best, nil
}

// optOutJob is a Job labelled sidecar.istio.io/inject="false" on its own
// metadata, its pod template not.
func optOutJob(ns string) *batchv1.Job {
	p := appPod("optout-on-job", nil, catLean())
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "echo done"}
	p.Spec.Containers[0].Ports = nil
	backoff := int32(0)
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "optout-on-job", Namespace: ns, Labels: map[string]string{"sidecar.istio.io/inject": "false"}},
		Spec: batchv1.JobSpec{BackoffLimit: &backoff, Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: p.Annotations}, Spec: p.Spec}}}
}
