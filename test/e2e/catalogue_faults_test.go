package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

// faultsInjection are the faults of the injection stage.
func (b *catBed) faultsInjection() []*catFault {
	c, t, inj, plain, late, rev, conflict, broken, dup, quota, psa, vap, createPod, runningReady, refused := b.c, b.t, b.inj, b.plain, b.late, b.rev, b.conflict, b.broken, b.dup, b.quota, b.psa, b.vap, b.createPod, b.runningReady, b.refused
	return []*catFault{
		// ---- injection ----
		{code: "KM-INJ-001", ns: late, name: "late", how: "a Deployment's pod created in an unlabelled namespace, which is then labelled istio-injection=enabled",
			plant: func(ctx context.Context, f *catFault) error {
				if _, err := c.Client.AppsV1().Deployments(late).Create(ctx, appDeployment(late, "late", 1, nil), metav1.CreateOptions{}); err != nil {
					return err
				}
				pod, err := catPodOf(ctx, c, late, "app=late")
				if err != nil {
					return err
				}
				f.pod = pod
				if _, err := catWaitPod(ctx, c, late, pod, "running and ready", testcluster.Running); err != nil {
					return err
				}
				if err := catRelabel(ctx, c, late, map[string]string{"istio-injection": "enabled"}); err != nil {
					return err
				}
				f.state = "running without a sidecar; a pod created now is injected by revision default"
				return catWaitInjectedBy(ctx, c, late, "default")
			}},
		{code: "KM-INJ-002", ns: rev, name: "old-rev", how: "injected by revision canary (namespace istio.io/rev=canary), then the namespace relabelled istio.io/rev=default",
			plant: func(ctx context.Context, f *catFault) error {
				if err := runningReady(ctx, f, rev, appPod("old-rev", nil, catLean())); err != nil {
					return err
				}
				if err := catRelabel(ctx, c, rev, map[string]string{"istio.io/rev": "default"}); err != nil {
					return err
				}
				f.state = "running, injected by canary; a pod created now is injected by revision default"
				return catWaitInjectedBy(ctx, c, rev, "default")
			}},
		{code: "KM-INJ-003", ns: conflict, name: "conflicted", how: "a pod in a namespace labelled both istio-injection=enabled and istio.io/rev=canary",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, conflict, appPod("conflicted", nil, catLean()))
			}},
		{code: "KM-INJ-004", ns: broken, name: "web", workload: true, how: "the default revision's namespace webhook copied for this namespace only with its istiod gone (failurePolicy Fail, URL https://127.0.0.1:1/inject); a Deployment",
			plant: func(ctx context.Context, f *catFault) error {
				// The apiserver calls the new webhook from the moment a dry run is refused.
				if err := catPoll(ctx, "the dead webhook to refuse pods in "+broken, func(ctx context.Context) (bool, string) {
					_, err := catDryRun(ctx, c, broken)
					return err != nil && strings.Contains(err.Error(), "failed calling webhook"), fmt.Sprint(err)
				}); err != nil {
					return err
				}
				return refused(ctx, f, broken, nil, nil, "failed calling webhook")
			}},
		{code: "KM-INJ-005", ns: dup, name: "two-webhooks", how: "a pod in a namespace that a copy of the default revision's namespace webhook (real istiod, failurePolicy Ignore) also matches",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, dup, appPod("two-webhooks", nil, catLean()))
			}},
		{code: "KM-INJ-006", ns: plain, name: "image-auto", how: "a container istio-proxy with image auto (imagePullPolicy Never) in a namespace no webhook injects",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("image-auto", nil, nil)
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "auto", ImagePullPolicy: corev1.PullNever})
				if err := createPod(ctx, plain, p); err != nil {
					return err
				}
				f.pod = p.Name
				f.state = "istio-proxy cannot start: image auto"
				_, err := catWaitPod(ctx, c, plain, p.Name, f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "istio-proxy")
					return s != nil && s.State.Waiting != nil && s.State.Waiting.Reason != "" && s.State.Waiting.Reason != "ContainerCreating"
				})
				return err
			}},
		{code: "KM-INJ-007", ns: inj, name: "bad-cidr", workload: true, how: "a Deployment whose template has traffic.sidecar.istio.io/excludeOutboundIPRanges=10.0.0.0/33, which istiod refuses",
			plant: func(ctx context.Context, f *catFault) error {
				return refused(ctx, f, inj, catLean("traffic.sidecar.istio.io/excludeOutboundIPRanges", "10.0.0.0/33"), nil, "10.0.0.0/33")
			}},
		{code: "KM-INJ-008", ns: inj, name: "typo", how: "annotation traffic.sidecar.istio.io/excludeOutboundPort (no s): not one of Istio's",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, inj, appPod("typo", nil, catLean("traffic.sidecar.istio.io/excludeOutboundPort", "9090")))
			}},
		{code: "KM-INJ-009", ns: inj, name: "host-network", how: "hostNetwork: true, label sidecar.istio.io/inject=true, in an injection-enabled namespace",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("host-network", map[string]string{"sidecar.istio.io/inject": "true"}, nil)
				p.Spec.HostNetwork = true
				p.Spec.Containers[0].Command = []string{"sleep", "3600"}
				p.Spec.Containers[0].Ports = nil
				return runningReady(ctx, f, inj, p)
			}},
		{code: "KM-INJ-010", ns: plain, name: "inject-annotation", how: "annotation (not label) sidecar.istio.io/inject=true in a namespace without injection labels",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, plain, appPod("inject-annotation", nil, map[string]string{"sidecar.istio.io/inject": "true"}))
			}},
		{code: "KM-INJ-011", ns: quota, name: "quota-web", workload: true, how: "ResourceQuota limits.memory=512Mi in an injected namespace; a Deployment whose app has a 64Mi limit (the sidecar's 1Gi exceeds it)",
			plant: func(ctx context.Context, f *catFault) error {
				q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "memory"},
					Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceLimitsMemory: resource.MustParse("512Mi")}}}
				if _, err := c.Client.CoreV1().ResourceQuotas(quota).Create(ctx, q, metav1.CreateOptions{}); err != nil {
					return err
				}
				// Admission enforces the quota once its controller has counted it.
				if err := catPoll(ctx, "the quota's status", func(ctx context.Context) (bool, string) {
					q, err := c.Client.CoreV1().ResourceQuotas(quota).Get(ctx, "memory", metav1.GetOptions{})
					return err == nil && len(q.Status.Hard) > 0, fmt.Sprint(err)
				}); err != nil {
					return err
				}
				return refused(ctx, f, quota, nil, func(s *corev1.PodSpec) {
					s.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
				}, "exceeded quota")
			}},
		{code: "KM-INJ-014", ns: vap, name: "vap-web", workload: true, how: "a ValidatingAdmissionPolicy refusing init containers that add NET_ADMIN, bound to an injection-enabled namespace; a Deployment",
			plant: func(ctx context.Context, f *catFault) error {
				if err := noNetAdminPolicy(ctx, t, c, "cat-no-net-admin", vap); err != nil {
					return err
				}
				return refused(ctx, f, vap, catLean(), nil, "ValidatingAdmissionPolicy")
			}},
		{code: "KM-INJ-012", ns: psa, name: "psa-web", workload: true, how: "namespace pod-security.kubernetes.io/enforce=baseline and istio-injection=enabled; a Deployment",
			plant: func(ctx context.Context, f *catFault) error {
				return refused(ctx, f, psa, catLean(), nil, "violates PodSecurity")
			}},
		{code: "KM-INJ-021", ns: inj, name: "big-proxy", how: "a bare pod bound to the node by spec.nodeName, annotated sidecar.istio.io/proxyCPU: \"64\": its kubelet rejects it (OutOfcpu)",
			plant: func(ctx context.Context, f *catFault) error {
				nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "!kmesh.test/no-kubelet"})
				if err != nil || len(nodes.Items) == 0 {
					return fmt.Errorf("no node with a kubelet: %v", err)
				}
				p := appPod(f.name, nil, map[string]string{"sidecar.istio.io/proxyCPU": "64"})
				p.Spec.NodeName = nodes.Items[0].Name
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "Failed, rejected by its kubelet (OutOfcpu)"
				_, err = catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "OutOfcpu"
				})
				return err
			}},
	}
}

