package diagnose

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// checkCase is one planted fault for one check: the facts, and what the
// finding must say.
type checkCase struct {
	code string
	// facts builds the facts; the default is a healthy injected pod.
	pod      func(p *corev1.Pod)
	inj      func(r *injection.InjectionReport)
	events   []corev1.Event
	logs     map[string]startup.LogTail
	services []corev1.Service
	// missing are the Services that miss the pod for a label the injector
	// sets (Facts.ServicesMissing).
	missing []corev1.Service
	// meshed are the pods in the mesh each Service also selects.
	meshed   ServiceMembers
	policies []networkingv1.NetworkPolicy
	capture  *capture.CaptureReport
	noPod    string
	workload *WorkloadState
	owner    *WorkloadState // the pod's workload, as read
	// files: a manifest read from these files (no pod, no startup).
	files []string
	// ranges are the cluster's pod and Service ranges (kindRanges when nil).
	ranges []ClusterRange
	// room is what the nodes have left (Facts.NodeRoom).
	room NodeRoom
	now  time.Duration
	// status is the finding's, evidence and fix what they contain.
	status, evidence, fix string
}

func svc(name string, ports ...corev1.ServicePort) corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}, Spec: corev1.ServiceSpec{Ports: ports}}
}

func sport(name string, port, target int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: intstr.FromInt32(target), Protocol: corev1.ProtocolTCP}
}

