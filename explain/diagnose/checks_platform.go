package diagnose

// The platform-state layer: what Kubernetes itself reports about a pod (its
// phase and conditions, each container's waiting reason and termination,
// the kubelet's and the scheduler's events), read by what it means. A
// broken pod is never a pass: when no mesh check explains what the platform
// reports, these findings say so, with the platform's own reason and
// message; when the mesh is the cause (a container the injector added, a
// container captured with no proxy to serve it), they name it.

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

const (
	CodeInitContainerFailed = "KM-INIT-008"
	CodeCannotStart         = "KM-INIT-009"
	CodePodSetup            = "KM-INIT-010"
	CodePodNotReady         = "KM-START-014"
)

// StartGrace is how long a pod may take to get ready before not being
// ready is a failure (more when its probes give it longer).
const StartGrace = time.Minute

// noMeshCause ends a platform finding that no mesh check explains.
const noMeshCause = "no mesh check explains it: this is the platform's own reason"

func init() {
	reads := []Fact{FactPod, FactEvents, FactLogs}
	register(&Spec{Code: CodeInitContainerFailed, Title: "init container failed", Stage: CheckInit, Kind: Static, Status: Fail, Reads: reads,
		Means:   "An init container of the app exited with an error (or keeps doing so): nothing after it starts. In a pod whose traffic istio-init (or istio-cni) captured before it runs, with a classic sidecar, its connections go to a proxy that does not run yet: the usual cause.",
		Detects: "Each init container's termination and last termination (exit code, reason, message), its restart count, and the tail of its failed run's log, whatever phase its crash loop is in.",
		Fixes:   "When it runs captured with no proxy: a native sidecar (or uid 1337, or excluding what it calls); otherwise what its log says.",
		Source:  "istio/istio issues on init containers that cannot reach the network with a sidecar; Istio docs, application requirements (init containers)",
		Planted: "an init container that exits 1 after printing why",
		run:     func(in *Input) []Finding { return only(in.initAnswer().findings, CodeInitContainerFailed) }})
	register(&Spec{Code: CodeCannotStart, Title: "init container cannot start", Stage: CheckInit, Kind: Static, Status: Fail, Reads: reads,
		Means:   "An init container waits for a reason it does not get past by itself (its image cannot be pulled, its configuration refers to something missing): the pod never starts. When the injector added that container (istio-init, istio-validation), the mesh's image or annotations are the cause.",
		Detects: "Every waiting reason the kubelet reports for an init container but a crash loop's back-off (KM-INIT-008) and the normal PodInitializing and ContainerCreating, with its message and the container's events.",
		Fixes:   "For a container the injector added: the annotation that set its image or value, or, when its image is not the one the injector set and another mutating webhook or MutatingAdmissionPolicy matches the pod, the exemption of the pod's namespace from it; otherwise what the kubelet's message says.",
		Source:  "kubectl's own statuses (Init:ImagePullBackOff, Init:CreateContainerConfigError); istio/istio issues on istio-init images that cannot be pulled",
		Planted: "an init container whose image does not exist on the node",
		run:     func(in *Input) []Finding { return only(in.initAnswer().findings, CodeCannotStart) }})
	register(&Spec{Code: CodePodSetup, Title: "pod's volumes or sandbox cannot be set up", Stage: CheckInit, Kind: Static, Status: Fail, Reads: []Fact{FactPod, FactEvents, FactQuotas},
		Means:   "The kubelet cannot set the pod up before any of its containers runs: a volume cannot be mounted (a Secret, ConfigMap or claim that does not exist) or its sandbox cannot be created. The pod stays Pending, and no init container (istio-init included) is to blame.",
		Detects: "The pod's warning events (FailedMount, FailedAttachVolume, FailedCreatePodSandBox) while it is Pending on a node and none of its containers has started.",
		Fixes:   "Create what the event names as missing (the Secret, ConfigMap or claim), or remove the reference; a ConfigMap the cluster writes (istiod's istio-ca-root-cert, kube-controller-manager's kube-root-ca.crt) is its writer's: a dry-run create of it names what refuses it (a ValidatingAdmissionPolicyBinding, which then leaves those ConfigMaps out by name; a webhook), else the ResourceQuota that refuses it is raised; then its writer is made to write it.",
		Source:  "kubectl's own statuses (Init:0/N, ContainerCreating with FailedMount); istio/istio issues where users blamed istio-init for a pod stuck in init",
		Planted: "a pod whose volume is a Secret that does not exist",
		run:     func(in *Input) []Finding { return only(in.initAnswer().findings, CodePodSetup) }})
	register(&Spec{Code: CodePodNotReady, Title: "pod not ready", Stage: CheckStart, Kind: Static, Status: Fail, Reads: []Fact{FactPod, FactEvents},
		Means:   "The pod has run past its start and is not Ready, and no container fails: it receives no traffic from its Services. The kubelet's Ready condition and the pod's warning events say why (a readiness probe failing, a readiness gate).",
		Detects: "The pod's Ready condition (or its containers' ready flags) against its age and its probes' delays; within that time it is a warning.",
		Fixes:   "What the pod's events say; kubectl describe pod.",
		Source:  "kubectl's own READY column; istio/istio issues on pods not ready with a sidecar",
		Planted: "a pod whose readiness probe never passes",
		run:     podNotReady})
}