// faultsInit are the faults of the init stage, and the platform's own states on meshed pods (first part).
func (b *catBed) faultsInit() []*catFault {
	c, inj, plain, cni, createPod, failedAgain, refused, classic, netAdmin := b.c, b.inj, b.plain, b.cni, b.createPod, b.failedAgain, b.refused, catClassic, b.netAdmin
	return []*catFault{
		// ---- init ----
		{code: "KM-INIT-001", ns: inj, name: "no-netadmin", how: "istio-init customised (a pod init container istio-init, image auto) to add only NET_RAW: the real istio-iptables is refused",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("no-netadmin", nil, catLean())
				p.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: "auto", ImagePullPolicy: corev1.PullNever,
					SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_RAW"}, Drop: []corev1.Capability{"ALL"}}}}}
				return failedAgain(ctx, f, inj, p, "istio-init")
			}},
		// (Not "80,http": the image's /etc/services names port 80 http, and
		// iptables takes it.)
		{code: "KM-INIT-002", ns: inj, name: "bad-ports", how: `traffic.sidecar.istio.io/includeOutboundPorts="80,http-api" (a Service's port name: istiod admits it, iptables-restore refuses it)`,
			plant: func(ctx context.Context, f *catFault) error {
				return failedAgain(ctx, f, inj, appPod("bad-ports", nil, catLean("traffic.sidecar.istio.io/includeOutboundPorts", "80,http-api")), "istio-init")
			}},
		{code: "KM-INIT-003", ns: inj, name: "chain-exists", how: "classic sidecar; a user init container (istiod runs it before istio-init) leaves an ISTIO_INBOUND chain in both iptables backends: istio-init's restore fails",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("chain-exists", nil, classic())
				p.Spec.InitContainers = []corev1.Container{{Name: "net-setup", Image: testImage, ImagePullPolicy: corev1.PullNever, SecurityContext: netAdmin,
					Command: []string{"/bin/sh", "-c", "for v in nft legacy; do iptables-$v -t nat -N ISTIO_INBOUND && iptables-$v -t nat -A PREROUTING -p tcp -j ISTIO_INBOUND; done"}}}
				return failedAgain(ctx, f, inj, p, "istio-init")
			}},
		{code: "KM-INIT-011", ns: inj, name: "waits-for-proxy", how: "a classic sidecar (nativeSidecar \"false\") and an app init container looping until 127.0.0.1:15021 answers: a deadlock",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("waits-for-proxy", nil, catLean("sidecar.istio.io/nativeSidecar", "false"))
				p.Spec.InitContainers = []corev1.Container{{Name: "wait-for-mesh", Image: testImage, ImagePullPolicy: corev1.PullNever,
					Command: []string{"/bin/sh", "-c", "until nc -z 127.0.0.1 15021; do sleep 1; done"}}}
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod = p.Name
				f.state = "wait-for-mesh running, istio-proxy not started"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "wait-for-mesh")
					return p.Status.Phase == corev1.PodPending && s != nil && s.State.Running != nil
				})
				return err
			}},
		{code: "KM-INIT-004", ns: cni, name: "no-cni", how: "a pod the cni revision injects (istio-validation): Istio's CNI plugin is not in the node's chain, nothing redirects",
			plant: func(ctx context.Context, f *catFault) error {
				return failedAgain(ctx, f, cni, appPod("no-cni", nil, catLean()), "istio-validation")
			}},
		{code: "KM-INIT-005", ns: inj, name: "stuck-init", how: "a user init container waiting forever (sleep 3600): over 60s in init",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("stuck-init", nil, catLean())
				p.Spec.InitContainers = []corev1.Container{{Name: "wait-for-db", Image: testImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}}
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod = p.Name
				f.state = "initialising for over 65s, wait-for-db running"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "wait-for-db")
					return p.Status.Phase == corev1.PodPending && s != nil && s.State.Running != nil && time.Since(p.CreationTimestamp.Time) > 65*time.Second
				})
				return err
			}},
		// ---- the platform's own states, on meshed pods ----
		{code: "KM-INJ-013", ns: inj, name: "no-sa", workload: true, how: "a Deployment whose serviceAccountName does not exist: its ReplicaSet cannot create a single pod (FailedCreate)",
			plant: func(ctx context.Context, f *catFault) error {
				return refused(ctx, f, inj, catLean(), func(s *corev1.PodSpec) { s.ServiceAccountName = "no-such-account" }, `serviceaccount "no-such-account" not found`)
			}},
		{code: "KM-INJ-016", ns: inj, name: "envoy-volume", workload: true, how: "a Deployment with a ConfigMap volume named istio-envoy: merged with the injector's emptyDir of that name, the pod is invalid (FailedCreate)",
			plant: func(ctx context.Context, f *catFault) error {
				return refused(ctx, f, inj, catLean(), func(s *corev1.PodSpec) {
					s.Volumes = append(s.Volumes, corev1.Volume{Name: "istio-envoy", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}})
					s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "istio-envoy", MountPath: "/etc/app-envoy"})
				}, "may not specify more than 1 volume type")
			}},
		{code: "KM-INJ-019", ns: inj, name: "never-injected", how: "a pod labelled kmesh.demo/never-inject, which the default revision's neverInjectSelector matches, in a namespace that asks for injection: it runs without a sidecar",
			plant: func(ctx context.Context, f *catFault) error {
				return b.runningReady(ctx, f, b.inj, appPod("never-injected", map[string]string{"kmesh.demo/never-inject": "yes"}, catLean()))
			}},
		{code: "KM-INJ-020", ns: inj, name: "config-typo", how: `a pod annotated proxy.istio.io/config: '{"holdApplicationUntilProxyStart": true}' (no s): istiod ignores the key`,
			plant: func(ctx context.Context, f *catFault) error {
				return b.runningReady(ctx, f, b.inj, appPod("config-typo", nil, catLean("proxy.istio.io/config", `{"holdApplicationUntilProxyStart": true}`)))
			}},
		{code: "KM-INJ-015", ns: plain, name: "label-on-deploy", how: "a Deployment labelled sidecar.istio.io/inject=true on its own metadata.labels, its pod template not, in a namespace with no injection label: its pod runs without a sidecar",
			plant: func(ctx context.Context, f *catFault) error {
				d := appDeployment(plain, "label-on-deploy", 1, catLean())
				d.Labels = map[string]string{"sidecar.istio.io/inject": "true"}
				if _, err := c.Client.AppsV1().Deployments(plain).Create(ctx, d, metav1.CreateOptions{}); err != nil {
					return err
				}
				pod, err := catPodOf(ctx, c, plain, "app=label-on-deploy")
				if err != nil {
					return err
				}
				f.pod = pod
				f.state = "running without a sidecar; the Deployment, not its template, has the inject label"
				_, err = catWaitPod(ctx, c, plain, pod, "running and ready", testcluster.Running)
				return err
			}},
		{code: "KM-INIT-008", ns: inj, name: "init-exits", how: "a user init container that prints why and exits 1 (a migration that cannot reach its database)",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("init-exits", nil, catLean())
				p.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: testImage, ImagePullPolicy: corev1.PullNever,
					Command: []string{"/bin/sh", "-c", "echo 'migrate: dial tcp db:5432: connection refused'; exit 1"}}}
				return failedAgain(ctx, f, inj, p, "migrate")
			}},
		{code: "KM-INIT-009", ns: inj, name: "init-no-image", how: "a user init container whose image is not on the node (pull policy Never): Init:ErrImageNeverPull",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("init-no-image", nil, catLean())
				p.Spec.InitContainers = []corev1.Container{{Name: "fetch-config", Image: "kmesh.local/no-such-image:v1", ImagePullPolicy: corev1.PullNever, Command: []string{"true"}}}
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "fetch-config waiting: ErrImageNeverPull"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "fetch-config")
					return s != nil && s.State.Waiting != nil && s.State.Waiting.Reason == "ErrImageNeverPull"
				})
				return err
			}},
		{code: "KM-INIT-010", ns: inj, name: "no-secret", how: "an injected pod whose volume is a Secret that does not exist: FailedMount, no container (istio-init included) runs",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("no-secret", nil, catLean())
				p.Spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "no-such-secret"}}}}
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "creds", MountPath: "/creds"}}
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod = p.Name
				msg, err := catWaitEvent(ctx, c, inj, "FailedMount", p.Name, `"no-such-secret" not found`)
				f.state = "FailedMount: " + catShort(msg)
				return err
			}},
	}
}