var checkCases = []checkCase{
	{code: CodeProxyConfigKey, pod: func(p *corev1.Pod) {
		yes := true
		p.Labels = map[string]string{"app": "web", "pod-template-hash": "5d9f"}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d9f", Controller: &yes}}
		p.Annotations = map[string]string{"proxy.istio.io/config": `{"holdApplicationUntilProxyStart": true, "concurrency": 2}`}
	}, status: Warning, evidence: "holdApplicationUntilProxyStart (did you mean holdApplicationUntilProxyStarts?)",
		fix: `kubectl patch deployment/web -n shop --type=merge -p '{"spec":{"template":{"metadata":{"annotations":{"proxy.istio.io/config":"{\"holdApplicationUntilProxyStarts\": true, \"concurrency\": 2}"}}}}}'`},
	{code: CodeNeverInjected, pod: func(p *corev1.Pod) {
		p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
		p.Spec.Containers, p.Status.ContainerStatuses = p.Spec.Containers[1:], p.Status.ContainerStatuses[1:]
		p.Labels = map[string]string{"app": "web", "kmesh.demo/never-inject": "yes", "pod-template-hash": "5d9f"}
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d9f", Controller: &yes}}
	}, inj: func(r *injection.InjectionReport) {
		no := false
		r.Injected, r.Expected = &no, &no
		r.Verdict = "Not injected, and it would not be if re-created: the injector's neverInjectSelector kmesh.demo/never-inject matches the pod"
		r.Factors = nil // a sweep's report: the verdict says it
	}, status: Warning, evidence: "neverInjectSelector matches the pod (kmesh.demo/never-inject)", fix: `"sidecar.istio.io/inject":"true"`},
	{code: CodeSidecarMissing, pod: func(p *corev1.Pod) { p.Spec.InitContainers, p.Spec.Containers = nil, p.Spec.Containers[1:] },
		inj: func(r *injection.InjectionReport) {
			no, yes := false, true
			r.Injected, r.Mismatch, r.Verdict, r.Fix = &no, &yes, "Not injected, but it would be if re-created now", "kubectl rollout restart deployment/web -n shop"
		}, status: Fail, evidence: "Not injected", fix: "rollout restart"},
	{code: CodeInjectedDifferent, inj: func(r *injection.InjectionReport) {
		yes := true
		r.Mismatch, r.Verdict, r.Fix = &yes, "Injected by revision canary, but re-created now it would be injected by revision default.", "kubectl rollout restart deployment/web -n shop"
	}, status: Fail, evidence: "canary"},
	{code: CodeConflictingLabels, inj: func(r *injection.InjectionReport) {
		r.Warn(injection.WarnConflictingLabels, "namespace shop has both istio-injection and istio.io/rev; istio.io/rev is ignored")
	}, status: Warning, evidence: "both istio-injection and istio.io/rev"},
	{code: CodeWebhookUnreachable, inj: func(r *injection.InjectionReport) {
		r.CreationBlocked, r.BlockedBy, r.Verdict, r.Fix = true, injection.BlockedWebhook, "Pods cannot be created: webhook x cannot be called", "kubectl get endpointslices -n istio-system"
	}, status: Fail, evidence: "cannot be called"},
	{code: CodeOverlapping, inj: func(r *injection.InjectionReport) {
		r.Warn(injection.WarnOverlapping, "more than one Istio webhook matches (a, b)")
	}, status: Warning, evidence: "more than one"},
	{code: CodeImageAuto, pod: func(p *corev1.Pod) {
		p.Spec.InitContainers = nil
		p.Spec.Containers[0].Image = "auto"
	}, status: Fail, evidence: `image "auto"`, fix: "sidecar.istio.io/inject"},
	{code: CodeAnnotationRefused, inj: func(r *injection.InjectionReport) {
		r.CreationBlocked, r.BlockedBy, r.Verdict, r.Fix = true, injection.BlockedAnnotation, "Pods cannot be created: istiod refuses the pod at admission: invalid value", "kubectl patch deployment/web"
	}, status: Fail, evidence: "istiod refuses"},
	{code: CodeUnknownAnnotation, pod: func(p *corev1.Pod) {
		p.Annotations = map[string]string{"traffic.sidecar.istio.io/excludeOutboundPort": "9090", "networking.istio.io/exportTo": ".", "example.com/x": "y"}
	}, status: Warning, evidence: "did you mean traffic.sidecar.istio.io/excludeOutboundPorts", fix: "rename"},
	{code: CodeSkippedByInjector, inj: func(r *injection.InjectionReport) {
		r.Warn(injection.WarnInjectorSkips, "a sidecar is asked for, but istiod never injects this pod: it uses the node's network (hostNetwork)")
	}, status: Warning, evidence: "hostNetwork"},
	{code: CodeAskedNotDone, inj: func(r *injection.InjectionReport) {
		r.Warn(injection.WarnAskedNotDone, "injection is asked for, but it does not happen: a mistake to fix, not a choice")
	}, status: Fail, evidence: "asked for"},
	{code: CodeQuota, inj: func(r *injection.InjectionReport) {
		r.CreationBlocked, r.BlockedBy, r.Verdict = true, injection.RefusalOf(`pods "web-1" is forbidden: exceeded quota: q, requested: limits.memory=1Gi`), "Pods cannot be created: exceeded quota"
		r.Fix = "kubectl patch deployment/web"
	}, status: Fail, evidence: "exceeded quota"},
	{code: CodePodSecurity, inj: func(r *injection.InjectionReport) {
		r.CreationBlocked, r.BlockedBy = true, injection.RefusalOf(`pods "web-1" is forbidden: violates PodSecurity "baseline:latest": non-default capabilities (container "istio-init" must not include "NET_ADMIN", "NET_RAW" in securityContext.capabilities.add)`)
		r.Verdict, r.Fix = "Pods cannot be created: violates PodSecurity", "kubectl label namespace shop pod-security.kubernetes.io/enforce=privileged --overwrite"
	}, status: Fail, evidence: "PodSecurity"},
	{code: CodeInitNoNetAdmin, pod: initFailed("could not fetch rule set generation id: Permission denied (you must be root)"), status: Fail, evidence: "NET_ADMIN"},
	{code: CodeInitBadArgument, pod: initFailed("iptables-restore: invalid port/service `http' specified"), status: Fail, evidence: "port"},
	{code: CodeInitFailed, pod: initFailed("iptables-restore: line 3 failed"), status: Fail, evidence: "istio-init"},
	{code: CodeValidationFailed, pod: func(p *corev1.Pod) {
		p.Spec.InitContainers[0].Name = "istio-validation"
		p.Status.InitContainerStatuses[0] = corev1.ContainerStatus{Name: "istio-validation", RestartCount: 2,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 126, Reason: "Error", StartedAt: at(1), FinishedAt: at(2)}}}
		p.Status.Phase, p.Status.ContainerStatuses = corev1.PodPending, nil
	}, status: Fail, evidence: "istio-validation"},
	{code: CodeStuckInInit, pod: func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "wait-db"})
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: "wait-db", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(3)}}})
		p.Status.Phase, p.Status.ContainerStatuses = corev1.PodPending, nil
	}, now: 5 * time.Minute, status: Fail, evidence: "wait-db"},
	{code: CodeAmbientSetup, pod: func(p *corev1.Pod) {
		p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
		p.Spec.Containers, p.Status.ContainerStatuses = p.Spec.Containers[1:2], nil
		p.Status.Phase = corev1.PodPending
		p.Labels = map[string]string{"istio.io/dataplane-mode": "ambient"}
	}, events: []corev1.Event{{Reason: "FailedCreatePodSandBox", Count: 3, LastTimestamp: at(30), Message: `plugin type="istio-cni" name="istio-cni" failed (add): failed to contact node Istio CNI agent`}},
		inj: func(r *injection.InjectionReport) {
			no := false
			r.Injected, r.Expected, r.Ambient = &no, &no, true
		}, status: Fail, evidence: "istio-cni"},
	{code: CodeInitCaptured, pod: func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "fetch-config"})
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: "fetch-config",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: at(2), FinishedAt: at(3)}}})
	}, status: Warning, evidence: "fetch-config"},
	{code: CodeAppBeforeProxy, pod: func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = nil
		p.Status.ContainerStatuses[0].State.Running.StartedAt = at(3)
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at(30)}}
	}, events: []corev1.Event{{Reason: "Unhealthy", Count: 5, LastTimestamp: at(20), Message: "Readiness probe failed", InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{istio-proxy}"}}},
		status: Warning, evidence: "before"},
	{code: CodeHoldTimedOut, events: []corev1.Event{{Reason: "FailedPostStartHook", Count: 2, LastTimestamp: at(70),
		Message: "PostStartHookError: command 'pilot-agent wait' exited with 255: timeout waiting for Envoy proxy to become ready", InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{istio-proxy}"}}},
		status: Fail, evidence: "pilot-agent wait", fix: "-c istio-proxy"},
	{code: CodeProxyNotReady, pod: func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = false }, now: 10 * time.Minute, status: Fail, evidence: "istio-proxy"},
	{code: CodeProxyFailing, pod: crashing(0), now: 2 * time.Minute, status: Fail, evidence: "istio-proxy"},
	{code: CodeAppFailing, pod: crashing(1), now: 2 * time.Minute, status: Fail, evidence: "app"},
	// Restarted, running ready again but the pod is not Ready: past the
	// back-off reset, a warning.
	{code: CodeAppFailing, pod: func(p *corev1.Pod) {
		p.Status.ContainerStatuses[1].RestartCount = 1
		p.Status.ContainerStatuses[1].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: at(3), FinishedAt: at(4)}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: at(3)}}
	}, now: startup.BackOffReset + time.Hour, status: Warning, evidence: "restarted"},
	// Issue #41: crashed once at start, Ready for 7 minutes since: the
	// restart is evidence (info), with the kubelet's termination message.
	{code: CodeAppFailing, pod: func(p *corev1.Pod) {
		p.Status.ContainerStatuses[1].RestartCount = 1
		p.Status.ContainerStatuses[1].State.Running.StartedAt = at(30)
		p.Status.ContainerStatuses[1].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			Message: "database not reachable yet", StartedAt: at(3), FinishedAt: at(4)}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(40)}}
	}, now: 7*time.Minute + 40*time.Second, status: Info, evidence: "app restarted 1 time, last exit 1 (Error): database not reachable yet; running and ready since"},
	// The proxy restarted once, ready since: info, its previous log's last
	// line (read, with no termination message).
	{code: CodeProxyFailing, pod: func(p *corev1.Pod) {
		p.Status.ContainerStatuses[0].RestartCount = 1
		p.Status.ContainerStatuses[0].LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 255, Reason: "Error", StartedAt: at(3), FinishedAt: at(4)}}
	}, logs: map[string]startup.LogTail{"istio-proxy": {Previous: []string{"warn xds: connection refused", "error envoy: exiting", ""}}},
		now: 2 * time.Minute, status: Info, evidence: "istio-proxy restarted 1 time, last exit 255 (Error); its log then ended: error envoy: exiting"},
	{code: CodeJobClassicSidecar, pod: func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "nightly", Controller: &yes}}
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
	}, status: Fail, evidence: "Job"},
	// A bare pod run once (no Job) with a classic sidecar: the same fault.
	{code: CodeJobClassicSidecar, pod: func(p *corev1.Pod) {
		p.OwnerReferences = nil
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
	}, status: Fail, evidence: "restartPolicy Never"},
	// A CronJob's Job's pod: owned by the Job, as any Job's.
	{code: CodeJobClassicSidecar, pod: func(p *corev1.Pod) {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "nightly-29012345", Controller: &yes}}
		p.Labels = map[string]string{"batch.kubernetes.io/job-name": "nightly-29012345", "batch.kubernetes.io/controller-uid": "u"}
		p.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	}, status: Fail, evidence: "Job's pod"},
	{code: CodeReservedPort, pod: func(p *corev1.Pod) {
		p.Spec.Containers[1].Ports = []corev1.ContainerPort{{ContainerPort: 15021}}
	}, status: Fail, evidence: "port 15021"},
	{code: CodeProbeNotRewritten, pod: func(p *corev1.Pod) {
		p.Annotations = map[string]string{"sidecar.istio.io/rewriteAppHTTPProbers": "false"}
		p.Spec.Containers[1].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
	}, status: Warning, evidence: "TCP 8080"},
	{code: CodeShutdownOrder, pod: func(p *corev1.Pod) {
		p.Spec.Containers[1].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "10"}}}}
	}, status: Warning, evidence: "preStop"},
	{code: CodeDNSPolicy, pod: func(p *corev1.Pod) { p.Spec.DNSPolicy = corev1.DNSDefault }, status: Warning, evidence: "dnsPolicy is Default"},
	{code: CodeNotRunning, pod: func(p *corev1.Pod) {
		p.Spec.NodeName, p.Status = "", corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: "Unschedulable", Message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."}}}
	}, status: Fail, evidence: "the scheduler cannot place the pod: Unschedulable: 0/1 nodes are available: 1 node(s) didn't match", fix: "describe pod"},
	{code: CodeWorkloadShort, workload: &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "web", Desired: 2, Since: t0,
		Conditions: []string{`ReplicaFailure (FailedCreate): pods "web-5d8f9-" is forbidden: error looking up service account shop/web-sa: serviceaccount "web-sa" not found`},
		Events:     []string{`FailedCreate (12×): Error creating: pods "web-5d8f9-" is forbidden: error looking up service account shop/web-sa: serviceaccount "web-sa" not found`}},
		status: Fail, evidence: `deployment/web wants 2 pods and has 0; ReplicaFailure (FailedCreate): pods "web-5d8f9-" is forbidden`, fix: "kubectl create serviceaccount web-sa -n shop"},
	// A rollout stuck on its newest ReplicaSet, the old pods serving: the
	// refusal, the Progressing condition, and the fix the refusal calls for.
	{code: CodeWorkloadShort, workload: &WorkloadState{Kind: "Deployment", Namespace: "shop", Name: "web", Desired: 2, Pods: 2, Since: t0,
		Rollout: "0 pods of its newest ReplicaSet web-7c9d8 exist, of 2 wanted", NewReplicaSet: "web-7c9d8",
		Progressing: `Progressing=True (ReplicaSetUpdated): ReplicaSet "web-7c9d8" is progressing.`,
		Conditions:  []string{`ReplicaFailure (FailedCreate): pods "web-7c9d8-" is forbidden: error looking up service account shop/web-v2: serviceaccount "web-v2" not found`},
		Events:      []string{`FailedCreate (9×): Error creating: pods "web-7c9d8-" is forbidden: error looking up service account shop/web-v2: serviceaccount "web-v2" not found`}},
		status: Fail, evidence: `deployment/web's rollout is stuck: 0 pods of its newest ReplicaSet web-7c9d8 exist, of 2 wanted; its old pods are diagnosed in their own rows; ReplicaFailure (FailedCreate): pods "web-7c9d8-" is forbidden: error looking up service account shop/web-v2: serviceaccount "web-v2" not found; Progressing=True (ReplicaSetUpdated)`,
		fix: "kubectl create serviceaccount web-v2 -n shop"},
	{code: CodeJobFailed, workload: &WorkloadState{Kind: "Job", Namespace: "shop", Name: "migrate", Desired: 0, Since: t0,
		Failed:      "Failed (BackoffLimitExceeded): Job has reached the specified backoff limit",
		PodFailures: []string{"migrate-x7k2p: app failed: exit 2 (Error); not restarted yet: its log ends: FATAL: password authentication failed"}},
		status: Fail, evidence: "job/migrate failed: Failed (BackoffLimitExceeded): Job has reached the specified backoff limit; its pods: migrate-x7k2p: app failed: exit 2 (Error); not restarted yet: its log ends: FATAL: password authentication failed",
		fix: "kubectl logs job/migrate -n shop"},
	{code: CodeInitContainerFailed, pod: func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "migrate"})
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, corev1.ContainerStatus{Name: "migrate", RestartCount: 3,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", StartedAt: at(10), FinishedAt: at(11)}}})
		p.Status.Phase, p.Status.ContainerStatuses = corev1.PodPending, nil
	}, logs: map[string]startup.LogTail{"migrate": {Previous: []string{"connecting to db:5432", "dial tcp 10.0.0.7:5432: connect: connection refused"}}},
		now: 5 * time.Minute, status: Fail, evidence: "init container migrate failed: exit 2 (Error); restarted 3 times, waiting (CrashLoopBackOff); its log ends: dial tcp 10.0.0.7:5432: connect: connection refused. istio-init captured", fix: "sidecar.istio.io/nativeSidecar"},
	{code: CodeCannotStart, pod: func(p *corev1.Pod) {
		p.Status.InitContainerStatuses[0] = corev1.ContainerStatus{Name: "istio-init", Image: "kmesh.local/nope:v1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: `Container image "kmesh.local/nope:v1" is not present with pull policy of Never`}}}
		p.Annotations = map[string]string{"sidecar.istio.io/proxyImage": "kmesh.local/nope:v1", "sidecar.istio.io/proxyCPU": "10m"} // the image's annotation only is named
		p.Status.Phase, p.Status.ContainerStatuses = corev1.PodPending, nil
	}, now: 3 * time.Minute, status: Fail, evidence: `init container istio-init cannot start: ErrImageNeverPull: Container image "kmesh.local/nope:v1" is not present with pull policy of Never; istio-init was added by Istio's injector, set by the pod's sidecar.istio.io/proxyImage="kmesh.local/nope:v1"`,
		fix: "sidecar.istio.io/proxyImage"},
	{code: CodePodSetup, pod: func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "istio-init", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}}
		p.Status.ContainerStatuses = nil
	}, events: []corev1.Event{{Type: corev1.EventTypeWarning, Reason: "FailedMount", Count: 9, LastTimestamp: at(100),
		Message: `MountVolume.SetUp failed for volume "creds" : secret "db-credentials" not found`}},
		now: 5 * time.Minute, status: Fail, evidence: `none of its containers (istio-init included) has run: FailedMount (9×): MountVolume.SetUp failed for volume "creds" : secret "db-credentials" not found`,
		fix: "kubectl create secret generic db-credentials -n shop"},
	{code: CodePodNotReady, pod: func(p *corev1.Pod) {
		p.Status.ContainerStatuses[1].Ready = false
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady", Message: "containers with unready status: [app]", LastTransitionTime: at(5)}}
	}, events: []corev1.Event{{Type: corev1.EventTypeWarning, Reason: "Unhealthy", Message: "Readiness probe failed: HTTP probe failed with statuscode: 503", Count: 40, LastTimestamp: at(200),
		InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{app}"}}},
		now: 5 * time.Minute, status: Fail, evidence: "not Ready for 4m55s (ContainersNotReady: containers with unready status: [app]); events: Unhealthy (40×): Readiness probe failed: HTTP probe failed with statuscode: 503; " + noMeshCause, fix: "app's readiness probe fails"},
	{code: CodeAmbientWaitZtunnel, pod: func(p *corev1.Pod) {
		p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
		p.Spec.Containers, p.Status.ContainerStatuses = p.Spec.Containers[1:], p.Status.ContainerStatuses[1:]
		p.Annotations = map[string]string{"ambient.istio.io/redirection": "pending"}
		p.Labels = map[string]string{"istio.io/dataplane-mode": "ambient"}
	}, inj: func(r *injection.InjectionReport) {
		no := false
		r.Injected, r.Expected, r.Ambient = &no, &no, true
	}, status: Fail, evidence: "pending"},
	{code: CodeRulesDrift, capture: &capture.CaptureReport{Expected: "x", Drift: &capture.Drift{Missing: []string{"-A ISTIO_OUTPUT -j RETURN"}}}, status: Fail, evidence: "1 rules missing", fix: "kubectl delete pod web-1 -n shop"},
	{code: CodeProxyUID, pod: func(p *corev1.Pod) {
		uid := int64(1337)
		p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{RunAsUser: &uid}
	}, status: Fail, evidence: "container app runs as uid 1337", fix: "runAsUser of container app to another uid"},
	{code: CodeInboundExcluded, pod: func(p *corev1.Pod) {
		p.Annotations = map[string]string{"traffic.sidecar.istio.io/excludeInboundPorts": "8080"}
	}, services: []corev1.Service{svc("web", sport("http", 80, 8080))}, status: Warning, evidence: "port 8080 (Service web port 80) is in traffic.sidecar.istio.io/excludeInboundPorts"},
	// No Service: the port the app's container declares is meant for traffic.
	{code: CodeInboundExcluded, pod: func(p *corev1.Pod) {
		p.Annotations = map[string]string{"traffic.sidecar.istio.io/excludeInboundPorts": "8080"}
		p.Spec.Containers[1].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	}, status: Warning, evidence: "port 8080 (declared by container app) is in traffic.sidecar.istio.io/excludeInboundPorts", fix: "excludeInboundPorts"},
	{code: CodeInboundExcluded, pod: func(p *corev1.Pod) {
		p.Annotations = map[string]string{"traffic.sidecar.istio.io/includeInboundPorts": "9090"}
		p.Spec.Containers[1].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}}
	}, status: Warning, evidence: `port 8080 (declared by container app) is not in traffic.sidecar.istio.io/includeInboundPorts "9090"`, fix: "includeInboundPorts"},
	// The status port on the app's port: istio-init's -d has it.
	{code: CodeInboundExcluded, pod: func(p *corev1.Pod) {
		deploymentPod(p)
		p.Annotations = map[string]string{"status.sidecar.istio.io/port": "8080"}
		p.Spec.Containers[1].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	}, status: Fail, evidence: "port 8080 (declared by container app) is the proxy's status port",
		fix: `kubectl patch deployment/web -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/status.sidecar.istio.io~1port"}]'`},
	{code: CodeInterceptionNone, pod: func(p *corev1.Pod) {
		p.Annotations = map[string]string{"sidecar.istio.io/interceptionMode": "NONE"}
		p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
	}, status: Warning, evidence: "NONE"},
	{code: CodeProxyNotListening, capture: &capture.CaptureReport{Expected: "x", Drift: &capture.Drift{}, Dumps: redirecting(),
		Listeners: capture.ParseListeners(listening("00000000:1F90"))}, status: Fail, evidence: "port 15001 and 15006"},
	{code: CodeDNSResolverMissed, capture: &capture.CaptureReport{Expected: "x", Drift: &capture.Drift{}, Dumps: dnsRules(), Nameservers: []string{"10.96.0.99"}},
		status: Warning, evidence: "a query to 10.96.0.99", fix: "kubectl delete pod web-1 -n shop"},
	{code: CodeAmbientNotCaptured, pod: func(p *corev1.Pod) {
		p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
		p.Spec.Containers, p.Status.ContainerStatuses = p.Spec.Containers[1:], p.Status.ContainerStatuses[1:]
	}, inj: func(r *injection.InjectionReport) {
		no := false
		r.Injected, r.Expected, r.Ambient, r.AmbientCapture, r.Verdict = &no, &no, true, injection.AmbientNotSetUp, "Enrolled in ambient mode, but istio-cni has not set it up"
		r.Fix = "kubectl delete pod web-1 -n shop"
	}, status: Fail, evidence: "istio-cni has not set it up"},
	{code: CodeBypassing, capture: &capture.CaptureReport{Expected: "x", Drift: &capture.Drift{},
		Connections: []capture.Connection{{Flow: capture.Flow{Proto: "tcp"}, Class: capture.Bypassing}}}, status: Fail, evidence: "bypass"},
	{code: CodeLocalhostListener, services: []corev1.Service{svc("web", sport("http", 80, 8080))},
		capture: &capture.CaptureReport{Expected: "x", Drift: &capture.Drift{}, Dumps: redirecting(),
			Listeners: capture.ParseListeners(listening("0100007F:1F90", "00000000:3A99", "00000000:3A9E"))}, status: Fail, evidence: "port 8080 (Service web port 80) listens on 127.0.0.1 only"},
	// No Service: containerPort 8080 is meant to receive traffic.
	{code: CodeLocalhostListener, pod: func(p *corev1.Pod) { p.Spec.Containers[1].Ports = []corev1.ContainerPort{{ContainerPort: 8080}} },
		capture: &capture.CaptureReport{Expected: "x", Drift: &capture.Drift{}, Dumps: redirecting(),
			Listeners: capture.ParseListeners(listening("0100007F:1F90", "00000000:3A99", "00000000:3A9E"))}, status: Fail, evidence: "port 8080 (declared by container app) listens on 127.0.0.1 only"},
	{code: CodeProtocolUndeclared, services: []corev1.Service{svc("db", sport("db", 5432, 5432))}, status: Info, evidence: "Service db port 5432 db"},
	{code: CodeServerFirst, services: []corev1.Service{svc("db", sport("db", 3306, 3306))}, status: Warning,
		evidence: "Service db port 3306 → 3306 (name db) declares no protocol; port 3306 usually carries MySQL",
		fix:      `kubectl patch service db -n shop --type=json -p '[{"op":"add","path":"/spec/ports/0/appProtocol","value":"tcp"}]'`},
	// The target port is server-first, the Service port is not; the second port of the Service.
	{code: CodeServerFirst, services: []corev1.Service{svc("mail", sport("http", 80, 8080), sport("relay", 2525, 25))}, status: Warning,
		evidence: "Service mail port 2525 → 25 (name relay) declares no protocol; port 25 usually carries SMTP", fix: `"path":"/spec/ports/1/appProtocol"`},
	// No Service: the container declares a server-first port.
	{code: CodeServerFirst, pod: func(p *corev1.Pod) { p.Spec.Containers[1].Ports = []corev1.ContainerPort{{ContainerPort: 4222}} }, status: Warning,
		evidence: "container app declares port 4222, which usually carries NATS", fix: "appProtocol: tcp"},
	{code: CodeClusterRangesBypass, pod: func(p *corev1.Pod) {
		yes := true
		p.Labels = map[string]string{"pod-template-hash": "5d8f9"}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d8f9", Controller: &yes}}
		p.Annotations = map[string]string{"traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.0.0.0/8"}
	}, status: Warning,
		evidence: "annotation traffic.sidecar.istio.io/excludeOutboundIPRanges excludes 10.0.0.0/8, which covers the cluster's pod range 10.244.0.0/24 (node node-1's podCIDRs), pod range 10.244.1.0/24 (node node-2's podCIDRs) and Service range 10.96.0.0/16",
		fix:      `kubectl patch deployment/web -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/traffic.sidecar.istio.io~1excludeOutboundIPRanges"}]'   # or narrow it to exclude only what is meant to bypass the proxy, none of 10.244.0.0/24, 10.244.1.0/24, 10.96.0.0/16`},
}