// benignWaiting are the waiting reasons of a container on its normal way
// to running.
var benignWaiting = map[string]bool{"": true, "ContainerCreating": true, "PodInitializing": true, "not created yet": true}

// waitingFailure says a container waits for a reason it does not get past
// by itself (any reason but the normal ones and a crash loop's back-off,
// which the container's failure reports).
func waitingFailure(c startup.ContainerStartup) bool {
	return c.State == "waiting" && !benignWaiting[c.Reason] && c.Reason != "CrashLoopBackOff"
}

// kubeletSays is a waiting container's reason and message, verbatim.
func kubeletSays(c startup.ContainerStartup) string {
	s := c.Reason
	if m := strings.TrimSpace(c.Message); m != "" {
		s += ": " + oneLine(m, 300)
	}
	return s
}

// oneLine is the first line of s, at most n runes.
func oneLine(s string, n int) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i]) + " …"
	}
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}

// warningEvents are the pod's Warning events (about container, "" for any),
// newest last, each once, at most n: "Reason (N×): message".
func warningEvents(s *startup.StartupReport, container string, n int) []string {
	return warningEventsBut(s, container, "", n)
}

// warningEventsBut is warningEvents without the kubelet's "Error: REASON"
// events that only repeat a waiting reason already given.
func warningEventsBut(s *startup.StartupReport, container, reason string, n int) []string {
	if s == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for i := len(s.Events) - 1; i >= 0 && len(out) < n; i-- {
		e := s.Events[i]
		if e.Type != corev1.EventTypeWarning || container != "" && e.Container != container || reason != "" && strings.TrimSpace(e.Message) == "Error: "+reason {
			continue
		}
		line := e.Reason
		if e.Count > 1 {
			line += fmt.Sprintf(" (%d×)", e.Count)
		}
		line += ": " + oneLine(e.Message, 240)
		if !seen[e.Reason+e.Message] {
			seen[e.Reason+e.Message] = true
			out = append([]string{line}, out...)
		}
	}
	return out
}

