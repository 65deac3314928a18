package startup

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

func startupHazards(r *StartupReport, f StartupFacts, proxy *ContainerStartup) {
	add := func(id, container, msg, fix string) {
		r.Hazards = append(r.Hazards, Hazard{ID: id, Container: container, Message: msg, Fix: fix})
	}
	ns := r.Namespace
	for _, c := range r.InitContainers {
		if !c.Failing {
			continue
		}
		why := c.Failure
		if why == "" {
			why = LogEnd(c)
		}
		switch c.Role {
		case RoleIstioInit:
			add("istio-init-failed", c.Name, c.FailureSummary()+": "+why, istioInitFix(r, f, c))
		case RoleIstioValidation:
			add("validation-failed", c.Name, c.FailureSummary()+": "+why,
				"kubectl get pods -A -l k8s-app=istio-cni-node -o wide --field-selector spec.nodeName="+r.Node+"   # none: Istio's CNI plugin is not installed on the node (install it, or inject with a revision that uses istio-init); one not ready: once it is, delete this pod (cni.repair.deletePods=true does that for you); one ready since before the pod: the plugin is not in the node's CNI chain (its log says which CNI config it wrote), so deleting the pod will not help")
		}
	}
	// Containers that keep running (the app, the proxy, native sidecars)
	// that fail: a crash loop, whatever its phase this second.
	for _, c := range append(append([]ContainerStartup(nil), r.InitContainers...), r.Containers...) {
		if !c.Failing || c.runsToCompletion() {
			continue
		}
		msg := c.FailureSummary()
		if c.Log != nil {
			msg += ": " + LogEnd(c)
		}
		logs := fmt.Sprintf("kubectl logs %s -n %s -c %s", r.Name, ns, c.Name) + PreviousFlag(c)
		add("container-failing", c.Name, msg, logs+"   # the failed run's log says why it exited")
	}
	stuckInInit(r, f, ns, add)
	if r.Ambient {
		ambientHazards(r, f, add)
	}
	if proxy == nil {
		return
	}
	// User init containers that run while traffic is captured but no proxy runs.
	cni := false
	capturedFrom := -1
	for i, c := range r.InitContainers {
		if c.Role == RoleIstioValidation {
			cni = true
		}
		if c.Role == RoleIstioInit && capturedFrom < 0 {
			capturedFrom = i
		}
	}
	if cni {
		capturedFrom = 0
	}
	native := NativeSidecarAdvice(f.Pod)
	if !r.Native && capturedFrom >= 0 {
		for i, c := range r.InitContainers {
			if i > capturedFrom && c.Role == RoleInit || cni && c.Role == RoleInit {
				add("init-after-capture", c.Name,
					fmt.Sprintf("init container %s runs after the capture rules are in place but before any proxy: its outbound connections are redirected to 15001, where nothing listens yet", c.Name),
					"run it as uid 1337 (runAsUser: 1337), or exclude what it calls (traffic.sidecar.istio.io/excludeOutboundIPRanges or excludeOutboundPorts)"+native.nativeOption(", "))
			}
		}
	}
	if proxy.Role == RoleProxy {
		// One that ended (Succeeded, Failed) was not kept alive by it:
		// something stopped the proxy (the job's /quitquitquit).
		ended := r.Phase == string(corev1.PodSucceeded) || r.Phase == string(corev1.PodFailed)
		if what := runsOnce(f); what != "" && !ended {
			fix := "use a native sidecar (annotation " + istio.AnnotationNativeSidecar + ": \"true\", Kubernetes 1.29+), or have the job call POST http://localhost:15020/quitquitquit when it is done"
			switch {
			case !native.Annotation:
				fix = "have the job call POST http://localhost:15020/quitquitquit when it is done; or a native sidecar: " + native.Note + " (Kubernetes 1.29+)"
			case native.Note != "":
				fix = "use a native sidecar (annotation " + istio.AnnotationNativeSidecar + ": \"true\", Kubernetes 1.29+; " + native.Note + "), or have the job call POST http://localhost:15020/quitquitquit when it is done"
			}
			add("job-with-classic-sidecar", proxy.Name, what+" has a classic istio-proxy container: it keeps running after the pod's own containers finish, so the pod never completes", fix)
		}
		hold := "hold the app until the proxy is ready (annotation proxy.istio.io/config: '{\"holdApplicationUntilProxyStarts\": true}')" + native.nativeOption(" ")
		if !r.Hold {
			for _, c := range r.Containers {
				if c.Role != RoleApp || c.FirstStartedAt == nil {
					continue
				}
				ready := proxy.ReadyAt
				switch {
				case ready != nil && c.FirstStartedAt.Before(*ready):
					add("app-before-proxy-ready", c.Name, fmt.Sprintf("%s started %s before istio-proxy was ready: its first connections can fail", c.Name, ready.Sub(*c.FirstStartedAt).Round(time.Second)),
						hold)
				case ready != nil && c.FirstStartedAt.Equal(*ready):
					// The kubelet's times have a resolution of one second, and
					// without the hold nothing makes it wait for the proxy.
					add("app-before-proxy-ready", c.Name, fmt.Sprintf("%s started within the second istio-proxy became ready, with no hold configured: nothing made it wait, so its first connections can fail", c.Name),
						hold)
				case ready == nil && proxy.FirstStartedAt != nil && !c.FirstStartedAt.After(*proxy.FirstStartedAt):
					add("app-before-proxy-ready", c.Name, fmt.Sprintf("%s started before istio-proxy (and no hold is configured): its first connections can fail", c.Name),
						hold)
				}
			}
		}
	}
	if holder := PostStartHolder(f.Pod); holder != nil {
		add("poststart-holds-proxy", holder.Name, holder.Name+" has a postStart hook and the classic istio-proxy comes after it: the kubelet starts a pod's containers in order and waits for each one's postStart hook, so istio-proxy has not started; a hook that needs the network (or the proxy) waits for ever",
			"a native sidecar (annotation "+istio.AnnotationNativeSidecar+": \"true\"), which starts before the app's containers and their hooks; or hold the app until the proxy is ready (proxy.istio.io/config holdApplicationUntilProxyStarts: true puts the proxy first)")
	}
	if proxy.State == "running" && !proxy.Ready {
		since := ""
		if proxy.StartedAt != nil {
			since = " for " + f.Now.Sub(*proxy.StartedAt).Round(time.Second).String()
		}
		last := ""
		for _, e := range r.Events {
			if e.Container == istio.ProxyContainer && e.Reason == "Unhealthy" {
				last = ": " + e.Message
			}
		}
		add("proxy-not-ready", proxy.Name, "istio-proxy has been running"+since+" without becoming ready (health check on port 15021)"+last,
			fmt.Sprintf("kubectl logs %s -n %s -c istio-proxy   # why it is not ready: check that istiod is reachable and the proxy received its configuration", r.Name, ns))
	}
}

