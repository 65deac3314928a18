package startup

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// StartupFacts is what the startup analysis reads for one pod.
type StartupFacts struct {
	Pod *corev1.Pod
	// Events about the pod (any order).
	Events []corev1.Event
	// Logs are the last lines of the containers that failed, by container.
	Logs map[string]LogTail
	// OwnerKind is the pod's controller kind (Job, ReplicaSet, …), "" for none.
	OwnerKind string
	Now       time.Time
}

// LogTail is the end of a container's log, current and previous run.
type LogTail struct {
	Current  []string `json:"current,omitempty"`
	Previous []string `json:"previous,omitempty"`
	// Unavailable says why the log could not be read (e.g. forbidden).
	Unavailable string `json:"unavailable,omitempty"`
}

// istioProxyName is the container Istio's injector adds, whether as a
// classic or a native sidecar.
const istioProxyName = "istio-proxy"

// Container roles.
const (
	RoleIstioInit       = "istio-init"
	RoleIstioValidation = "istio-validation"
	RoleProxyNative     = "proxy (native sidecar)"
	RoleProxy           = "proxy (sidecar)"
	RoleNativeSidecar   = "native sidecar"
	RoleInit            = "init"
	RoleApp             = "app"
)

// Termination is how a container run ended.
type Termination struct {
	ExitCode   int32      `json:"exitCode"`
	Reason     string     `json:"reason,omitempty"`
	Message    string     `json:"message,omitempty"`
	StartedAt  *time.Time `json:"startedAt,omitempty"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
}

// ContainerStartup is one container's startup, as the kubelet reports it.
type ContainerStartup struct {
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	Init       bool       `json:"init"`
	State      string     `json:"state"` // waiting, running, terminated
	Reason     string     `json:"reason,omitempty"`
	Message    string     `json:"message,omitempty"`
	ExitCode   *int32     `json:"exitCode"`
	StartedAt  *time.Time `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt"`
	// FirstStartedAt is the earliest start the kubelet still reports (the
	// last termination's, after a restart).
	FirstStartedAt  *time.Time   `json:"firstStartedAt,omitempty"`
	Duration        string       `json:"duration,omitempty"`
	Ready           bool         `json:"ready"`
	Started         *bool        `json:"started,omitempty"`
	Restarts        int32        `json:"restarts"`
	LastTermination *Termination `json:"lastTermination,omitempty"`
	// ReadyAt is when it became ready, when the events tell.
	ReadyAt *time.Time `json:"readyAt,omitempty"`
	Log     *LogTail   `json:"log,omitempty"`
	// Failure explains a recognised failure.
	Failure string `json:"failure,omitempty"`
}

// Hazard is an ordering or startup problem, with its fix.
type Hazard struct {
	ID        string `json:"id"`
	Container string `json:"container"`
	Message   string `json:"message"`
	Fix       string `json:"fix"`
}

// EventLine is one kubelet event about a container.
type EventLine struct {
	Time      time.Time `json:"time"`
	Reason    string    `json:"reason"`
	Container string    `json:"container,omitempty"`
	Message   string    `json:"message"`
	Count     int32     `json:"count"`
}