// kindRanges are a kind cluster's: pods in 10.244.0.0/16, one /24 per
// node, Services in 10.96.0.0/16.
func kindRanges() []ClusterRange {
	return []ClusterRange{
		{Prefix: netip.MustParsePrefix("10.244.0.0/24"), Pods: true, From: "node node-1's podCIDRs"},
		{Prefix: netip.MustParsePrefix("10.244.1.0/24"), Pods: true, From: "node node-2's podCIDRs"},
		{Prefix: netip.MustParsePrefix("10.96.0.0/16"), From: "ServiceCIDR kubernetes"},
	}
}

// istioInitArgs gives the pod's istio-init the injector's arguments, with
// the outbound ranges given (the mesh-wide values, no annotation).
func istioInitArgs(include, exclude string) func(p *corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers[0].Args = []string{"istio-iptables", "-p", "15001", "-z", "15006", "-u", "1337", "-m", "REDIRECT",
			"-i", include, "-x", exclude, "-b", "*", "-d", "15090,15021,15020"}
	}
}

// The cluster's ranges against outbound capture: what leaves them out
// fires; what leaves out only other addresses, or one address, does not;
// ranges that cannot be read are unknown, with the permission; the pod's
// own IP stands in for pod ranges no node publishes.
func TestClusterRangesBypass(t *testing.T) {
	excl := func(v string) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Annotations = map[string]string{"traffic.sidecar.istio.io/excludeOutboundIPRanges": v}
		}
	}
	incl := func(v string) func(p *corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Annotations = map[string]string{"traffic.sidecar.istio.io/includeOutboundIPRanges": v}
		}
	}
	servicesOnly := []ClusterRange{{Prefix: netip.MustParsePrefix("10.96.0.0/16"), From: "ServiceCIDR kubernetes"}}
	cases := []struct {
		name     string
		pod      func(p *corev1.Pod)
		ranges   []ClusterRange
		unknown  string
		status   string // "" for no finding
		evidence string
	}{
		{name: "another network excluded", pod: excl("192.168.0.0/16,172.16.0.0/12")},
		{name: "the API server's address alone excluded", pod: excl("10.96.0.1/32"), ranges: servicesOnly},
		{name: "includes covering every range, in halves", pod: incl("10.244.0.0/17,10.244.128.0/17,10.96.0.0/16")},
		{name: "include * with nothing excluded", pod: incl("*")},
		{name: "a Service range excluded", pod: excl("10.96.0.0/12"), status: Warning, evidence: "covers the cluster's Service range 10.96.0.0/16 (ServiceCIDR kubernetes)"},
		{name: "an include list without the pod ranges", pod: incl("10.96.0.0/16"), status: Warning,
			evidence: "includes only 10.96.0.0/16, which leaves out the cluster's pod range 10.244.0.0/24 (node node-1's podCIDRs) and pod range 10.244.1.0/24"},
		{name: "an empty include list", pod: incl(""), status: Warning, evidence: "includes only nothing"},
		{name: "no pod range published: the pod's own IP", pod: func(p *corev1.Pod) {
			excl("10.0.0.0/8")(p)
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.7.9"}}
		}, ranges: servicesOnly, status: Warning, evidence: "address 10.244.7.9/32 (the pod's own IP)"},
		{name: "ranges forbidden: unknown", pod: excl("10.0.0.0/8"), ranges: []ClusterRange{}, unknown: "forbidden: list nodes; forbidden: list servicecidrs.networking.k8s.io",
			status: Unknown, evidence: "forbidden: list nodes"},
		{name: "a fact beats what is unknown", pod: func(p *corev1.Pod) {
			excl("10.0.0.0/8")(p)
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.7.9"}}
		}, ranges: []ClusterRange{}, unknown: "forbidden: list nodes", status: Warning, evidence: "the pod's own IP"},
		{name: "mesh-wide values in istio-init's arguments", pod: istioInitArgs("*", "10.0.0.0/8"), status: Warning,
			evidence: "the mesh-wide values global.proxy.excludeIPRanges (in the pod's capture arguments, no annotation) excludes 10.0.0.0/8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := checkCase{pod: tc.pod, ranges: tc.ranges}.facts()
			f.ClusterRangesUnknown = tc.unknown
			if tc.unknown != "" {
				f.ClusterRangesNeeds = []string{"list nodes"}
			}
			fs := only(Diagnose(f).Findings, CodeClusterRangesBypass)
			if tc.status == "" {
				if len(fs) != 0 {
					t.Fatalf("fired: %+v", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Status != tc.status || !strings.Contains(fs[0].Evidence, tc.evidence) {
				t.Fatalf("got %+v; want %s with %q", fs, tc.status, tc.evidence)
			}
			if tc.status == Unknown && len(fs[0].Needs) == 0 {
				t.Errorf("unknown without the permission: %+v", fs[0])
			}
			if tc.status == Warning && fs[0].Fix == "" {
				t.Errorf("no fix: %+v", fs[0])
			}
		})
	}
}

// A namespace labelled with a revision that does not exist (hd2,
// istio.io/rev=1-99-nonexistent), through the injection model: the finding
// lists the revisions and tags that exist, and its fix names one of them,
// never istio-injection=enabled beside the wrong label (the conflict
// KM-INJ-003 warns of); with no revision known, no fix invents one.
func TestRevisionNotFoundFinding(t *testing.T) {
	fail := admissionv1.Fail
	revHook := func(config, rev, tag, svc string) admissionv1.MutatingWebhookConfiguration {
		labels := map[string]string{"istio.io/rev": rev}
		value := rev
		if tag != "" {
			labels["istio.io/tag"], value = tag, tag
		}
		return admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: config, Labels: labels},
			Webhooks: []admissionv1.MutatingWebhook{{Name: "rev.namespace.sidecar-injector.istio.io", FailurePolicy: &fail,
				ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "istio-system", Name: svc}},
				Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
				NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "istio.io/rev", Operator: metav1.LabelSelectorOpIn, Values: []string{value}},
					{Key: "istio-injection", Operator: metav1.LabelSelectorOpDoesNotExist}}},
				ObjectSelector: &metav1.LabelSelector{}}}}
	}
	diagnoseIn := func(hooks ...admissionv1.MutatingWebhookConfiguration) Finding {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hd2", Labels: map[string]string{"kubernetes.io/metadata.name": "hd2", "istio.io/rev": "1-99-nonexistent"}}}
		f := &injection.ClusterFacts{Webhooks: hooks, Namespaces: map[string]*corev1.Namespace{"hd2": ns}, ConfigMaps: map[string]*corev1.ConfigMap{},
			Services: map[string]*corev1.Service{}, EndpointSlices: map[string][]discoveryv1.EndpointSlice{}, KubeletVersions: map[string]string{}, Unknown: map[string]string{}}
		p := pod(func(p *corev1.Pod) {
			p.Namespace = "hd2"
			p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
			p.Spec.Containers, p.Status.ContainerStatuses = p.Spec.Containers[1:], p.Status.ContainerStatuses[1:]
		})
		w := &injection.Workload{Kind: "Pod", Namespace: "hd2", Name: p.Name, Spec: p.Spec, Pod: p, NamespaceSource: injection.NamespaceFromCluster,
			Owner: &injection.Owner{Kind: "Deployment", Name: "web"}}
		r := injection.Istio{}.Explain(f, w)
		fs := only(Diagnose(Facts{Injection: r, Pod: p}).Findings, CodeAskedNotDone)
		if len(fs) != 1 {
			t.Fatalf("no %s finding: %+v (verdict %q)", CodeAskedNotDone, fs, r.Verdict)
		}
		if strings.Contains(fs[0].Fix, "istio-injection=enabled --overwrite") {
			t.Errorf("the fix sets istio-injection beside istio.io/rev: %q", fs[0].Fix)
		}
		return fs[0]
	}
	got := diagnoseIn(revHook("istio-sidecar-injector", "default", "", "istiod"), revHook("istio-sidecar-injector-1-28", "1-28", "", "istiod-1-28"),
		revHook("istio-revision-tag-stable", "1-28", "stable", "istiod-1-28"))
	if !strings.Contains(got.Evidence, "the cluster has revisions 1-28, default and tags stable") ||
		!strings.HasPrefix(got.Fix, "kubectl label namespace hd2 istio.io/rev=default --overwrite") {
		t.Errorf("revisions and a tag exist: evidence %q fix %q", got.Evidence, got.Fix)
	}
	got = diagnoseIn()
	if !strings.Contains(got.Evidence, "no active Istio revision or tag is known") || strings.Contains(got.Fix, "istio.io/rev=") || strings.Contains(got.Fix, "istio-injection=") {
		t.Errorf("no revision known: evidence %q fix %q", got.Evidence, got.Fix)
	}
}