// StartupSeverity orders pods for the many-pods view: higher is worse.
func StartupSeverity(r *StartupReport) int {
	failing := false
	for _, h := range r.Hazards {
		failing = failing || h.ID == "container-failing"
	}
	switch {
	case r.InitResult == "crash-looping" || r.InitResult == "failed" || failing:
		return 3
	case len(r.Hazards) > 0:
		return 2
	case r.Phase != string(corev1.PodRunning) && r.Phase != string(corev1.PodSucceeded):
		return 1
	}
	return 0
}

// Ambient mode: the kubelet's CNI chain runs Istio's plugin, which hands a
// pod that ambient mode enrolls to the istio-cni node agent on the node
// (failing the pod's sandbox when it cannot: the pod stays in
// ContainerCreating, the kubelet retries); the agent writes the pod's rules,
// gives the pod to ztunnel and annotates it ambient.istio.io/redirection:
// "enabled", or "pending" while ztunnel has not taken it.
const (
	// What Istio's CNI plugin says when it cannot reach the node agent, and
	// the agent when no ztunnel is connected to it.
	cniAgentUnreachable = "failed to contact node Istio CNI agent"
	noZtunnel           = "no ztunnel connection"
)

// ambientSandboxEvent is the last event of a sandbox that Istio's CNI
// plugin failed, or nil.
func ambientSandboxEvent(events []EventLine) *EventLine {
	var last *EventLine
	for i := range events {
		if e := &events[i]; e.Reason == "FailedCreatePodSandBox" && strings.Contains(e.Message, "istio-cni") {
			last = e
		}
	}
	return last
}