// faultsPlatform are the faults of the platform's own states on meshed pods (the rest).
func (b *catBed) faultsPlatform() []*catFault {
	c, inj, plain, amb, ambAgents, createPod, runningReady, classic := b.c, b.inj, b.plain, b.amb, b.ambAgents, b.createPod, b.runningReady, catClassic
	return []*catFault{
		{code: "KM-START-015", ns: inj, name: "job-fails", workload: true, how: "a Job (native sidecar) whose container exits 2, backoffLimit 0: Failed (BackoffLimitExceeded)",
			plant: func(ctx context.Context, f *catFault) error {
				zero := int32(0)
				tmpl := appPod("job-fails", map[string]string{"app": "job-fails"}, catLean())
				tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
				tmpl.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "echo 'migrate: password authentication failed'; exit 2"}
				j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "job-fails"}, Spec: batchv1.JobSpec{BackoffLimit: &zero,
					Template: corev1.PodTemplateSpec{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}}}
				if _, err := c.Client.BatchV1().Jobs(inj).Create(ctx, j, metav1.CreateOptions{}); err != nil {
					return err
				}
				f.state = "Job Failed"
				return catPoll(ctx, "job job-fails failed", func(ctx context.Context) (bool, string) {
					got, err := c.Client.BatchV1().Jobs(inj).Get(ctx, "job-fails", metav1.GetOptions{})
					if err != nil {
						return false, err.Error()
					}
					for _, cond := range got.Status.Conditions {
						if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
							return true, ""
						}
					}
					return false, fmt.Sprintf("%+v", got.Status.Conditions)
				})
			}},
		{code: "KM-START-014", ns: inj, name: "app-never-ready", how: "an injected pod whose app's readiness probe never passes (exec false): Running, not Ready for over 65s",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("app-never-ready", nil, catLean())
				p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 2, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}}
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "running, not ready for over 65s"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					for _, cond := range p.Status.Conditions {
						if cond.Type == corev1.PodReady {
							return p.Status.Phase == corev1.PodRunning && cond.Status == corev1.ConditionFalse && time.Since(cond.LastTransitionTime.Time) > 65*time.Second
						}
					}
					return false
				})
				return err
			}},
		{code: "KM-START-013", ns: amb, name: "amb-pending", how: "ambient namespace; ztunnel's stand-in never ready; ambient.istio.io/redirection=pending written through pods/status as istio-cni's agent writes it",
			plant: func(ctx context.Context, f *catFault) error {
				if err := runningReady(ctx, f, amb, appPod("amb-pending", nil, nil)); err != nil {
					return err
				}
				if _, err := catWaitPod(ctx, c, ambAgents, "ztunnel-standin", "running, not ready", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }); err != nil {
					return err
				}
				patch := `{"metadata":{"annotations":{"ambient.istio.io/redirection":"pending"}}}`
				_, err := c.Client.CoreV1().Pods(amb).Patch(ctx, "amb-pending", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
				f.state = "running, redirection pending, ztunnel not ready"
				return err
			}},
		{code: "KM-INIT-007", ns: plain, name: "init-captured", how: "istiod's own injection (classic sidecar, dry run) with a user init container appended after istio-init, as a later webhook appends one; created labelled sidecar.istio.io/inject=false (manually injected)",
			plant: func(ctx context.Context, f *catFault) error {
				tmpl := appPod("init-captured", nil, classic())
				tmpl.Spec.SchedulerName = ""
				injected, err := c.Client.CoreV1().Pods(inj).Create(ctx, tmpl, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				if err != nil {
					return err
				}
				if injected.Annotations["sidecar.istio.io/status"] == "" {
					return fmt.Errorf("the dry run in %s was not injected", inj)
				}
				// The init container calls the node (the kubelet's port) from
				// inside the pod: captured, with no proxy to take it.
				fetch := corev1.Container{Name: "fetch-config", Image: testImage, ImagePullPolicy: corev1.PullNever,
					Env:     []corev1.EnvVar{{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}}},
					Command: []string{"/bin/sh", "-c", `if nc -w 3 "$HOST_IP" 10250 </dev/null; then echo reached; else echo refused; fi > /dev/termination-log`}}
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "init-captured", Annotations: injected.Annotations, Labels: injected.Labels}, Spec: injected.Spec}
				p.Labels["sidecar.istio.io/inject"] = "false"
				p.Spec.InitContainers = append(p.Spec.InitContainers, fetch)
				if err := createPod(ctx, plain, p); err != nil {
					return err
				}
				f.pod = p.Name
				f.state = "fetch-config ran after istio-init, its call refused (captured, no proxy)"
				pod, err := catWaitPod(ctx, c, plain, p.Name, "fetch-config to finish", func(p *corev1.Pod) bool {
					s := catStatus(p, "fetch-config")
					return s != nil && s.State.Terminated != nil
				})
				if err != nil {
					return err
				}
				if msg := catStatus(pod, "fetch-config").State.Terminated.Message; !strings.Contains(msg, "refused") {
					return fmt.Errorf("fetch-config's call to the node was not refused: %q (not captured?)", msg)
				}
				return nil
			}},
	}
}