// injectedBy names what of the mesh set up a container the injector added:
// the pod's annotations that change Istio's containers, with their values,
// only those of the image when the kubelet's reason is about the image
// ("" for a container the injector did not add).
func injectedBy(p *corev1.Pod, container, reason string) string {
	if p == nil || !istio.IsIstioContainer(container) {
		return ""
	}
	var keys []string
	for k := range p.Annotations {
		if imageReason(reason) && !strings.HasPrefix(k, "sidecar.istio.io/proxyImage") && (k != istio.AnnotationProxyConfig || ownImageType(p) == "") {
			continue // a resource or capture annotation says nothing of the image
		}
		if strings.HasPrefix(k, "sidecar.istio.io/") && k != istio.AnnotationStatus && k != "sidecar.istio.io/inject" ||
			strings.HasPrefix(k, "traffic.sidecar.istio.io/") || k == istio.AnnotationProxyConfig {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%q", k, oneLine(p.Annotations[k], 80)))
	}
	s := container + " was added by Istio's injector"
	if len(parts) > 0 {
		s += ", set by the pod's " + strings.Join(parts, ", ")
	} else if imageReason(reason) {
		s += " with the image of the mesh's injection template (no sidecar.istio.io/proxyImage annotation on the pod)"
	} else {
		s += " from the mesh's injection template (no sidecar.istio.io annotation on the pod)"
	}
	return s
}

// ownImageType is the image type the pod's own proxy.istio.io/config asks
// for (YAML or JSON), "" for none.
func ownImageType(p *corev1.Pod) string {
	var cfg struct {
		Image struct {
			ImageType string `json:"imageType"`
		} `json:"image"`
	}
	if yaml.Unmarshal([]byte(p.Annotations[istio.AnnotationProxyConfig]), &cfg) != nil {
		return ""
	}
	return cfg.Image.ImageType
}

// imageReason says a waiting reason is about the container's image.
func imageReason(reason string) bool {
	return strings.Contains(reason, "Image") || reason == "RegistryUnavailable" || reason == "SignatureValidationFailed"
}

// meshImageFix is the fix of an injected container whose image cannot be
// had: the annotation that chose it, or the mesh's values.
func meshImageFix(p *corev1.Pod, container, injector string) string {
	if v := variantOver(p, container, injector); v != "" {
		// The injector's image with a variant none of the pod's
		// annotations asks for: a ProxyConfig's (or the mesh's) image type.
		fix := setTemplateAnnotations(p, map[string]string{"sidecar.istio.io/proxyImageType": "default"})
		if ownImageType(p) == v {
			return fix + "   # the variant " + fmt.Sprintf("%q", v) + " of the mesh's proxy image is not one the nodes can pull; it comes from the pod's own " + istio.AnnotationProxyConfig + " (image.imageType): this annotation wins over it (or take image out of that config)"
		}
		return fix +
			"   # the variant " + fmt.Sprintf("%q", v) + " of the mesh's proxy image is not one the nodes can pull; it comes from a ProxyConfig's spec.image.imageType (kubectl get proxyconfigs.networking.istio.io -n " + p.Namespace + ", and in the mesh's root namespace) or meshConfig.defaultConfig.image.imageType: the pod's own annotation wins over both (or remove that setting)"
	}
	if _, ok := p.Annotations["sidecar.istio.io/proxyImage"]; ok {
		return annotationPatch(p, "sidecar.istio.io/proxyImage", "") + "   # the injector then uses the mesh's own proxy image"
	}
	if v, ok := p.Annotations["sidecar.istio.io/proxyImageType"]; ok {
		return annotationPatch(p, "sidecar.istio.io/proxyImageType", "") + "   # the image variant " + fmt.Sprintf("%q", v) + " (a tag suffix of the mesh's proxy image) is not one the nodes can pull: the injector then uses the mesh's default variant"
	}
	return "kubectl get pod " + p.Name + " -n " + p.Namespace + ` -o jsonpath='{.spec.containers[*].image}{"\n"}{.spec.initContainers[*].image}'` +
		"   # the image comes from the injector's values (global.hub, global.tag, global.proxy.image of the revision's istio-sidecar-injector ConfigMap): make it one the nodes can pull"
}

// variantOver is the image variant (a tag suffix: debug, distroless) of
// the pod's container over the image the injector sets from its values
// and the pod's annotations, when the annotations do not ask for one; ""
// otherwise.
func variantOver(p *corev1.Pod, container, injector string) string {
	if p.Annotations["sidecar.istio.io/proxyImageType"] != "" || p.Annotations["sidecar.istio.io/proxyImage"] != "" {
		return ""
	}
	own := ownImageType(p)
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			if c.Name != container {
				continue
			}
			if v, ok := strings.CutPrefix(c.Image, injector+"-"); injector != "" && ok && v != "" && !strings.ContainsAny(v, "/:@") {
				return v
			}
			// The injector's image not known (a command that did not
			// read it): the variant the pod's own config asks for, as its
			// image's tag suffix.
			if injector == "" && own != "" && own != "default" && strings.HasSuffix(c.Image, "-"+own) {
				return own
			}
		}
	}
	return ""
}