func ambientHazards(r *StartupReport, f StartupFacts, add func(id, container, msg, fix string)) {
	node := "its node"
	agents := "kubectl get pods -A -o wide -l 'k8s-app in (istio-cni-node)'; kubectl get pods -A -o wide -l app=ztunnel"
	if r.Node != "" {
		node = "node " + r.Node
		agents = "kubectl get pods -A -o wide -l k8s-app=istio-cni-node --field-selector spec.nodeName=" + r.Node +
			"; kubectl get pods -A -o wide -l app=ztunnel --field-selector spec.nodeName=" + r.Node
	}
	if e := ambientSandboxEvent(r.Events); e != nil && r.Phase == string(corev1.PodPending) {
		times := fmt.Sprintf("%d times, last at %s", e.Count, e.Time.UTC().Format(time.RFC3339))
		switch {
		case strings.Contains(e.Message, noZtunnel):
			add("ambient-no-ztunnel", "", "the pod's network cannot be set up ("+times+"): the istio-cni agent on "+node+" has no ztunnel connected, so it cannot hand the pod over",
				agents+"   # ztunnel must run and be ready there; the kubelet retries the sandbox by itself")
		case strings.Contains(e.Message, cniAgentUnreachable):
			add("ambient-cni-not-ready", "", "the pod's network cannot be set up ("+times+"): Istio's CNI plugin could not reach the istio-cni agent on "+node+" — the pod was created before the agent was ready there",
				agents+"   # once istio-cni is ready there the kubelet's next try succeeds by itself")
		default:
			add("ambient-cni-failed", "", "the pod's network cannot be set up ("+times+"): Istio's CNI plugin failed: "+e.Message,
				"kubectl logs -n <istio-cni namespace> -l k8s-app=istio-cni-node   # the agent on "+node+" says why")
		}
		return
	}
	if f.Pod.Annotations[istio.AnnotationRedirection] == "pending" {
		add("ambient-pending", "", "istio-cni wrote the pod's capture rules, but ztunnel on "+node+" has not taken the pod (ambient.istio.io/redirection=pending): its connections are redirected to ztunnel's ports, where nothing serves them yet",
			agents+"   # istio-cni retries once ztunnel there is ready")
	}
}

// NativeAdvice is how a pod could get a native sidecar, by the Istio
// release that injected it (its istio-proxy image's tag, read against
// internal/istio's table): istiod reads the pod annotation
// sidecar.istio.io/nativeSidecar from 1.24; before, native sidecars are
// only mesh-wide (ENABLE_NATIVE_SIDECARS=true in istiod's environment).
type NativeAdvice struct {
	// Annotation: the annotation gives it a native sidecar, or may (when
	// the release is not known, Note says from which release it does).
	Annotation bool
	// Note qualifies the advice: "" when the annotation is known to work.
	Note string
}

// NativeSidecarAdvice is NativeAdvice for pod p.
func NativeSidecarAdvice(p *corev1.Pod) NativeAdvice {
	image := ""
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == istio.ProxyContainer {
			image = c.Image
		}
	}
	v, ok := istio.ImageVersion(image)
	rel, modelled := istio.Defaults(v)
	switch {
	case !ok || !modelled:
		return NativeAdvice{Annotation: true, Note: "the annotation is read by istiod from Istio 1.24"}
	case rel.NativeAnnotation == istio.NativeAnnotationIgnored:
		return NativeAdvice{Note: "Istio " + rel.Minor + " (this pod's proxy image " + istio.ImageTag(image) + ") does not read " + istio.AnnotationNativeSidecar +
			" (1.24+ does): there native sidecars are mesh-wide, ENABLE_NATIVE_SIDECARS=true in istiod's environment"}
	}
	return NativeAdvice{Annotation: true}
}

// nativeOption is the advice's "or use native sidecars" clause for a fix,
// after sep.
func (a NativeAdvice) nativeOption(sep string) string {
	switch {
	case !a.Annotation:
		return "; native sidecars: " + a.Note
	case a.Note != "":
		return sep + "or use native sidecars (" + istio.AnnotationNativeSidecar + ": \"true\"; " + a.Note + ")"
	}
	return sep + "or use native sidecars (" + istio.AnnotationNativeSidecar + ": \"true\")"
}

// portList: a comma-separated list of port numbers.
func portList(v string) bool {
	for _, p := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > 65535 {
			return false
		}
	}
	return true
}