// faultsStart are the faults of the start stage.
func (b *catBed) faultsStart() []*catFault {
	c, inj, plain, createPod, runningReady, failedAgain, classic, readyDelay := b.c, b.inj, b.plain, b.createPod, b.runningReady, b.failedAgain, catClassic, catReadyDelay
	return []*catFault{
		// ---- start ----
		{code: "KM-START-001", ns: inj, name: "slow-proxy", how: "classic sidecar, no hold, the stand-in proxy ready 6s after it starts (STANDIN_READY_DELAY via proxyMetadata)",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, inj, appPod("slow-proxy", nil, classic("proxy.istio.io/config", readyDelay("6s"))))
			}},
		{code: "KM-START-002", ns: plain, name: "hold-timeout", how: "injected by canary (pod label istio.io/rev=canary: classic, holdApplicationUntilProxyStarts), proxy ready after 90s: pilot-agent wait gives up at 60s",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("hold-timeout", map[string]string{"istio.io/rev": "canary"}, catLean("proxy.istio.io/config", readyDelay("90s")))
				if err := createPod(ctx, plain, p); err != nil {
					return err
				}
				f.pod = p.Name
				msg, err := catWaitEvent(ctx, c, plain, "FailedPostStartHook", "hold-timeout", "")
				f.state = "FailedPostStartHook: " + catShort(msg)
				return err
			}},
		{code: "KM-START-003", ns: inj, name: "never-ready", how: "classic sidecar whose stand-in proxy is never ready (STANDIN_READY_DELAY=24h)",
			plant: func(ctx context.Context, f *catFault) error {
				if err := createPod(ctx, inj, appPod("never-ready", nil, classic("proxy.istio.io/config", readyDelay("24h")))); err != nil {
					return err
				}
				f.pod = "never-ready"
				f.state = "istio-proxy running, not ready, for over 35s"
				_, err := catWaitPod(ctx, c, inj, "never-ready", f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "istio-proxy")
					return catRunningFor(s, 35*time.Second) && !s.Ready
				})
				return err
			}},
		{code: "KM-START-004", ns: inj, name: "proxy-crash", how: "classic sidecar whose proxy exits at start on a bad setting (STANDIN_READY_DELAY=bogus): crash loop",
			plant: func(ctx context.Context, f *catFault) error {
				return failedAgain(ctx, f, inj, appPod("proxy-crash", nil, classic("proxy.istio.io/config", readyDelay("bogus"))), "istio-proxy")
			}},
		{code: "KM-START-005", ns: inj, name: "app-crash", how: "the app exits 1 at once: crash loop",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("app-crash", nil, catLean())
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "echo 'cannot read /etc/app/config' >&2; exit 1"}
				return failedAgain(ctx, f, inj, p, "app")
			}},
		{code: "KM-START-007", ns: inj, name: "classic-job", how: "a Job whose template asks for a classic sidecar (nativeSidecar=false): the job's container exits 0, istio-proxy runs on",
			plant: func(ctx context.Context, f *catFault) error {
				tmpl := appPod("classic-job", map[string]string{"app": "classic-job"}, classic())
				tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
				tmpl.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "echo job done"}
				tmpl.Spec.Containers[0].Ports = nil
				backoff := int32(0)
				job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "classic-job"},
					Spec: batchv1.JobSpec{BackoffLimit: &backoff, Template: corev1.PodTemplateSpec{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}}}
				if _, err := c.Client.BatchV1().Jobs(inj).Create(ctx, job, metav1.CreateOptions{}); err != nil {
					return err
				}
				pod, err := catPodOf(ctx, c, inj, "job-name=classic-job")
				if err != nil {
					return err
				}
				f.pod = pod
				f.state = "the job's container exited 0, istio-proxy still running"
				_, err = catWaitPod(ctx, c, inj, pod, f.state, func(p *corev1.Pod) bool {
					app, proxy := catStatus(p, "app"), catStatus(p, "istio-proxy")
					return app != nil && app.State.Terminated != nil && app.State.Terminated.ExitCode == 0 && proxy != nil && proxy.State.Running != nil
				})
				return err
			}},
		{code: "KM-START-008", ns: inj, name: "reserved-port", how: "the app declares containerPort 15021 and serves on it (the native proxy holds it: the app fails to bind)",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("reserved-port", nil, catLean())
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "mkdir -p /www && exec httpd -f -p 15021 -h /www"}
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http-status", ContainerPort: 15021}}
				return failedAgain(ctx, f, inj, p, "app")
			}},
		{code: "KM-START-009", ns: inj, name: "probe-kept", how: `sidecar.istio.io/rewriteAppHTTPProbers="false" and a tcpSocket readiness probe on port 9999, where nothing listens: the proxy's 15006 answers it`,
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("probe-kept", nil, catLean("sidecar.istio.io/rewriteAppHTTPProbers", "false"))
				p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9999)}}}
				return runningReady(ctx, f, inj, p)
			}},
		{code: "KM-START-010", ns: inj, name: "prestop", how: "classic sidecar; the app has a preStop hook (sleep 5), grace 15s, no EXIT_ON_ZERO_ACTIVE_CONNECTIONS",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("prestop", nil, classic())
				grace := int64(15)
				p.Spec.TerminationGracePeriodSeconds = &grace
				p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}}
				return runningReady(ctx, f, inj, p)
			}},
		{code: "KM-START-011", ns: inj, name: "dns-default", how: "dnsPolicy: Default on an injected pod",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("dns-default", nil, catLean())
				p.Spec.DNSPolicy = corev1.DNSDefault
				return runningReady(ctx, f, inj, p)
			}},
		{code: "KM-START-012", ns: inj, name: "unscheduled", how: "an injected pod no scheduler takes (schedulerName kmesh-unscheduled): Pending",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("unscheduled", nil, catLean())
				p.Spec.SchedulerName = "kmesh-unscheduled"
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod = p.Name
				f.state = "Pending, not scheduled, injected"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					return p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" && p.Annotations["sidecar.istio.io/status"] != ""
				})
				return err
			}},
	}
}

