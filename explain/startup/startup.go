package startup

import (
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
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
	// Workload is the object that re-creates the pod, as kubectl names it
	// ("deployment/web"), "" for none: fixes name it.
	Workload string
	Now      time.Time
}

// LogTail is the end of a container's log, current and previous run.
type LogTail struct {
	Current  []string `json:"current,omitempty"`
	Previous []string `json:"previous,omitempty"`
	// Unavailable says why the log could not be read (e.g. forbidden).
	Unavailable string `json:"unavailable,omitempty"`
}

// Container roles.
const (
	RoleIstioInit       = istio.InitContainer
	RoleIstioValidation = istio.ValidationContainer
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
	// Failing says the container is failing: it failed and has not got
	// past it, whatever phase its crash loop is in this second (waiting
	// in back-off, just terminated, or running its next attempt).
	Failing bool `json:"failing,omitempty"`
	// LastFailure is the kubelet's account of its last failed run: exit
	// code, reason and message ("exit 1 (Error)").
	LastFailure string `json:"lastFailure,omitempty"`
	// Failure explains a recognised failure.
	Failure string `json:"failure,omitempty"`
	// Cause is the recognised failure's cause (Cause* constants), "" when
	// it has no name.
	Cause string `json:"cause,omitempty"`
	// Recovered says it restarted (after a failure or not) and runs ready
	// now, in a pod that is Ready, or completed in a pod that Succeeded:
	// its restarts are evidence, not a failure (classify says when a crash
	// loop is not recovered though ready).
	Recovered bool `json:"recovered,omitempty"`
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
	// Type is the event's type: Warning, or Normal.
	Type string `json:"type,omitempty"`
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
	// Now is when the report was made: the states' ages are read against it.
	Now time.Time `json:"-"`
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
	case c.Name == istio.InitContainer:
		return RoleIstioInit
	case c.Name == istio.ValidationContainer:
		return RoleIstioValidation
	case c.Name == istio.ProxyContainer && native:
		return RoleProxyNative
	case c.Name == istio.ProxyContainer:
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

// AnalyzeStartup reports how a pod's containers started, in what order,
// and what went or may go wrong.
func AnalyzeStartup(f StartupFacts) *StartupReport {
	p := f.Pod
	r := &StartupReport{Namespace: p.Namespace, Name: p.Name, Phase: string(p.Status.Phase), Node: p.Spec.NodeName,
		CreatedAt: p.CreationTimestamp.Time, Hazards: []Hazard{}, Events: []EventLine{}, Now: f.Now}
	statuses := map[string]*corev1.ContainerStatus{}
	for i := range p.Status.InitContainerStatuses {
		statuses["init/"+p.Status.InitContainerStatuses[i].Name] = &p.Status.InitContainerStatuses[i]
	}
	for i := range p.Status.ContainerStatuses {
		statuses["app/"+p.Status.ContainerStatuses[i].Name] = &p.Status.ContainerStatuses[i]
	}
	for _, c := range p.Spec.InitContainers {
		cs := containerStartup(c, true, statuses["init/"+c.Name])
		classify(&cs, p, f.Now)
		if l, ok := f.Logs[c.Name]; ok {
			l := l
			cs.Log = &l
		}
		recognise(&cs)
		r.InitContainers = append(r.InitContainers, cs)
	}
	for _, c := range p.Spec.Containers {
		cs := containerStartup(c, false, statuses["app/"+c.Name])
		classify(&cs, p, f.Now)
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
		r.Events = append(r.Events, EventLine{Time: t, Reason: e.Reason, Container: containerOfField(e.InvolvedObject.FieldPath), Message: e.Message, Count: max(e.Count, 1), Type: e.Type})
	}
	sort.SliceStable(r.Events, func(i, j int) bool { return r.Events[i].Time.Before(r.Events[j].Time) })
	firstStartedFromEvents(r, f.Events)

	var proxy *ContainerStartup
	for i := range r.InitContainers {
		if r.InitContainers[i].Name == istio.ProxyContainer {
			proxy = &r.InitContainers[i]
			r.Native = r.InitContainers[i].Role == RoleProxyNative
		}
		if r.InitContainers[i].Role == RoleIstioInit || r.InitContainers[i].Role == RoleIstioValidation {
			r.Mesh = "istio"
		}
	}
	for i := range r.Containers {
		if r.Containers[i].Name == istio.ProxyContainer {
			proxy = &r.Containers[i]
		}
	}
	if proxy != nil {
		r.Mesh = "istio"
		proxy.ReadyAt = readyAt(proxy, r.Events, p)
		for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
			if c.Name == istio.ProxyContainer && c.Lifecycle != nil && c.Lifecycle.PostStart != nil && c.Lifecycle.PostStart.Exec != nil &&
				strings.Contains(strings.Join(c.Lifecycle.PostStart.Exec.Command, " "), "pilot-agent wait") {
				r.Hold = true
			}
		}
	}
	if _, ok := p.Annotations[istio.AnnotationRedirection]; ok || ambientSandboxEvent(r.Events) != nil {
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
	for _, c := range append(append([]ContainerStartup(nil), r.InitContainers...), r.Containers...) {
		if c.Recovered {
			r.Notes = append(r.Notes, c.RecoverySummary(r.Name, r.Namespace)+" (the pod is "+readyOrDone(r)+"): a past restart, not a failure")
		}
	}
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

// readyOrDone is what a pod with a Recovered container is: Ready, or
// Succeeded.
func readyOrDone(r *StartupReport) string {
	switch r.Phase {
	case string(corev1.PodSucceeded):
		return "Succeeded"
	case string(corev1.PodRunning):
		done := len(r.Containers) > 0
		for _, c := range r.Containers {
			done = done && c.State == "terminated"
		}
		if done {
			return "finishing: its containers are done"
		}
	}
	return "Ready"
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
		if e.Container == istio.ProxyContainer && e.Reason == "Unhealthy" && (strings.Contains(e.Message, "Startup probe") || strings.Contains(e.Message, "Readiness probe")) {
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
			// A native sidecar holds back the next containers until it has
			// started; once the pod has finished, the kubelet ends it.
			if c.State == "terminated" && (c.ExitCode == nil || *c.ExitCode == 0 || !c.Failing) {
				continue
			}
			if c.Started == nil || !*c.Started || c.State != "running" {
				result = "running"
			}
			continue
		}
		switch {
		case c.Failing && (c.Restarts > 0 || c.State != "terminated"):
			return "crash-looping"
		case c.Failing:
			return "failed"
		case c.State != "terminated":
			result = "running"
		}
	}
	return result
}

// firstStartedFromEvents takes a container's first start from the
// kubelet's Started events (their first timestamp) when it is earlier than
// what its status still reports: after a few restarts the status keeps
// only the last two runs, and the first is the one that met the proxy.
func firstStartedFromEvents(r *StartupReport, events []corev1.Event) {
	first := map[string]time.Time{}
	for _, e := range events {
		if e.Reason != "Started" {
			continue
		}
		t := e.FirstTimestamp.Time
		if t.IsZero() {
			t = e.EventTime.Time
		}
		c := containerOfField(e.InvolvedObject.FieldPath)
		if c == "" || t.IsZero() {
			continue
		}
		if was, ok := first[c]; !ok || t.Before(was) {
			first[c] = t
		}
	}
	for _, cs := range [][]ContainerStartup{r.InitContainers, r.Containers} {
		for i := range cs {
			if t, ok := first[cs[i].Name]; ok && (cs[i].FirstStartedAt == nil || t.Before(*cs[i].FirstStartedAt)) {
				cs[i].FirstStartedAt = timePtr(t)
			}
		}
	}
}