// istioInitFix is the fix of a failing istio-init: for a cause it
// recognised, what to change and where (the annotation and its value, on
// the object that re-creates the pod); else the command that shows its log.
// Each runs as pasted: the advice is a comment.
func istioInitFix(r *StartupReport, f StartupFacts, c ContainerStartup) string {
	ns := r.Namespace
	logs := fmt.Sprintf("kubectl logs %s -n %s -c istio-init", r.Name, ns) + PreviousFlag(c)
	switch c.Cause {
	case CauseOOM:
		const key = istio.AnnotationProxyMemoryLimit
		if v, ok := f.Pod.Annotations[key]; ok && f.Workload != "" && !strings.HasPrefix(f.Workload, "replicaset/") && !strings.HasPrefix(f.Workload, "job/") {
			path := "/spec/template/metadata/annotations/" + strings.ReplaceAll(key, "/", "~1")
			return fmt.Sprintf(`kubectl patch %s -n %s --type=json -p '[{"op":"remove","path":"%s"}]'`, f.Workload, ns, path) +
				fmt.Sprintf("   # %s=%q is too little for istio-init (and the proxy): without it the mesh's own limit applies; or set it higher", key, v)
		} else if ok {
			return fmt.Sprintf("kubectl get pod %s -n %s -o yaml > %s.yaml", r.Name, ns, r.Name) +
				fmt.Sprintf("   # %s=%q is too little for istio-init: raise or remove it in the file, then kubectl replace --force -f %s.yaml", key, v, r.Name)
		}
		return logs + "   # istio-init's memory limit is the sidecar's: raise the mesh's global.proxy.resources.limits.memory, or set " + key + " on the pod template"
	case CauseNoNetAdmin:
		return fmt.Sprintf(`kubectl get pod %s -n %s -o jsonpath='{.spec.initContainers[?(@.name=="istio-init")].securityContext.capabilities}'`, r.Name, ns) +
			"   # istio-init needs NET_ADMIN and NET_RAW, which the injector adds: if they are not there, something at admission after the injector removed them; or install Istio with its CNI plugin (no istio-init)"
	case CauseBadPorts:
		v, ok := f.Pod.Annotations[istio.AnnotationIncludeOutboundPorts]
		if !ok || portList(v) {
			return logs + "   # the pod's " + istio.AnnotationIncludeOutboundPorts + " annotation, if any, is a list of ports: the bad port comes from the mesh-wide values (global.proxy.includeOutboundPorts)"
		}
		set := fmt.Sprintf("%s=%q", istio.AnnotationIncludeOutboundPorts, v)
		path := "/spec/template/metadata/annotations/" + strings.ReplaceAll(istio.AnnotationIncludeOutboundPorts, "/", "~1")
		if f.Workload != "" && !strings.HasPrefix(f.Workload, "replicaset/") && !strings.HasPrefix(f.Workload, "job/") {
			return fmt.Sprintf(`kubectl patch %s -n %s --type=json -p '[{"op":"remove","path":"%s"}]'`, f.Workload, ns, path) +
				"   # " + set + " is not a list of port numbers; or set it to one (e.g. \"443,8080\"), and the rollout re-creates the pod"
		}
		return fmt.Sprintf("kubectl get pod %s -n %s -o yaml > %s.yaml", r.Name, ns, r.Name) +
			"   # " + set + " is not a list of port numbers: correct or remove it in the file, then kubectl replace --force -f " + r.Name + ".yaml"
	case CauseOwner:
		return logs + "   # the owner istio-iptables could not resolve comes from istio-init's ISTIO_OUTBOUND_OWNER_GROUPS(_EXCLUDE): remove it from proxyMetadata (proxy.istio.io/config, or the ProxyConfig that sets it), or give the group by number"
	case CauseLogLevel:
		var keys []string
		for _, k := range []string{"sidecar.istio.io/agentLogLevel", "sidecar.istio.io/logLevel"} {
			if _, ok := f.Pod.Annotations[k]; ok {
				keys = append(keys, k)
			}
		}
		if len(keys) > 0 && f.Workload != "" && !strings.HasPrefix(f.Workload, "replicaset/") && !strings.HasPrefix(f.Workload, "job/") {
			var ops []string
			for _, k := range keys {
				ops = append(ops, `{"op":"remove","path":"/spec/template/metadata/annotations/`+strings.ReplaceAll(k, "/", "~1")+`"}`)
			}
			return fmt.Sprintf("kubectl patch %s -n %s --type=json -p '[%s]'", f.Workload, ns, strings.Join(ops, ",")) +
				"   # the agent's default log level; or set a valid one (e.g. \"default:debug\"), and the rollout re-creates the pod"
		}
		if job, ok := strings.CutPrefix(f.Workload, "job/"); ok && len(keys) > 0 {
			gone := map[string]*string{}
			for _, k := range keys {
				gone[k] = nil
			}
			return injection.RecreateJob(job, ns, gone, nil)
		}
		if len(keys) > 0 {
			return logs + "   # " + strings.Join(keys, " and ") + " on the pod: remove it (or set a valid level) in what creates the pod, then re-create it"
		}
	}
	if c.Failure != "" {
		return logs + "   # fix the cause above" + retryNote(f)
	}
	return logs + "   # its log says why; fix that" + retryNote(f)
}