// faultsCapture are the faults of the capture stage.
func (b *catBed) faultsCapture() []*catFault {
	c, inj, live, amb, ambAgents, createPod, runningReady, classic, netAdmin := b.c, b.inj, b.live, b.amb, b.ambAgents, b.createPod, b.runningReady, catClassic, b.netAdmin
	return []*catFault{
		// ---- capture ----
		{code: "KM-CAP-001", ns: live, name: "drift", how: "a running injected pod; a RETURN rule for port 5432 inserted into ISTIO_OUTPUT afterwards (ephemeral container)",
			plant: func(ctx context.Context, f *catFault) error {
				if err := runningReady(ctx, f, live, appPod("drift", nil, catLean())); err != nil {
					return err
				}
				plantRule := `for v in nft legacy; do
  if iptables-$v-save -t nat 2>/dev/null | grep -q '^:ISTIO_OUTPUT'; then
    iptables-$v -t nat -I ISTIO_OUTPUT 1 -p tcp --dport 5432 -j RETURN && echo planted-$v && exit 0
  fi
done
exit 1`
				out, err := catEphemeral(ctx, c, live, "drift", "plant-rule", "/bin/sh", "-c", plantRule)
				if err == nil && !strings.Contains(out, "planted-") {
					err = fmt.Errorf("the extra rule was not planted: %q", out)
				}
				f.state = "an extra rule in ISTIO_OUTPUT (" + strings.TrimSpace(out) + ")"
				return err
			}},
		{code: "KM-CAP-002", ns: inj, name: "as-proxy-uid", how: "the app container runs as uid 1337, the proxy's",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("as-proxy-uid", nil, catLean())
				uid := int64(1337)
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: &uid}
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "mkdir -p /tmp/www && echo hi > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"}
				return runningReady(ctx, f, inj, p)
			}},
		{code: "KM-CAP-009", ns: inj, name: "as-proxy-gid", how: "a Deployment whose app container runs as gid 1337 (runAsGroup), the proxy's",
			plant: func(ctx context.Context, f *catFault) error {
				d := appDeployment(inj, f.name, 1, catLean())
				gid := int64(1337)
				d.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsGroup: &gid}
				if _, err := c.Client.AppsV1().Deployments(inj).Create(ctx, d, metav1.CreateOptions{}); err != nil {
					return err
				}
				pod, err := catPodOf(ctx, c, inj, "app="+f.name)
				if err != nil {
					return err
				}
				f.pod, f.state = pod, "its pod running and ready"
				_, err = catWaitPod(ctx, c, inj, pod, "running and ready", testcluster.Running)
				return err
			}},
		{code: "KM-CAP-010", ns: inj, name: "own-istio-init", how: "a Deployment whose template has an init container of its own named istio-init (a command of its own), which the injector merges over Istio's",
			plant: func(ctx context.Context, f *catFault) error {
				d := appDeployment(inj, f.name, 1, catLean())
				d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: d.Spec.Template.Spec.Containers[0].Image,
					ImagePullPolicy: corev1.PullNever, Command: []string{"/bin/sh", "-c", "echo preparing config"}}}
				if _, err := c.Client.AppsV1().Deployments(inj).Create(ctx, d, metav1.CreateOptions{}); err != nil {
					return err
				}
				pod, err := catPodOf(ctx, c, inj, "app="+f.name)
				if err != nil {
					return err
				}
				f.pod, f.state = pod, "its pod running and ready, with no capture rules"
				_, err = catWaitPod(ctx, c, inj, pod, "running and ready", testcluster.Running)
				return err
			}},
		{code: "KM-CAP-011", ns: inj, name: "agent-only", how: "inject.istio.io/templates=grpc-agent on a plain HTTP app: the agent is injected, no istio-init, no capture",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, inj, appPod("agent-only", nil, catLean("inject.istio.io/templates", "grpc-agent")))
			}},
		{code: "KM-CAP-012", ns: inj, name: "nat-flush", how: "an app init container with NET_ADMIN that flushes the nat table after istio-init wrote the capture rules",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("nat-flush", nil, catLean())
				p.Spec.InitContainers = []corev1.Container{{Name: "net-setup", Image: p.Spec.Containers[0].Image, ImagePullPolicy: corev1.PullNever,
					Command: []string{"/bin/sh", "-c", "iptables -t nat -F"}, SecurityContext: netAdmin}}
				return runningReady(ctx, f, inj, p)
			}},
		{code: "KM-CAP-003", ns: inj, name: "excluded-inbound", how: "traffic.sidecar.istio.io/excludeInboundPorts=8080 on the port the app's container declares (8080), no Service",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, inj, appPod("excluded-inbound", nil, catLean("traffic.sidecar.istio.io/excludeInboundPorts", "8080")))
			}},
		{code: "KM-CAP-008", ns: inj, name: "excluded-cluster", how: "traffic.sidecar.istio.io/excludeOutboundIPRanges=10.0.0.0/8, which holds the test cluster's pod and Service ranges (10.213.77.0/24, 10.213.78.0/24 by default)",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, inj, appPod("excluded-cluster", nil, catLean("traffic.sidecar.istio.io/excludeOutboundIPRanges", "10.0.0.0/8")))
			}},
		{code: "KM-CAP-004", ns: inj, name: "no-interception", how: "sidecar.istio.io/interceptionMode=NONE: injected, no istio-init",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, inj, appPod("no-interception", nil, catLean("sidecar.istio.io/interceptionMode", "NONE")))
			}},
		{code: "KM-CAP-005", ns: live, name: "proxy-gone", how: "classic sidecar whose istio-proxy image is replaced (a container istio-proxy in the pod, image mesh-test) by one that exits at once; istio-init (Istio's image) wrote the rules: 15001/15006 serve nothing",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("proxy-gone", nil, classic())
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: testImage, ImagePullPolicy: corev1.PullNever})
				if err := createPod(ctx, live, p); err != nil {
					return err
				}
				f.pod = p.Name
				f.state = "istio-init completed, istio-proxy exited and was restarted"
				_, err := catWaitPod(ctx, c, live, p.Name, f.state, func(p *corev1.Pod) bool {
					init := catStatus(p, "istio-init")
					return init != nil && init.State.Terminated != nil && init.State.Terminated.ExitCode == 0 && catFailedAgain(catStatus(p, "istio-proxy"))
				})
				return err
			}},
		{code: "KM-CAP-006", ns: amb, name: "amb-unset", how: "ambient namespace, istio-cni's agent stand-in ready, the pod never annotated ambient.istio.io/redirection",
			plant: func(ctx context.Context, f *catFault) error {
				if err := runningReady(ctx, f, amb, appPod("amb-unset", nil, nil)); err != nil {
					return err
				}
				f.state = "running, not set up by istio-cni whose agent is ready"
				_, err := catWaitPod(ctx, c, ambAgents, "istio-cni-node-standin", "ready", testcluster.Running)
				return err
			}},
	}
}