// initPlatform is the init containers' platform findings: an app init
// container that failed (KM-INIT-008), any init container that cannot
// start (KM-INIT-009).
func (in *Input) initPlatform() []Finding {
	s, p := in.Startup, in.Pod
	if s == nil || p == nil {
		return nil
	}
	var out []Finding
	if f, ok := podSetup(in); ok {
		out = append(out, f)
	}
	for i, c := range s.InitContainers {
		switch {
		case c.Role == startup.RoleInit && c.Failing:
			ev := "init container " + c.FailureSummary()
			if c.Log != nil {
				ev += "; " + startup.LogEnd(c)
			}
			fix := "kubectl logs " + in.Target + " -c " + c.Name + startup.PreviousFlag(c) + "   # its failed run's log says why; the kubelet retries it by itself once that is fixed"
			f := Finding{Code: CodeInitContainerFailed, Status: Fail, Evidence: ev, Fix: fix}
			if why := capturedWithoutProxy(s, p, i); why != "" {
				f.Evidence += ". " + why + ": the likely cause"
				f.Mesh = why
				f.Fix = nativeSidecarFix(p, c.Name)
			}
			out = append(out, f)
		case waitingFailure(c) && c.Role != startup.RoleProxyNative && c.Role != startup.RoleNativeSidecar:
			ev := fmt.Sprintf("init container %s cannot start: %s%s", c.Name, kubeletSays(c), restartsNote(c))
			if evs := warningEventsBut(s, c.Name, c.Reason, 2); len(evs) > 0 {
				ev += "; events: " + strings.Join(evs, "; ")
			}
			f := Finding{Code: CodeCannotStart, Status: Fail, Evidence: ev, Fix: waitingFix(in, c, ev)}
			if why, fix, ok := in.seccompProfileMissing(c.Name, ev); ok {
				f.Evidence, f.Fix = ev+"; "+why, fix
			} else if by := injectedBy(p, c.Name, c.Reason); by != "" {
				if rewritten, fix, ok := in.imageRewrite(c.Name); ok && imageReason(c.Reason) {
					by, f.Fix = rewritten, fix
				} else if imageReason(c.Reason) {
					f.Fix = meshImageFix(p, c.Name, in.injectorImage())
				}
				f.Evidence += "; " + by
				f.Mesh = by
			}
			out = append(out, f)
		}
	}
	return out
}

// capturedWithoutProxy says why init container i runs with its traffic
// captured and no proxy to serve it ("" when it does not): istio-init (or
// istio-cni) wrote the rules before it, the proxy is a classic sidecar that
// starts after every init container, and it does not run as the proxy's
// uid.
func capturedWithoutProxy(s *startup.StartupReport, p *corev1.Pod, i int) string {
	if s.Native || s.Ambient {
		return ""
	}
	proxy := false
	for _, c := range p.Spec.Containers {
		proxy = proxy || c.Name == istio.ProxyContainer
	}
	if !proxy {
		return ""
	}
	by := ""
	for j, c := range s.InitContainers {
		switch {
		case c.Role == startup.RoleIstioValidation:
			by = "istio-cni captured the pod's traffic when its network was set up"
		case c.Role == startup.RoleIstioInit && j < i:
			by = "istio-init captured the pod's traffic before it ran"
		}
	}
	if by == "" {
		return ""
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name == s.InitContainers[i].Name && c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil && fmt.Sprint(*c.SecurityContext.RunAsUser) == istio.ProxyUID {
			return ""
		}
	}
	return by + ", and the classic sidecar starts only after every init container: its connections are redirected to port 15001, where nothing listens yet"
}

// nativeSidecarFix starts the proxy before the app's init containers,
// where the Istio release that injected the pod reads the pod annotation;
// else it names the other ways.
func nativeSidecarFix(p *corev1.Pod, container string) string {
	others := "run " + container + " as uid 1337, or exclude what it calls (traffic.sidecar.istio.io/excludeOutboundIPRanges or excludeOutboundPorts)"
	a := startup.NativeSidecarAdvice(p)
	if !a.Annotation {
		return others + "   # a native sidecar would start before it, but " + a.Note
	}
	note := ""
	if a.Note != "" {
		note = "; " + a.Note
	}
	return specFixAnnotation(p, istio.AnnotationNativeSidecar, "true") +
		"   # a native sidecar starts before the app's init containers (Kubernetes 1.29+" + note + "); or " + others
}