// StartupReport is the startup analysis of one pod.
type StartupReport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Phase     string `json:"phase"`
	Node      string `json:"node,omitempty"`
	// Mesh is "istio" when the pod has Istio's containers, "" otherwise.
	Mesh           string             `json:"mesh"`
	CreatedAt      time.Time          `json:"createdAt"`
	InitContainers []ContainerStartup `json:"initContainers"`
	Containers     []ContainerStartup `json:"containers"`
	// StartOrder names the containers by when they (first) started.
	StartOrder []string `json:"startOrder"`
	Native     bool     `json:"nativeSidecar"`
	// Ambient is set for a pod in ambient mode (no sidecar): its
	// ambient.istio.io/redirection annotation, or Istio's CNI plugin
	// handing its sandbox to the istio-cni node agent, says so.
	Ambient bool        `json:"ambient,omitempty"`
	Hold    bool        `json:"holdApplicationUntilProxyStarts"`
	Hazards []Hazard    `json:"hazards"`
	Events  []EventLine `json:"events"`
	// InitResult is "completed", "running", "failed", "crash-looping" or "none".
	InitResult string `json:"initResult"`
	// OrderVerdict says in a few words whether the order is safe.
	OrderVerdict string   `json:"orderVerdict"`
	Notes        []string `json:"notes,omitempty"`
	// Incomplete names what could not be read (events, logs) and the
	// permission it needs: the report says nothing about those.
	Incomplete []string `json:"incomplete,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func roleOf(c corev1.Container, init bool) string {
	native := init && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
	switch {
	case c.Name == "istio-init":
		return RoleIstioInit
	case c.Name == "istio-validation":
		return RoleIstioValidation
	case c.Name == istioProxyName && native:
		return RoleProxyNative
	case c.Name == istioProxyName:
		return RoleProxy
	case native:
		return RoleNativeSidecar
	case init:
		return RoleInit
	}
	return RoleApp
}

func containerStartup(c corev1.Container, init bool, st *corev1.ContainerStatus) ContainerStartup {
	cs := ContainerStartup{Name: c.Name, Role: roleOf(c, init), Init: init, State: "waiting"}
	if st == nil {
		cs.Reason = "not created yet"
		return cs
	}
	cs.Ready, cs.Started, cs.Restarts = st.Ready, st.Started, st.RestartCount
	switch {
	case st.State.Running != nil:
		cs.State = "running"
		cs.StartedAt = timePtr(st.State.Running.StartedAt.Time)
	case st.State.Terminated != nil:
		t := st.State.Terminated
		cs.State, cs.Reason, cs.Message = "terminated", t.Reason, t.Message
		code := t.ExitCode
		cs.ExitCode = &code
		cs.StartedAt, cs.FinishedAt = timePtr(t.StartedAt.Time), timePtr(t.FinishedAt.Time)
	case st.State.Waiting != nil:
		cs.Reason, cs.Message = st.State.Waiting.Reason, st.State.Waiting.Message
	}
	if t := st.LastTerminationState.Terminated; t != nil {
		cs.LastTermination = &Termination{ExitCode: t.ExitCode, Reason: t.Reason, Message: t.Message,
			StartedAt: timePtr(t.StartedAt.Time), FinishedAt: timePtr(t.FinishedAt.Time)}
	}
	cs.FirstStartedAt = cs.StartedAt
	if cs.LastTermination != nil && cs.LastTermination.StartedAt != nil && (cs.FirstStartedAt == nil || cs.LastTermination.StartedAt.Before(*cs.FirstStartedAt)) {
		cs.FirstStartedAt = cs.LastTermination.StartedAt
	}
	if cs.StartedAt != nil && cs.FinishedAt != nil {
		cs.Duration = cs.FinishedAt.Sub(*cs.StartedAt).String()
	}
	return cs
}

// validationNoRedirect is istio-validation's known failure (also its exit 126).
const validationNoRedirect = "istio-validation found no redirection: the Istio CNI plugin had not set up this pod's rules (pod scheduled before istio-cni-node was ready on the node)"

// knownFailures recognises istio-init / istio-validation failures from
// their logs and termination messages.
var knownFailures = []struct {
	match []string // any of these
	also  string   // and this, when set
	why   string
}{
	// First: without NET_ADMIN every iptables call fails, each in its own
	// words ("could not fetch rule set generation id: Permission denied").
	{[]string{"permission denied", "operation not permitted", "cap_net_admin"}, "",
		"istio-init lacks the NET_ADMIN/NET_RAW capabilities it needs (a PodSecurity, PSP or SCC policy removed them)"},
	{[]string{"can't initialize iptables table", "table does not exist", "could not fetch rule set generation id"}, "",
		"iptables cannot use the nat table here: the node's kernel lacks the module for this backend, or the legacy/nft backends are mixed (iptables-legacy vs iptables-nft)"},
	{[]string{"iptables validation failed", "workload is not ready for istio"}, "",
		validationNoRedirect},
	{[]string{"failed parsing cidr", "invalid cidr", "invalid cidr address"}, "",
		"an invalid CIDR reached istio-iptables (istiod refuses invalid CIDR annotations at admission, so it came from the mesh-wide values global.proxy.includeIPRanges / excludeIPRanges)"},
	{[]string{"invalid port/service"}, "",
		"iptables-restore refused a port istio-iptables was given: a traffic.sidecar.istio.io/includeOutboundPorts value that is not a port number (istiod does not check that annotation at admission), or a mesh-wide port list in the values"},
	{[]string{"chain already exists"}, "",
		"istio-init ran again in a network namespace that already has its rules (pod sandbox kept, init container re-run)"},
	{[]string{"iptables-restore"}, "error occurred at line",
		"iptables-restore rejected the rules istio-iptables generated"},
	{[]string{"iptables-restore"}, "failed",
		"iptables-restore rejected the rules istio-iptables generated"},
}

func recognise(cs *ContainerStartup) {
	if cs.Role != RoleIstioInit && cs.Role != RoleIstioValidation {
		return
	}
	var text []string
	text = append(text, cs.Message)
	if cs.LastTermination != nil {
		text = append(text, cs.LastTermination.Message)
	}
	if cs.Log != nil {
		text = append(text, cs.Log.Current...)
		text = append(text, cs.Log.Previous...)
	}
	all := strings.ToLower(strings.Join(text, "\n"))
	for _, f := range knownFailures {
		hit := false
		for _, m := range f.match {
			if strings.Contains(all, m) {
				hit = true
			}
		}
		if hit && (f.also == "" || strings.Contains(all, f.also)) {
			cs.Failure = f.why
			return
		}
	}
	code := int32(-1)
	if cs.ExitCode != nil {
		code = *cs.ExitCode
	} else if cs.LastTermination != nil {
		code = cs.LastTermination.ExitCode
	}
	if code == 126 && cs.Role == RoleIstioValidation {
		cs.Failure = validationNoRedirect
	}
}

func failed(cs ContainerStartup) bool {
	if cs.ExitCode != nil && *cs.ExitCode != 0 {
		return true
	}
	return cs.State == "waiting" && cs.Reason == "CrashLoopBackOff"
}

// AnalyzeStartup reports how a pod's containers started, in what order,
// and what went or may go wrong.
func AnalyzeStartup(f StartupFacts) *StartupReport {
	p := f.Pod
	r := &StartupReport{Namespace: p.Namespace, Name: p.Name, Phase: string(p.Status.Phase), Node: p.Spec.NodeName,
		CreatedAt: p.CreationTimestamp.Time, Hazards: []Hazard{}, Events: []EventLine{}}
	statuses := map[string]*corev1.ContainerStatus{}
	for i := range p.Status.InitContainerStatuses {
		statuses["init/"+p.Status.InitContainerStatuses[i].Name] = &p.Status.InitContainerStatuses[i]
	}
	for i := range p.Status.ContainerStatuses {
		statuses["app/"+p.Status.ContainerStatuses[i].Name] = &p.Status.ContainerStatuses[i]
	}
	for _, c := range p.Spec.InitContainers {
		cs := containerStartup(c, true, statuses["init/"+c.Name])
		if l, ok := f.Logs[c.Name]; ok {
			l := l
			cs.Log = &l
		}
		recognise(&cs)
		r.InitContainers = append(r.InitContainers, cs)
	}
	for _, c := range p.Spec.Containers {
		cs := containerStartup(c, false, statuses["app/"+c.Name])
		if l, ok := f.Logs[c.Name]; ok {
			l := l
			cs.Log = &l
		}
		r.Containers = append(r.Containers, cs)
	}
	if r.InitContainers == nil {
		r.InitContainers = []ContainerStartup{}
	}

	// Events, by time; readiness of the proxy from its probe events.
	for _, e := range f.Events {
		t := e.LastTimestamp.Time
		if t.IsZero() {
			t = e.EventTime.Time
		}
		if t.IsZero() {
			t = e.FirstTimestamp.Time
		}
		r.Events = append(r.Events, EventLine{Time: t, Reason: e.Reason, Container: containerOfField(e.InvolvedObject.FieldPath), Message: e.Message, Count: max(e.Count, 1)})
	}
	sort.SliceStable(r.Events, func(i, j int) bool { return r.Events[i].Time.Before(r.Events[j].Time) })

	var proxy *ContainerStartup
	for i := range r.InitContainers {
		if r.InitContainers[i].Name == istioProxyName {
			proxy = &r.InitContainers[i]
			r.Native = r.InitContainers[i].Role == RoleProxyNative
		}
		if r.InitContainers[i].Role == RoleIstioInit || r.InitContainers[i].Role == RoleIstioValidation {
			r.Mesh = "istio"
		}
	}
	for i := range r.Containers {
		if r.Containers[i].Name == istioProxyName {
			proxy = &r.Containers[i]
		}
	}
	if proxy != nil {
		r.Mesh = "istio"
		proxy.ReadyAt = readyAt(proxy, r.Events, p)
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			if c.Name == istioProxyName && c.Lifecycle != nil && c.Lifecycle.PostStart != nil && c.Lifecycle.PostStart.Exec != nil &&
				strings.Contains(strings.Join(c.Lifecycle.PostStart.Exec.Command, " "), "pilot-agent wait") {
				r.Hold = true
			}
		}
	}
	if _, ok := p.Annotations[ambientRedirection]; ok || ambientSandboxEvent(r.Events) != nil {
		r.Ambient = proxy == nil
	}
	switch {
	case r.Ambient:
		r.Mesh = "istio"
		r.Notes = append(r.Notes, "ambient mode: no sidecar; istio-cni sets the pod's capture up as its network is created, and ztunnel on the node carries its traffic")
	case r.Mesh == "":
		r.Notes = append(r.Notes, "no mesh container (istio-init, istio-validation, istio-proxy) in this pod: the timeline shows its own containers")
	}

	// Start order.
	type started struct {
		name string
		at   time.Time
		idx  int
	}
	var order []started
	for i, c := range append(append([]ContainerStartup{}, r.InitContainers...), r.Containers...) {
		if c.FirstStartedAt != nil {
			order = append(order, started{c.Name, *c.FirstStartedAt, i})
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].at.Before(order[j].at) })
	r.StartOrder = []string{}
	for _, o := range order {
		r.StartOrder = append(r.StartOrder, o.name)
	}

	r.InitResult = initResult(r.InitContainers)
	startupHazards(r, f, proxy)
	switch {
	case r.Mesh == "" || r.Ambient && len(r.Hazards) == 0:
		r.OrderVerdict = "no sidecar"
	case len(r.Hazards) == 0:
		r.OrderVerdict = "ok"
	default:
		ids := make([]string, 0, len(r.Hazards))
		for _, h := range r.Hazards {
			ids = append(ids, h.ID)
		}
		r.OrderVerdict = strings.Join(ids, ", ")
	}
	return r
}

func containerOfField(fieldPath string) string {
	// spec.containers{name} / spec.initContainers{name}
	if i := strings.Index(fieldPath, "{"); i >= 0 && strings.HasSuffix(fieldPath, "}") {
		return fieldPath[i+1 : len(fieldPath)-1]
	}
	return ""
}

// readyAt estimates when the proxy became ready: after its last failed
// startup or readiness probe, if it is ready now; for a native sidecar, the
// pod's Initialized time is when its startup probe passed.
func readyAt(proxy *ContainerStartup, events []EventLine, p *corev1.Pod) *time.Time {
	if !proxy.Ready && (proxy.Started == nil || !*proxy.Started) {
		return nil
	}
	if proxy.Role == RoleProxyNative {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodInitialized && c.Status == corev1.ConditionTrue {
				return timePtr(c.LastTransitionTime.Time)
			}
		}
	}
	var last time.Time
	for _, e := range events {
		if e.Container == istioProxyName && e.Reason == "Unhealthy" && (strings.Contains(e.Message, "Startup probe") || strings.Contains(e.Message, "Readiness probe")) {
			last = e.Time
		}
	}
	if !last.IsZero() {
		return &last
	}
	return proxy.StartedAt
}

func initResult(cs []ContainerStartup) string {
	if len(cs) == 0 {
		return "none"
	}
	result := "completed"
	for _, c := range cs {
		if c.Role == RoleProxyNative || c.Role == RoleNativeSidecar {
			// A native sidecar holds back the next containers until it has started.
			if c.Started == nil || !*c.Started || c.State != "running" {
				result = "running"
			}
			continue
		}
		switch {
		case c.State == "waiting" && c.Reason == "CrashLoopBackOff":
			return "crash-looping"
		case c.ExitCode != nil && *c.ExitCode != 0 && c.Restarts > 0:
			return "crash-looping"
		case c.ExitCode != nil && *c.ExitCode != 0:
			return "failed"
		case c.State != "terminated":
			result = "running"
		}
	}
	return result
}

func startupHazards(r *StartupReport, f StartupFacts, proxy *ContainerStartup) {
	add := func(id, container, msg, fix string) {
		r.Hazards = append(r.Hazards, Hazard{ID: id, Container: container, Message: msg, Fix: fix})
	}
	ns := r.Namespace
	for _, c := range r.InitContainers {
		if !failed(c) {
			continue
		}
		why := c.Failure
		if why == "" {
			why = "see its log"
		}
		code := int32(0)
		if c.ExitCode != nil {
			code = *c.ExitCode
		} else if c.LastTermination != nil {
			code = c.LastTermination.ExitCode
		}
		switch c.Role {
		case RoleIstioInit:
			// A command, then what to do with what it shows, as a comment:
			// the line runs as pasted.
			logs := fmt.Sprintf("kubectl logs %s -n %s -c istio-init", r.Name, ns)
			if c.Restarts > 0 {
				logs += " --previous"
			}
			next := "its log says why; fix that, and the kubelet retries istio-init by itself"
			if c.Failure != "" {
				next = "fix the cause above, and the kubelet retries istio-init by itself"
			}
			add("istio-init-failed", c.Name, fmt.Sprintf("istio-init exited %d (%d restarts): %s", code, c.Restarts, why), logs+"   # "+next)
		case RoleIstioValidation:
			add("validation-failed", c.Name, fmt.Sprintf("istio-validation exited %d (%d restarts): %s", code, c.Restarts, why),
				"check the istio-cni-node pod on node "+r.Node+" (kubectl -n istio-system get pods -l k8s-app=istio-cni-node -o wide); with cni.repair.deletePods=true Istio deletes such pods for you")
		}
	}
	// A pod on no node has started nothing: it waits for the scheduler, not
	// for its init containers.
	if r.Phase == string(corev1.PodPending) && r.InitResult != "completed" && r.InitResult != "none" && f.Pod.Spec.NodeName != "" {
		age := f.Now.Sub(r.CreatedAt).Round(time.Second)
		if age > time.Minute || r.InitResult == "failed" || r.InitResult == "crash-looping" {
			stuck := ""
			for _, c := range r.InitContainers {
				if c.State != "terminated" || failed(c) {
					stuck = c.Name
					break
				}
			}
			add("stuck-in-init", stuck, fmt.Sprintf("the pod has been initialising for %s; init container %s has not completed", age, stuck),
				fmt.Sprintf("kubectl describe pod %s -n %s; kubectl logs %s -n %s -c %s", r.Name, ns, r.Name, ns, stuck))
		}
	}
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
	if !r.Native && capturedFrom >= 0 {
		for i, c := range r.InitContainers {
			if i > capturedFrom && c.Role == RoleInit || cni && c.Role == RoleInit {
				add("init-after-capture", c.Name,
					fmt.Sprintf("init container %s runs after the capture rules are in place but before any proxy: its outbound connections are redirected to 15001, where nothing listens yet", c.Name),
					"run it as uid 1337 (runAsUser: 1337), or exclude what it calls (traffic.sidecar.istio.io/excludeOutboundIPRanges or excludeOutboundPorts), or use native sidecars (sidecar.istio.io/nativeSidecar: \"true\")")
			}
		}
	}
	if proxy.Role == RoleProxy {
		if f.OwnerKind == "Job" || f.Pod.Labels["job-name"] != "" || f.Pod.Labels["batch.kubernetes.io/job-name"] != "" {
			add("job-with-classic-sidecar", proxy.Name, "this Job's pod has a classic istio-proxy container: it keeps running after the job's own containers finish, so the Job never completes",
				"use a native sidecar (annotation sidecar.istio.io/nativeSidecar: \"true\", Kubernetes 1.28+), or have the job call POST http://localhost:15020/quitquitquit when it is done")
		}
		if !r.Hold {
			for _, c := range r.Containers {
				if c.Role != RoleApp || c.FirstStartedAt == nil {
					continue
				}
				ready := proxy.ReadyAt
				switch {
				case ready != nil && c.FirstStartedAt.Before(*ready):
					add("app-before-proxy-ready", c.Name, fmt.Sprintf("%s started %s before istio-proxy was ready: its first connections can fail", c.Name, ready.Sub(*c.FirstStartedAt).Round(time.Second)),
						"hold the app until the proxy is ready (annotation proxy.istio.io/config: '{\"holdApplicationUntilProxyStarts\": true}') or use native sidecars (sidecar.istio.io/nativeSidecar: \"true\")")
				case ready != nil && c.FirstStartedAt.Equal(*ready):
					// The kubelet's times have a resolution of one second, and
					// without the hold nothing makes it wait for the proxy.
					add("app-before-proxy-ready", c.Name, fmt.Sprintf("%s started within the second istio-proxy became ready, with no hold configured: nothing made it wait, so its first connections can fail", c.Name),
						"hold the app until the proxy is ready (annotation proxy.istio.io/config: '{\"holdApplicationUntilProxyStarts\": true}') or use native sidecars (sidecar.istio.io/nativeSidecar: \"true\")")
				case ready == nil && proxy.FirstStartedAt != nil && !c.FirstStartedAt.After(*proxy.FirstStartedAt):
					add("app-before-proxy-ready", c.Name, fmt.Sprintf("%s started before istio-proxy (and no hold is configured): its first connections can fail", c.Name),
						"hold the app until the proxy is ready (annotation proxy.istio.io/config: '{\"holdApplicationUntilProxyStarts\": true}') or use native sidecars (sidecar.istio.io/nativeSidecar: \"true\")")
				}
			}
		}
	}
	if proxy.State == "running" && !proxy.Ready {
		since := ""
		if proxy.StartedAt != nil {
			since = " for " + f.Now.Sub(*proxy.StartedAt).Round(time.Second).String()
		}
		last := ""
		for _, e := range r.Events {
			if e.Container == istioProxyName && e.Reason == "Unhealthy" {
				last = ": " + e.Message
			}
		}
		add("proxy-not-ready", proxy.Name, "istio-proxy has been running"+since+" without becoming ready (health check on port 15021)"+last,
			fmt.Sprintf("kubectl logs %s -n %s -c istio-proxy; check that istiod is reachable and the proxy received its configuration", r.Name, ns))
	}
}

// StartupSeverity orders pods for the many-pods view: higher is worse.
func StartupSeverity(r *StartupReport) int {
	switch {
	case r.InitResult == "crash-looping" || r.InitResult == "failed":
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
	ambientRedirection = "ambient.istio.io/redirection"
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
	if f.Pod.Annotations[ambientRedirection] == "pending" {
		add("ambient-pending", "", "istio-cni wrote the pod's capture rules, but ztunnel on "+node+" has not taken the pod (ambient.istio.io/redirection=pending): its connections are redirected to ztunnel's ports, where nothing serves them yet",
			agents+"   # istio-cni retries once ztunnel there is ready")
	}
}