// retryNote says what runs istio-init again once its cause is fixed: the
// kubelet, or, for a pod that runs once (restartPolicy Never), nothing.
func retryNote(f StartupFacts) string {
	if f.Pod != nil && f.Pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
		return ", then re-create the pod (its Job): with restartPolicy Never nothing runs istio-init again"
	}
	return ", and the kubelet retries istio-init by itself"
}

// runsOnce names a pod meant to run to completion, "" for one that serves:
// a Job's pod (whatever owns the Job: a CronJob, or none), or any pod whose
// restartPolicy is Never or OnFailure (a bare pod run once, another
// controller's run-once pod).
func runsOnce(f StartupFacts) string {
	p := f.Pod
	switch {
	case f.OwnerKind == "Job" || p.Labels["job-name"] != "" || p.Labels["batch.kubernetes.io/job-name"] != "":
		return "this Job's pod"
	case p.Spec.RestartPolicy == corev1.RestartPolicyNever || p.Spec.RestartPolicy == corev1.RestartPolicyOnFailure:
		return "this pod (restartPolicy " + string(p.Spec.RestartPolicy) + ": it runs once)"
	}
	return ""
}

// stuckInInit is a pod on a node held in its init containers for over a
// minute (or by one that failed): the one it waits on, a native sidecar
// that has not passed its startup probe told apart; one that waits to be
// created (its image, its configuration) is its own failure, not this.
func stuckInInit(r *StartupReport, f StartupFacts, ns string, add func(id, container, msg, fix string)) {
	// A pod on no node has started nothing: it waits for the scheduler, not
	// for its init containers.
	if r.Phase == string(corev1.PodPending) && r.InitResult != "completed" && r.InitResult != "none" && f.Pod.Spec.NodeName != "" {
		age := f.Now.Sub(r.CreatedAt).Round(time.Second)
		if age > time.Minute || r.InitResult == "failed" || r.InitResult == "crash-looping" {
			stuck := ""
			sidecar := map[string]bool{}
			for _, c := range f.Pod.Spec.InitContainers {
				sidecar[c.Name] = c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
			}
			waiting := false
			for _, c := range r.InitContainers {
				// A native sidecar runs on: it never completes, and init
				// goes past it once it has started.
				started := sidecar[c.Name] && c.State == "running" && !c.Failing && c.Started != nil && *c.Started
				if (c.State != "terminated" || c.Failing) && !started {
					stuck = c.Name
					// One that waits to be created (its image, its
					// configuration) is its own failure, said with its reason.
					waiting = c.State == "waiting" && c.Reason != "" && c.Reason != "PodInitializing" && c.Reason != "ContainerCreating"
					break
				}
			}
			if waiting && sidecar[stuck] {
				stuck = ""
			}
			msg := fmt.Sprintf("the pod has been initialising for %s; init container %s has not completed", age, stuck)
			fix := fmt.Sprintf("kubectl describe pod %s -n %s; kubectl logs %s -n %s -c %s", r.Name, ns, r.Name, ns, stuck)
			if sidecar[stuck] {
				// A native sidecar never completes: what holds the pod is
				// that it has not started (its startup probe has not passed).
				msg = fmt.Sprintf("the pod has been initialising for %s: native sidecar %s runs but has not passed its startup probe, and nothing after it starts", age, stuck)
				if stuck == istio.ProxyContainer {
					msg += " (istio-proxy is not ready: it has no configuration from istiod yet, or istiod is unreachable)"
					fix = fmt.Sprintf("kubectl logs %s -n %s -c istio-proxy   # why the proxy is not ready (no configuration from istiod?); istioctl proxy-status; check that istiod is reachable from the pod", r.Name, ns)
				}
			}
			if stuck != "" {
				add("stuck-in-init", stuck, msg, fix)
			}
		}
	}
}

// PostStartHolder is the container before a classic istio-proxy that has
// not started whose postStart hook the kubelet waits for (it starts a
// pod's containers in order, each one's postStart hook returned before the
// next): the proxy waits on the hook; nil when it is not so.
func PostStartHolder(p *corev1.Pod) *corev1.Container {
	if p == nil {
		return nil
	}
	proxy := slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == istio.ProxyContainer })
	if proxy < 0 {
		return nil
	}
	for _, st := range p.Status.ContainerStatuses {
		if st.Name == istio.ProxyContainer && (st.State.Running != nil || st.State.Terminated != nil || st.LastTerminationState.Terminated != nil) {
			return nil // it started
		}
	}
	for i := range p.Spec.Containers[:proxy] {
		if c := &p.Spec.Containers[i]; c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
			return c
		}
	}
	return nil
}