// A pod whose injection depends on the Istio release (istiod reads
// sidecar.istio.io/inject="enabled" as unset from 1.27, as "do not inject"
// before), under a revision whose version cannot be read: the injection
// check is unknown, says why, builds no fix, and makes the diagnosis
// unknown rather than failed. The same pod under a known release is decided.
func TestInjectionUnknownRelease(t *testing.T) {
	fail := admissionv1.Fail
	hook := admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "istio-sidecar-injector", Labels: map[string]string{"istio.io/rev": "default"}},
		Webhooks: []admissionv1.MutatingWebhook{{Name: "namespace.sidecar-injector.istio.io", FailurePolicy: &fail,
			ClientConfig: admissionv1.WebhookClientConfig{Service: &admissionv1.ServiceReference{Namespace: "istio-system", Name: "istiod"}},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"istio-injection": "enabled"}},
			ObjectSelector:    &metav1.LabelSelector{}}}}
	run := func(tag string) (*injection.InjectionReport, *Diagnosis) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"kubernetes.io/metadata.name": "shop", "istio-injection": "enabled"}}}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istio-sidecar-injector"},
			Data: map[string]string{"config": "policy: enabled", "values": `{"global": {"tag": "` + tag + `"}}`}}
		f := &injection.ClusterFacts{Webhooks: []admissionv1.MutatingWebhookConfiguration{hook}, Namespaces: map[string]*corev1.Namespace{"shop": ns},
			ConfigMaps:      map[string]*corev1.ConfigMap{"istio-system/istio-sidecar-injector": cm},
			Services:        map[string]*corev1.Service{"istio-system/istiod": {ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istiod"}}},
			EndpointSlices:  map[string][]discoveryv1.EndpointSlice{"istio-system/istiod": {{Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}}}}}},
			KubeletVersions: map[string]string{"node-1": "v1.34.1"}, Unknown: map[string]string{}}
		p := pod(func(p *corev1.Pod) {
			p.Labels = map[string]string{"sidecar.istio.io/inject": "enabled"}
			p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
			p.Spec.Containers, p.Status.ContainerStatuses = p.Spec.Containers[1:], p.Status.ContainerStatuses[1:]
		})
		w := &injection.Workload{Kind: "Pod", Namespace: "shop", Name: p.Name, Labels: p.Labels, Spec: p.Spec, Pod: p, NamespaceSource: injection.NamespaceFromCluster,
			Owner: &injection.Owner{Kind: "Deployment", Name: "web"}}
		r := injection.Istio{}.Explain(f, w)
		return r, Diagnose(Facts{Injection: r, Pod: p})
	}
	r, d := run("latest")
	c := d.Checks[0]
	if r.Expected != nil || c.Name != CheckInjection || c.Status != Unknown || c.Fix != "" || len(c.Needs) == 0 || d.Status != Unknown ||
		!strings.Contains(c.Evidence, `the Istio version of revision "default" is unknown`) {
		t.Errorf("unknown release: expected %v, check %+v, diagnosis %s", r.Expected, c, d.Status)
	}
	for _, f := range d.Findings {
		if f.Fix != "" && f.Code == CodeSidecarMissing {
			t.Errorf("a fix built on the unknown: %+v", f)
		}
	}
	// 1.26 reads "enabled" as do not inject: no sidecar, none expected.
	if r, d := run("1.26.3"); r.Expected == nil || *r.Expected || d.Checks[0].Status == Unknown {
		t.Errorf("1.26: expected %v, check %+v", r.Expected, d.Checks[0])
	}
	// 1.28 reads it as unset: the policy injects, and the pod has no sidecar.
	if r, d := run("1.28.1"); r.Expected == nil || !*r.Expected || d.Checks[0].Status != Fail {
		t.Errorf("1.28: expected %v, check %+v", r.Expected, d.Checks[0])
	}
}