// grace is how long the pod may take to get ready: StartGrace, or longer
// when its probes' delays and thresholds give it longer (a startup probe
// only until its container has started), at most maxGrace.
func grace(p *corev1.Pod) time.Duration {
	started := map[string]bool{}
	for _, st := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		started[st.Name] = st.Started != nil && *st.Started
	}
	g := StartGrace
	for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
		var d time.Duration
		for _, pr := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe} {
			if pr == nil || pr == c.StartupProbe && started[c.Name] {
				continue
			}
			period, fails := pr.PeriodSeconds, pr.FailureThreshold
			if period <= 0 {
				period = 10
			}
			if fails <= 0 {
				fails = 3
			}
			if pr == c.ReadinessProbe {
				fails = min(fails, 3)
			}
			d += time.Duration(pr.InitialDelaySeconds)*time.Second + time.Duration(period)*time.Duration(fails)*time.Second
		}
		g = max(g, d+StartGrace/2)
	}
	return min(g, maxGrace)
}

// maxGrace bounds the start a pod's probes can give it.
const maxGrace = 15 * time.Minute

// readiness says whether the pod is ready, and since when it has been as it
// is (the Ready condition's transition, else its creation).
func readiness(p *corev1.Pod) (ready bool, since time.Time, reason string) {
	since = p.CreationTimestamp.Time
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			if !c.LastTransitionTime.IsZero() && c.LastTransitionTime.After(since) {
				since = c.LastTransitionTime.Time
			}
			if c.Reason != "" {
				reason = c.Reason
				if c.Message != "" {
					reason += ": " + oneLine(c.Message, 200)
				}
			}
			return c.Status == corev1.ConditionTrue, since, reason
		}
	}
	if len(p.Status.ContainerStatuses) < len(p.Spec.Containers) {
		return false, since, ""
	}
	var unready []string
	for _, st := range p.Status.ContainerStatuses {
		if !st.Ready {
			unready = append(unready, st.Name)
		}
	}
	if len(unready) > 0 {
		reason = "containers not ready: " + strings.Join(unready, ", ")
	}
	return len(unready) == 0, since, reason
}

// podNotReady: a running pod, past its start, that is not Ready while no
// container fails and no other check of its start explains why.
func podNotReady(in *Input) []Finding {
	p, s := in.Pod, in.Startup
	if p == nil || s == nil || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return nil
	}
	ready, since, reason := readiness(p)
	if ready || finishing(p, s.Now) {
		return nil
	}
	for _, f := range append(append([]Finding(nil), in.initAnswer().findings...), in.startAnswer().findings...) {
		if f.Status == Fail {
			return nil // a failing container or the proxy explains it
		}
	}
	age := s.Now.Sub(since).Round(time.Second)
	ev := "the pod is Running but not Ready"
	if age > 0 {
		ev += " for " + age.String()
	}
	if reason != "" {
		ev += " (" + reason + ")"
	}
	if evs := warningEvents(s, "", 3); len(evs) > 0 {
		ev += "; events: " + strings.Join(evs, "; ")
	}
	f := Finding{Status: Fail, Evidence: ev, Fix: "kubectl describe pod " + in.Target + "   # its events and probes say why it is not ready"}
	for _, e := range s.Events {
		if e.Container != "" && strings.Contains(e.Message, "Readiness probe failed") {
			f.Fix = fmt.Sprintf(`kubectl get pod %s -n %s -o jsonpath='{.spec.containers[?(@.name=="%s")].readinessProbe}'`, p.Name, p.Namespace, e.Container) +
				"   # " + e.Container + "'s readiness probe fails (events above): correct what it checks (its port, path or command) or the app's endpoint"
		}
	}
	in.readinessGateFinding(&f)
	if g := grace(p); age < g {
		f.Status = Warning
		f.Evidence += "; it is still within its start (" + g.String() + ")"
	}
	return []Finding{f}
}