// faultsConnections are the faults of the connections stage.
func (b *catBed) faultsConnections() []*catFault {
	c, inj, live, amb, createPod, createService, createPolicy, runningReady, backendDone := b.c, b.inj, b.live, b.amb, b.createPod, b.createService, b.createPolicy, b.runningReady, b.backendDone
	return []*catFault{
		// ---- connections ----
		{code: "KM-CONN-001", ns: live, name: "bypass", how: "traffic.sidecar.istio.io/excludeOutboundPorts=9090; the app calls the backend on 8080 and 9090 every second",
			plant: func(ctx context.Context, f *catFault) error {
				select {
				case <-backendDone:
				case <-ctx.Done():
				}
				ip := b.backendIP
				if ip == "" {
					return errors.New("the backend it calls does not run")
				}
				p := appPod("bypass", nil, catLean("traffic.sidecar.istio.io/excludeOutboundPorts", "9090"))
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", fmt.Sprintf(
					"while true; do wget -q -O- http://%[1]s:8080/ >/dev/null; wget -q -O- http://%[1]s:9090/ >/dev/null; sleep 1; done", ip)}
				if err := createPod(ctx, live, p); err != nil {
					return err
				}
				f.pod = p.Name
				f.state = "running, calling " + ip + ":9090"
				_, err := catWaitPod(ctx, c, live, p.Name, "running", testcluster.Running)
				return err
			}},
		{code: "KM-CAP-007", ns: live, name: "dns-moved", how: "DNS capture on (proxyMetadata ISTIO_META_DNS_CAPTURE); the app, as root, points the pod's resolv.conf at another server after istio-init wrote the rules for the first",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("dns-moved", nil, catLean("proxy.istio.io/config", `{"proxyMetadata": {"ISTIO_META_DNS_CAPTURE": "true"}}`))
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "echo 'nameserver 10.96.0.99' > /etc/resolv.conf && mkdir -p /www && echo hi > /www/index.html && exec httpd -f -p 8080 -h /www"}
				return runningReady(ctx, f, live, p)
			}},
		{code: "KM-CONN-002", ns: live, name: "localhost-only", how: "the app serves on 127.0.0.1:8080 only, containerPort 8080, no Service",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("localhost-only", nil, catLean())
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "mkdir -p /www && echo hi > /www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /www"}
				return runningReady(ctx, f, live, p)
			}},
		{code: "KM-CONN-003", ns: inj, name: "sniffed", how: "a Service port named db (5432 → 8080), no appProtocol",
			plant: func(ctx context.Context, f *catFault) error {
				if err := createService(ctx, inj, catService("sniffed", "sniffed", catPort("db", 5432, 8080, ""))); err != nil {
					return err
				}
				return runningReady(ctx, f, inj, appPod("sniffed", nil, catLean()))
			}},
		{code: "KM-CONN-006", ns: inj, name: "server-first", how: "a Service port named db (3306 → 3306), no appProtocol: MySQL's port",
			plant: func(ctx context.Context, f *catFault) error {
				if err := createService(ctx, inj, catService("server-first", "server-first", catPort("db", 3306, 3306, ""))); err != nil {
					return err
				}
				return runningReady(ctx, f, inj, appPod("server-first", nil, catLean()))
			}},
		{code: "KM-CONN-004", ns: inj, name: "proto", how: "a Deployment; Services proto-http (8080/TCP, http-web) and proto-udp (8080/UDP, udp-raw) select it",
			plant: func(ctx context.Context, f *catFault) error {
				for _, s := range []*corev1.Service{
					catService("proto-http", "proto", catPort("http-web", 8080, 8080, corev1.ProtocolTCP)),
					catService("proto-udp", "proto", catPort("udp-raw", 8080, 8080, corev1.ProtocolUDP)),
				} {
					if err := createService(ctx, inj, s); err != nil {
						return err
					}
				}
				return deploymentRunning(ctx, c, f, inj)
			}},
		{code: "KM-CONN-005", ns: inj, name: "twoports", how: "a Deployment; Services twoports-a (80 → 8080) and twoports-b (8080 → 8080) select it",
			plant: func(ctx context.Context, f *catFault) error {
				for _, s := range []*corev1.Service{
					catService("twoports-a", "twoports", catPort("http-a", 80, 8080, "")),
					catService("twoports-b", "twoports", catPort("http-b", 8080, 8080, "")),
				} {
					if err := createService(ctx, inj, s); err != nil {
						return err
					}
				}
				return deploymentRunning(ctx, c, f, inj)
			}},
		{code: "KM-CONN-007", ns: inj, name: "unnamed-target", how: "a Service port 8080 whose targetPort is the name web, while the pod's container declares http (8080)",
			plant: func(ctx context.Context, f *catFault) error {
				s := catService("unnamed-target", "unnamed-target", corev1.ServicePort{Name: "http", Port: 8080, TargetPort: intstr.FromString("web")})
				if err := createService(ctx, inj, s); err != nil {
					return err
				}
				return runningReady(ctx, f, inj, appPod("unnamed-target", nil, catLean()))
			}},
		{code: "KM-CONN-009", ns: inj, name: "mixed-debug", how: "a Service selecting app=mixed over an injected pod and a pod with the same label and sidecar.istio.io/inject=false (a debug pod): part of the Service's traffic skips the mesh",
			plant: func(ctx context.Context, f *catFault) error {
				if err := createService(ctx, inj, catService("mixed", "mixed", corev1.ServicePort{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)})); err != nil {
					return err
				}
				if err := runningReady(ctx, f, inj, appPod("mixed", map[string]string{"app": "mixed"}, catLean())); err != nil {
					return err
				}
				return runningReady(ctx, f, inj, appPod(f.name, map[string]string{"app": "mixed", "sidecar.istio.io/inject": "false"}, nil))
			}},
		{code: "KM-CONN-008", ns: amb, name: "hbone-blocked", how: "an ambient pod and a NetworkPolicy selecting it (app=hbone-blocked) that admits ingress on TCP 8080 only, not HBONE's 15008",
			plant: func(ctx context.Context, f *catFault) error {
				if err := createPolicy(ctx, amb, catPolicy(f.name, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
					[]networkingv1.NetworkPolicyIngressRule{{Ports: catPolicyPorts(corev1.ProtocolTCP, 8080)}}, nil)); err != nil {
					return err
				}
				return runningReady(ctx, f, amb, appPod(f.name, nil, nil))
			}},
		{code: "KM-CONN-010", ns: inj, name: "pinned-v2", how: "a sidecar pod labelled app=pinned-v2 version=v2 and a Service selecting app=pinned-v2 service.istio.io/canonical-revision=v1 (the label the injector sets from version)",
			plant: func(ctx context.Context, f *catFault) error {
				svc := catService(f.name, f.name, corev1.ServicePort{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)})
				svc.Spec.Selector["service.istio.io/canonical-revision"] = "v1"
				if err := createService(ctx, inj, svc); err != nil {
					return err
				}
				return runningReady(ctx, f, inj, appPod(f.name, map[string]string{"app": f.name, "version": "v2"}, catLean()))
			}},
		{code: "KM-CONN-011", ns: inj, name: "stale-hash", how: "a sidecar pod labelled app=stale-hash pod-template-hash=86d465c74f (its ReplicaSet's) and a Service selecting app=stale-hash pod-template-hash=db9fbd689 (an older template's, copied from a pod)",
			plant: func(ctx context.Context, f *catFault) error {
				svc := catService(f.name, f.name, corev1.ServicePort{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)})
				svc.Spec.Selector["pod-template-hash"] = "db9fbd689"
				if err := createService(ctx, inj, svc); err != nil {
					return err
				}
				return runningReady(ctx, f, inj, appPod(f.name, map[string]string{"app": f.name, "pod-template-hash": "86d465c74f"}, catLean()))
			}},
		{code: "KM-START-016", ns: inj, name: "no-istiod", how: "a sidecar pod and a NetworkPolicy selecting it (app=no-istiod) with policyTypes Egress that admits DNS (UDP and TCP 53) only, not istiod's 15012",
			plant: func(ctx context.Context, f *catFault) error {
				if err := createPolicy(ctx, inj, catPolicy(f.name, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, nil,
					[]networkingv1.NetworkPolicyEgressRule{{Ports: append(catPolicyPorts(corev1.ProtocolUDP, 53), catPolicyPorts(corev1.ProtocolTCP, 53)...)}})); err != nil {
					return err
				}
				if err := createPod(ctx, inj, appPod(f.name, nil, catLean())); err != nil {
					return err
				}
				// Ready or not (a network plugin that enforces the policy
				// keeps the proxy from istiod): the proxy has started.
				f.pod, f.state = f.name, "istio-proxy started"
				_, err := catWaitPod(ctx, c, inj, f.name, f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "istio-proxy")
					return s != nil && s.State.Running != nil
				})
				return err
			}},
	}
}