// The fixes that start the proxy first suggest the pod annotation
// sidecar.istio.io/nativeSidecar only where the release that injected the
// pod (its proxy image) reads it: Istio 1.22 does not, and the fix says so.
func TestNativeSidecarFixByRelease(t *testing.T) {
	for _, tc := range []struct {
		image, want, not string
	}{
		{"docker.io/istio/proxyv2:1.28.1", `"sidecar.istio.io/nativeSidecar":"true"`, "Istio 1.24"},
		{"docker.io/istio/proxyv2:1.22.3", "Istio 1.22 (this pod's proxy image 1.22.3) does not read sidecar.istio.io/nativeSidecar", "kubectl patch"},
		{"", "the annotation is read by istiod from Istio 1.24", ""},
	} {
		p := pod(func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d8", Controller: func() *bool { b := true; return &b }()}}
			p.Spec.Containers[0].Image = tc.image
		})
		fix := nativeSidecarFix(p, "migrate")
		if !strings.Contains(fix, tc.want) || tc.not != "" && strings.Contains(fix, tc.not) || !strings.Contains(fix, "uid 1337") {
			t.Errorf("image %q: fix %q; want %q, not %q", tc.image, fix, tc.want, tc.not)
		}
	}
}

// initFailed: istio-init failing in a crash loop with this log.
func initFailed(log string) func(p *corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.InitContainerStatuses[0] = corev1.ContainerStatus{Name: "istio-init", RestartCount: 3,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: log, StartedAt: at(1), FinishedAt: at(2)}}}
		p.Status.Phase, p.Status.ContainerStatuses = corev1.PodPending, nil
	}
}