// finishing says a running pod's work is done: a run-once pod (a Job's)
// whose app containers all ended with exit 0 within the last minute, or
// whose Ready condition turned PodCompleted then; the kubelet is stopping
// its native sidecars, and it is not ready, as it should be. Longer than
// that, it is stuck.
func finishing(p *corev1.Pod, now time.Time) bool {
	if p.Spec.RestartPolicy != corev1.RestartPolicyNever && p.Spec.RestartPolicy != corev1.RestartPolicyOnFailure {
		return false
	}
	recent := func(t metav1.Time) bool { return !t.IsZero() && now.Sub(t.Time) < time.Minute }
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Reason == "PodCompleted" && recent(c.LastTransitionTime) {
			return true
		}
	}
	done := 0
	for _, cs := range p.Status.ContainerStatuses {
		if istio.IsIstioContainer(cs.Name) {
			continue
		}
		if t := cs.State.Terminated; t == nil || t.ExitCode != 0 || !recent(t.FinishedAt) {
			return false
		}
		done++
	}
	return done > 0
}

// isPlatform says a finding reports the platform's state, not a mesh
// check's rule.
func isPlatform(f Finding) bool {
	switch f.Code {
	case CodeInitContainerFailed, CodeCannotStart, CodePodSetup, CodePodNotReady, CodeNotRunning, CodeAppFailing, CodeWorkloadShort, CodeJobFailed:
		return f.Mesh == ""
	}
	return false
}

// markUnexplained ends the platform's failures with noMeshCause when no
// mesh check found anything that would explain them.
func markUnexplained(d *Diagnosis, sidecar bool) {
	for _, f := range d.Findings {
		if !isPlatform(f) && (f.Status == Fail || f.Status == Warning) || f.Code == CodeSidecarTipsNode {
			return // (the sidecar's part in the pod's room, even unread, is not ruled out)
		}
	}
	for i := range d.Findings {
		f := &d.Findings[i]
		say := noMeshCause
		if sidecar && f.Code == CodePodNotReady && !strings.Contains(f.Evidence, "waits on its readiness gates") {
			// No check of the mesh found a cause, but the sidecar still
			// changes what a running app meets: said, not ruled out.
			say = noMeshCause + ", unless the app minds what the sidecar changes for it: inbound connections reach it from 127.0.0.6 (not the client's address: a source-address allow-list refuses them), and its outbound ones leave through the proxy"
		}
		if isPlatform(*f) && f.Status == Fail && !strings.Contains(f.Evidence, noMeshCause) {
			f.Evidence += "; " + say
			for j := range d.Checks {
				if d.Checks[j].Code == f.Code && d.Checks[j].Name == f.Stage && !strings.Contains(d.Checks[j].Evidence, noMeshCause) {
					d.Checks[j].Evidence += "; " + say
				}
			}
		}
	}
}

// restartsNote is " (N restarts)" for a container that has run before, ""
// for one that never did.
func restartsNote(c startup.ContainerStartup) string {
	if c.Restarts == 0 {
		return ""
	}
	return " (" + startup.Plural(c.Restarts, "restart") + ")"
}

// setupReasons are the kubelet's events of a pod it cannot set up.
var setupReasons = map[string]bool{"FailedMount": true, "FailedAttachVolume": true, "FailedCreatePodSandBox": true, "FailedMapVolume": true}

// podSetup is the finding of a pod the kubelet cannot set up: Pending on a
// node, no container started, and its warning events say why.
func podSetup(in *Input) (Finding, bool) {
	s, p := in.Startup, in.Pod
	if p.Status.Phase != corev1.PodPending || p.Spec.NodeName == "" || s.Ambient {
		return Finding{}, false
	}
	for _, c := range append(append([]startup.ContainerStartup(nil), s.InitContainers...), s.Containers...) {
		if c.StartedAt != nil || c.LastTermination != nil {
			return Finding{}, false
		}
	}
	var said []string
	for i := len(s.Events) - 1; i >= 0 && len(said) < 2; i-- {
		e := s.Events[i]
		if e.Type == corev1.EventTypeWarning && setupReasons[e.Reason] {
			line := e.Reason
			if e.Count > 1 {
				line += fmt.Sprintf(" (%d×)", e.Count)
			}
			said = append(said, line+": "+oneLine(e.Message, 300))
		}
	}
	if len(said) == 0 {
		return Finding{}, false
	}
	ev := "the kubelet cannot set the pod up, so none of its containers (istio-init included) has run: " + strings.Join(said, "; ")
	f := Finding{Code: CodePodSetup, Status: Fail, Evidence: ev, Fix: missingFix(in, ev, "kubectl describe pod "+in.Target+"   # its events name what is missing")}
	meshVolumeFinding(in, &f, said[0])
	meshConfigMapFinding(in, &f, said[0])
	return f, true
}