// crashing: container i crash-loops.
func crashing(i int) func(p *corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses[i] = corev1.ContainerStatus{Name: p.Spec.Containers[i].Name, RestartCount: 4,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", StartedAt: at(60), FinishedAt: at(61)}}}
	}
}

// facts of a case: a healthy injected pod, changed.
func (tc checkCase) facts() Facts {
	p := pod(tc.pod)
	r := injected(tc.inj)
	f := Facts{Injection: r, Pod: p, Services: tc.services, ServicesMissing: tc.missing, ServiceMeshed: tc.meshed, NetworkPolicies: tc.policies, Capture: tc.capture, NoPod: tc.noPod, ClusterRanges: tc.ranges, NodeRoom: tc.room}
	if f.ClusterRanges == nil {
		f.ClusterRanges = kindRanges()
	}
	for i := range f.Services {
		f.Services[i].Spec.Selector = map[string]string{"app": "web"}
	}
	if tc.capture != nil && tc.capture.Connections != nil {
		f.Connections = true
	}
	now := tc.now
	if now == 0 {
		now = time.Minute
	}
	for i := range tc.events {
		if tc.events[i].InvolvedObject.Kind == "" {
			tc.events[i].InvolvedObject.Kind, tc.events[i].InvolvedObject.Name = "Pod", p.Name
		}
	}
	owner := ""
	if ref := metav1.GetControllerOf(p); ref != nil {
		owner = ref.Kind
	}
	f.Startup = startup.AnalyzeStartup(startup.StartupFacts{Pod: p, Events: tc.events, Logs: tc.logs, OwnerKind: owner, Now: t0.Add(now)})
	f.Owner = tc.owner
	if len(tc.files) > 0 {
		f.Pod, f.Startup, f.Files, f.NoPod = nil, nil, tc.files, "a manifest, not created yet: its pods are checked once they run"
	}
	if w := tc.workload; w != nil {
		// A workload with no pod: its template's injection answer and its
		// controller's account.
		w.Now = t0.Add(now)
		f.Pod, f.Startup, f.Workload = nil, nil, w
		f.Injection.Kind, f.Injection.Name = w.Kind, w.Name
		if f.NoPod == "" {
			f.NoPod = "it has no pods"
		}
	}
	return f
}

// Every check of the catalogue finds its planted fault (unit level: the
// e2e test plants each on a real cluster), with its code, status, evidence
// and fix, and puts its stage's row where the finding says.
func TestEveryCheckFindsItsFault(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range checkCases {
		covered[tc.code] = true
		t.Run(tc.code, func(t *testing.T) {
			d := Diagnose(tc.facts())
			var found *Finding
			for i, f := range d.Findings {
				if f.Code == tc.code {
					found = &d.Findings[i]
				}
			}
			if found == nil {
				t.Fatalf("no %s finding; findings %+v; first %s: %s", tc.code, d.Findings, d.First, d.Verdict)
			}
			spec, _ := Lookup(tc.code)
			if found.Status != tc.status || !strings.Contains(found.Evidence, tc.evidence) || !strings.Contains(found.Fix, tc.fix) {
				t.Errorf("%s: got %s %q fix %q; want %s, evidence with %q, fix with %q", tc.code, found.Status, found.Evidence, found.Fix, tc.status, tc.evidence, tc.fix)
			}
			if found.Stage != spec.Stage || found.Title != spec.Title {
				t.Errorf("%s: stage %s title %q, the registry says %s %q", tc.code, found.Stage, found.Title, spec.Stage, spec.Title)
			}
			if found.Fix == "" && found.Status != Info {
				t.Errorf("%s: no fix", tc.code)
			}
			// Its stage's row is at least as bad as the finding.
			for _, c := range d.Checks {
				if c.Name == found.Stage && found.Status != Info && worseness[c.Status] < worseness[found.Status] {
					t.Errorf("%s: stage %s is %s under a %s finding", tc.code, c.Name, c.Status, found.Status)
				}
			}
		})
	}
	for _, s := range Checks() {
		if !covered[s.Code] {
			t.Errorf("check %s has no unit case", s.Code)
		}
	}
	t.Logf("%d checks, each found in its planted fault", len(covered))
}