var (
	missingSecret    = regexp.MustCompile(`secrets? "([^"]+)" not found`)
	missingConfigMap = regexp.MustCompile(`configmaps? "([^"]+)" not found`)
	missingClaim     = regexp.MustCompile(`persistentvolumeclaims? "([^"]+)" not found`)
)

// missingFix is the command that creates what a message says is missing
// (a Secret, a ConfigMap, a claim), else fallback.
func missingFix(in *Input, msg, fallback string) string {
	ns := in.Namespace()
	if m := missingSecret.FindStringSubmatch(msg); m != nil {
		return "kubectl create secret generic " + m[1] + " -n " + ns + " --from-literal=KEY=VALUE   # the pod refers to Secret " + m[1] + ", which does not exist: create it with the keys the pod reads (or mark the reference optional)"
	}
	if m := missingConfigMap.FindStringSubmatch(msg); m != nil {
		return "kubectl create configmap " + m[1] + " -n " + ns + " --from-literal=KEY=VALUE   # the pod refers to ConfigMap " + m[1] + ", which does not exist: create it with the keys the pod reads (or mark the reference optional)"
	}
	if fix := missingKeyFix(in.Pod, msg); fix != "" {
		return fix
	}
	if m := missingClaim.FindStringSubmatch(msg); m != nil {
		return "kubectl create -n " + ns + ` -f - <<<'{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"` + m[1] +
			`"},"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}'   # the claim the pod mounts does not exist (size and access mode to suit; a StorageClass or PV must bind it)`
	}
	return fallback
}

// waitingFix is the fix of a container that waits for a reason it does not
// get past: what to create, the image to correct, or the events to read.
func waitingFix(in *Input, c startup.ContainerStartup, evidence string) string {
	describe := "kubectl describe pod " + in.Target + "   # the kubelet's events for container " + c.Name + " say what it is missing"
	if fix := missingFix(in, evidence, ""); fix != "" {
		return fix
	}
	if strings.Contains(evidence, "runAsNonRoot and image will run as root") && in.Pod != nil {
		// The pod asks for a non-root user and the image's user is root:
		// a uid of the app's own (not 0, and not the proxy's 1337).
		if owner := templateOwner(in.Pod); owner != "" && !strings.HasPrefix(owner, "job/") {
			return fmt.Sprintf(`kubectl patch %s -n %s --type=strategic -p '{"spec":{"template":{"spec":{"containers":[{"name":%q,"securityContext":{"runAsUser":1000}}]}}}}'`, owner, in.Namespace(), c.Name) +
				"   # a choice: a non-root uid the image can run as (not 0, not the proxy's 1337); or an image built with a non-root USER"
		}
		return "set securityContext.runAsUser of container " + c.Name + " to a non-root uid the image can run as (not 0, not the proxy's 1337) in the pod's manifest, then re-create the pod"
	}
	if imageReason(c.Reason) || c.Reason == "InvalidImageName" {
		image := ""
		if spec, _ := in.container(c.Name); spec != nil {
			image = spec.Image
		}
		why := "it cannot be pulled (wrong name or tag, or a registry that needs imagePullSecrets)"
		if c.Reason == "ErrImageNeverPull" {
			why = "it is not on the node and its pull policy Never forbids pulling it"
		}
		if in.Pod == nil {
			return describe
		}
		if owner := templateOwner(in.Pod); owner != "" && !strings.HasPrefix(owner, "job/") {
			return "kubectl set image " + owner + " -n " + in.Namespace() + " " + c.Name + "=IMAGE   # " + image + ": " + why + "; name an image that exists"
		}
		return "correct container " + c.Name + "'s image in the pod's manifest, then re-create the pod   # " + image + ": " + why
	}
	return describe
}