// A healthy injected pod, with Services, rules and sockets read, has no
// finding at all: no check cries wolf.
func TestHealthyPodHasNoFinding(t *testing.T) {
	tc := checkCase{services: []corev1.Service{svc("web", sport("http", 80, 8080)), svc("db", sport("mysql", 3306, 3306))},
		// It declares the port it serves on every address (8080), and
		// excludes from inbound capture a port (9091) no container
		// declares and no Service targets.
		pod: func(p *corev1.Pod) {
			// It also excludes from outbound capture a network outside the
			// cluster's pod and Service ranges.
			p.Annotations = map[string]string{"traffic.sidecar.istio.io/excludeInboundPorts": "9091", "traffic.sidecar.istio.io/excludeOutboundIPRanges": "192.168.100.0/24"}
			// A server-first port (3306) whose Service declares it (mysql).
			p.Spec.Containers[1].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "mysql", ContainerPort: 3306}}
		},
		capture: &capture.CaptureReport{Expected: "x", Drift: &capture.Drift{}, Dumps: redirecting(), ConnectionsSummary: "no live flows", Connections: []capture.Connection{},
			Listeners: capture.ParseListeners(listening("00000000:1F90", "00000000:3A99", "00000000:3A9E"))}}
	f := tc.facts()
	f.Connections = true
	d := Diagnose(f)
	if len(d.Findings) != 0 || d.Status != Pass {
		t.Fatalf("healthy pod: %s, findings %+v", d.Status, d.Findings)
	}
}

// A fix patches the workload that makes the pod, naming the annotation as
// a JSON patch path; a pod with no controller gets what to change in its
// manifest.
func TestFixesPatchTheTemplate(t *testing.T) {
	yes := true
	owned := pod(func(p *corev1.Pod) {
		p.Labels = map[string]string{"pod-template-hash": "5d8f9"}
		p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-5d8f9", Controller: &yes}}
		p.Annotations = map[string]string{"traffic.sidecar.istio.io/excludeOutboundPort": "9090"}
	})
	d := Diagnose(Facts{Injection: injected(nil), Pod: owned, Startup: startup.AnalyzeStartup(startup.StartupFacts{Pod: owned, Now: t0.Add(time.Minute)})})
	want := `kubectl patch deployment/web -n shop --type=json -p '[{"op":"move","from":"/spec/template/metadata/annotations/traffic.sidecar.istio.io~1excludeOutboundPort","path":"/spec/template/metadata/annotations/traffic.sidecar.istio.io~1excludeOutboundPorts"}]'`
	if fs := only(d.Findings, CodeUnknownAnnotation); len(fs) != 1 || fs[0].Fix != want {
		t.Errorf("fix of a typo on a Deployment's pod:\n got %+v\nwant %s", fs, want)
	}
	if got := specPatch(owned, `{"dnsPolicy":"ClusterFirst"}`, "x"); got != `kubectl patch deployment/web -n shop -p '{"spec":{"template":{"spec":{"dnsPolicy":"ClusterFirst"}}}}'` {
		t.Errorf("spec patch: %s", got)
	}
	if got := annotationPatch(pod(nil), "a/b", ""); !strings.Contains(got, "pod's manifest") {
		t.Errorf("a pod with no controller: %s", got)
	}
}

// A server-first port declared as HTTP is as wrong as one not declared:
// the proxy parses MySQL's greeting as HTTP.
func TestServerFirstDeclaredHTTP(t *testing.T) {
	f := checkCase{services: []corev1.Service{svc("mysql", sport("http-mysql", 3306, 3306))}}.facts()
	fs := only(Diagnose(f).Findings, CodeServerFirst)
	if len(fs) != 1 || !strings.Contains(fs[0].Evidence, "declares HTTP, but port 3306 usually carries MySQL") || !strings.Contains(fs[0].Fix, `appProtocol","value":"tcp"`) {
		t.Errorf("http-mysql on 3306: %+v", fs)
	}
	f = checkCase{services: []corev1.Service{svc("mysql", sport("tcp-mysql", 3306, 3306))}}.facts()
	if fs := only(Diagnose(f).Findings, CodeServerFirst); len(fs) != 0 {
		t.Errorf("tcp-mysql on 3306: %+v", fs)
	}
}

// One ambient fault, one finding: redirection "pending" (istio-cni wrote the
// pod's rules, ztunnel has not taken it) is KM-START-013 alone, even when
// why-injected says the pod is not captured; an annotation istio-cni never
// wrote is KM-CAP-006 alone.
func TestAmbientFaultHasOneFinding(t *testing.T) {
	for _, tc := range []struct {
		redirection string
		capture     string
		want        string
	}{
		{"pending", injection.AmbientPending, CodeAmbientWaitZtunnel},
		{"", injection.AmbientNotSetUp, CodeAmbientNotCaptured},
	} {
		c := checkCase{pod: func(p *corev1.Pod) {
			p.Spec.InitContainers, p.Status.InitContainerStatuses = nil, nil
			p.Spec.Containers, p.Status.ContainerStatuses = p.Spec.Containers[1:], p.Status.ContainerStatuses[1:]
			p.Annotations = map[string]string{}
			if tc.redirection != "" {
				p.Annotations["ambient.istio.io/redirection"] = tc.redirection
			}
			p.Labels = map[string]string{"istio.io/dataplane-mode": "ambient"}
		}, inj: func(r *injection.InjectionReport) {
			no := false
			r.Injected, r.Expected, r.Ambient, r.AmbientCapture = &no, &no, true, tc.capture
			r.Verdict, r.Fix = "Enrolled in ambient mode, not captured", "kubectl delete pod web-1 -n shop"
		}}
		d := Diagnose(c.facts())
		var codes []string
		for _, f := range d.Findings {
			if f.Status == Fail || f.Status == Warning {
				codes = append(codes, f.Code)
			}
		}
		if len(codes) != 1 || codes[0] != tc.want {
			t.Errorf("redirection %q: findings %v, want only %s", tc.redirection, codes, tc.want)
		}
	}
}

// A pod whose Istio release is outside the rule model: its rules are read,
// not compared: KM-CAP-001 is unknown (the reason said), never a failure.
func TestRulesOfAnUnmodelledReleaseAreUnknown(t *testing.T) {
	why := "no rule model for Istio 1.6.0 (the model knows 1.20 to 1.31); the rules are explained and traced, not compared"
	c := checkCase{capture: &capture.CaptureReport{Dumps: redirecting(), NoRuleModel: why, Notes: []string{why}}}
	d := Diagnose(c.facts())
	cap := checkOf(d, CheckCapture)
	if cap.Status != Unknown || !strings.Contains(cap.Evidence, "no rule model for Istio 1.6.0") {
		t.Errorf("capture %s: %s", cap.Status, cap.Evidence)
	}
	for _, f := range d.Findings {
		if f.Code == CodeRulesDrift && f.Status == Fail {
			t.Errorf("a drift failure for a release outside the model: %+v", f)
		}
	}
}