// Namespace is the namespace of the pod (or of the workload) diagnosed.
func (in *Input) Namespace() string {
	switch {
	case in.Pod != nil:
		return in.Pod.Namespace
	case in.Workload != nil:
		return in.Workload.Namespace
	case in.Injection != nil:
		return in.Injection.Namespace
	}
	return ""
}

// container is the spec and the startup of container name.
func (in *Input) container(name string) (*corev1.Container, *startup.ContainerStartup) {
	var spec *corev1.Container
	if p := in.Pod; p != nil {
		for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for i := range cs {
				if cs[i].Name == name {
					spec = &cs[i]
				}
			}
		}
	}
	var st *startup.ContainerStartup
	if s := in.Startup; s != nil {
		for _, list := range [][]startup.ContainerStartup{s.InitContainers, s.Containers} {
			for i := range list {
				if list[i].Name == name {
					st = &list[i]
				}
			}
		}
	}
	return spec, st
}

// refineFailing gives a failing container's finding what the kubelet says
// of its kills (a liveness probe, its memory limit) and the fix that
// follows: the probe to correct, the limit to raise, the annotation that
// set the sidecar's.
func (in *Input) refineFailing(f *Finding) {
	spec, st := in.container(f.container)
	if spec == nil || st == nil {
		return
	}
	if evs := warningEventsBut(in.Startup, st.Name, "", 2); len(evs) > 0 && !strings.Contains(f.Evidence, "events:") {
		f.Evidence += "; events: " + strings.Join(evs, "; ")
	}
	// The run before counts too: a kill the runtime reported as exit 137
	// without its reason follows one it reported as OOMKilled.
	oom := strings.Contains(st.LastFailure, "OOMKilled") || st.Reason == "OOMKilled" || st.LastTermination != nil && st.LastTermination.Reason == "OOMKilled"
	liveness := false
	for _, e := range in.Startup.Events {
		liveness = liveness || e.Container == st.Name && strings.Contains(e.Message, "Liveness probe failed")
	}
	p := in.Pod
	switch {
	case oom && istio.IsIstioContainer(st.Name):
		limit := spec.Resources.Limits.Memory().String()
		f.Evidence += fmt.Sprintf("; it was killed at its memory limit (%s)", limit)
		if v, ok := p.Annotations[istio.AnnotationProxyMemoryLimit]; ok {
			f.Mesh = fmt.Sprintf("sidecar.istio.io/proxyMemoryLimit=%q", v)
			f.Evidence += ", set by the pod's " + f.Mesh
			f.Fix = annotationPatch(p, istio.AnnotationProxyMemoryLimit, "") + "   # the sidecar then gets the mesh's own limit; or set it higher"
		} else {
			f.Fix = specFixAnnotation(p, istio.AnnotationProxyMemoryLimit, "1Gi") + "   # the sidecar's memory limit is the mesh's default: give this workload more"
		}
	case oom:
		limit := spec.Resources.Limits.Memory()
		f.Evidence += fmt.Sprintf("; it was killed at its memory limit (%s)", limit.String())
		if owner := templateOwner(p); owner != "" && !limit.IsZero() {
			more := limit.DeepCopy()
			more.Add(*limit)
			f.Fix = fmt.Sprintf("kubectl set resources %s -n %s -c %s --limits=memory=%s   # OOMKilled at %s: give it more memory (or make it use less)", owner, p.Namespace, st.Name, more.String(), limit.String())
		} else {
			f.Fix = "raise container " + st.Name + "'s memory limit in the pod's manifest (OOMKilled at " + limit.String() + "), then re-create the pod"
		}
	case liveness && spec.LivenessProbe != nil:
		f.Evidence += "; the kubelet kills it because its liveness probe fails"
		f.Fix = fmt.Sprintf(`kubectl get pod %s -n %s -o jsonpath='{.spec.containers[?(@.name=="%s")].livenessProbe}'`, p.Name, p.Namespace, st.Name) +
			"   # the liveness probe fails (events above): correct what it checks (its port, path or command), then re-create the pod"
	}
}
