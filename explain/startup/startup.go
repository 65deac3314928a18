package startup

import (
	"fmt"
	"sort"
	"strconv"
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

// validationNoRedirect is istio-validation's known failure (also its exit 126).
const validationNoRedirect = "istio-validation found no redirection: the Istio CNI plugin did not set up this pod's rules (it is not installed in the node's CNI chain, or the pod was scheduled before istio-cni-node was ready on the node)"

// Causes of istio-init's failures that a fix can name.
const (
	CauseNoNetAdmin = "no-net-admin"
	CauseBadPorts   = "bad-ports"
	CauseOOM        = "oom"
)

// knownFailures recognises istio-init / istio-validation failures from
// their logs and termination messages.
var knownFailures = []struct {
	match []string // any of these
	also  string   // and this, when set
	why   string
	cause string // for the fix, when it can be named
}{
	// First: without NET_ADMIN every iptables call fails, each in its own
	// words ("could not fetch rule set generation id: Permission denied").
	{[]string{"permission denied", "operation not permitted", "cap_net_admin"}, "",
		"istio-init lacks the NET_ADMIN/NET_RAW capabilities it needs (a PodSecurity, PSP or SCC policy removed them)", CauseNoNetAdmin},
	{[]string{"can't initialize iptables table", "table does not exist", "could not fetch rule set generation id"}, "",
		"iptables cannot use the nat table here: the node's kernel lacks the module for this backend, or the legacy/nft backends are mixed (iptables-legacy vs iptables-nft)", ""},
	{[]string{"iptables validation failed", "workload is not ready for istio"}, "",
		validationNoRedirect, ""},
	{[]string{"failed parsing cidr", "invalid cidr", "invalid cidr address"}, "",
		"an invalid CIDR reached istio-iptables (istiod refuses invalid CIDR annotations at admission, so it came from the mesh-wide values global.proxy.includeIPRanges / excludeIPRanges)", ""},
	{[]string{"invalid port/service"}, "",
		"iptables-restore refused a port istio-iptables was given: a " + istio.AnnotationIncludeOutboundPorts + " value that is not a port number (istiod does not check that annotation at admission), or a mesh-wide port list in the values", CauseBadPorts},
	{[]string{"chain already exists"}, "",
		"istio-init ran again in a network namespace that already has its rules (pod sandbox kept, init container re-run)", ""},
	{[]string{"iptables-restore"}, "error occurred at line",
		"iptables-restore rejected the rules istio-iptables generated", ""},
	{[]string{"iptables-restore"}, "failed",
		"iptables-restore rejected the rules istio-iptables generated", ""},
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
	oom := cs.Reason == "OOMKilled" || cs.LastTermination != nil && cs.LastTermination.Reason == "OOMKilled"
	if oom {
		cs.Failure, cs.Cause = cs.Name+" was killed at its memory limit (OOMKilled): the injector gives it the sidecar's resources (sidecar.istio.io/proxyMemoryLimit, or the mesh's global.proxy.resources)", CauseOOM
		return
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
			cs.Failure, cs.Cause = f.why, f.cause
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

// BackOffReset is how long a container must run before the kubelet
// forgets its crash back-off: until then a restarted container that failed
// is still in its crash loop.
const BackOffReset = 10 * time.Minute

// runsToCompletion: an init container that is not a native sidecar.
func (cs ContainerStartup) runsToCompletion() bool {
	return cs.Init && cs.Role != RoleProxyNative && cs.Role != RoleNativeSidecar
}

// classify reads a container's crash loop by what it means, not by the
// phase it is in this second: a container that failed is failing whether
// it is waiting in back-off, just terminated, or running its next attempt
// (an init container until it completes, any other until it has run for
// BackOffReset).
func classify(cs *ContainerStartup, p *corev1.Pod, now time.Time) {
	lt := cs.LastTermination
	stopped := p.DeletionTimestamp != nil ||
		(p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) && (cs.Role == RoleProxyNative || cs.Role == RoleNativeSidecar)
	switch {
	case cs.State == "terminated" && stopped:
		// The kubelet stopped it: the pod is being deleted, or it finished
		// and its native sidecars are ended (their exit codes mean nothing).
		return
	case cs.State == "terminated" && cs.ExitCode != nil && *cs.ExitCode != 0:
		cs.Failing = true
		cs.LastFailure = termination(*cs.ExitCode, cs.Reason, cs.Message)
		return
	case lt == nil || lt.ExitCode == 0:
		if cs.State == "waiting" && cs.Reason == "CrashLoopBackOff" {
			cs.Failing = true
		}
		return
	}
	cs.LastFailure = termination(lt.ExitCode, lt.Reason, lt.Message)
	switch {
	case cs.State == "waiting":
		cs.Failing = true // in back-off, or being created again
	case cs.runsToCompletion():
		cs.Failing = cs.State == "running"
	case cs.State == "running":
		cs.Failing = cs.StartedAt == nil || now.Sub(*cs.StartedAt) < BackOffReset
	}
}

// termination is the kubelet's account of a run's end: the exit code, its
// reason and its message (first line, cut short).
func termination(code int32, reason, msg string) string {
	s := fmt.Sprintf("exit %d", code)
	if reason != "" {
		s += " (" + reason + ")"
	}
	if msg = strings.TrimSpace(msg); msg != "" {
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = strings.TrimSpace(msg[:i]) + " …"
		}
		if r := []rune(msg); len(r) > 160 {
			msg = string(r[:159]) + "…"
		}
		s += ": " + msg
	}
	return s
}

// Plural is "N thing" or "N things".
func Plural(n int32, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// Attempts says where a failing container's crash loop is: how often it
// was restarted and what it does now.
func (cs ContainerStartup) Attempts() string {
	now := "not restarted yet"
	if cs.Restarts > 0 {
		now = "restarted " + Plural(cs.Restarts, "time")
	}
	switch {
	case cs.State == "running":
		return now + ", running again"
	case cs.State == "waiting" && cs.Reason != "":
		return now + ", waiting (" + cs.Reason + ")"
	}
	return now
}

// FailureSummary is a failing container's finding: its last failure, as
// the kubelet gave it, and where its crash loop is.
func (cs ContainerStartup) FailureSummary() string {
	last := cs.LastFailure
	if last == "" {
		last = cs.Reason
	}
	return fmt.Sprintf("%s failed: %s; %s", cs.Name, last, cs.Attempts())
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
			for _, c := range r.InitContainers {
				// A native sidecar runs on: it never completes, and init
				// goes past it once it has started.
				started := sidecar[c.Name] && c.State == "running" && !c.Failing && c.Started != nil && *c.Started
				if (c.State != "terminated" || c.Failing) && !started {
					stuck = c.Name
					break
				}
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
			add("stuck-in-init", stuck, msg, fix)
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
		if f.OwnerKind == "Job" || f.Pod.Labels["job-name"] != "" || f.Pod.Labels["batch.kubernetes.io/job-name"] != "" {
			fix := "use a native sidecar (annotation " + istio.AnnotationNativeSidecar + ": \"true\", Kubernetes 1.29+), or have the job call POST http://localhost:15020/quitquitquit when it is done"
			switch {
			case !native.Annotation:
				fix = "have the job call POST http://localhost:15020/quitquitquit when it is done; or a native sidecar: " + native.Note + " (Kubernetes 1.29+)"
			case native.Note != "":
				fix = "use a native sidecar (annotation " + istio.AnnotationNativeSidecar + ": \"true\", Kubernetes 1.29+; " + native.Note + "), or have the job call POST http://localhost:15020/quitquitquit when it is done"
			}
			add("job-with-classic-sidecar", proxy.Name, "this Job's pod has a classic istio-proxy container: it keeps running after the job's own containers finish, so the Job never completes", fix)
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
			fmt.Sprintf("kubectl logs %s -n %s -c istio-proxy; check that istiod is reachable and the proxy received its configuration", r.Name, ns))
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

// LogEnd is what a failing container's log says last: its last line, or
// where to look when the log was not read.
func LogEnd(c ContainerStartup) string {
	if c.Log == nil {
		return "its log says why"
	}
	// The failed run: the current container while it is terminated, else
	// the last terminated one (the kubelet's previous).
	lines, other := c.Log.Previous, c.Log.Current
	if c.State == "terminated" {
		lines, other = other, lines
	}
	if len(lines) == 0 {
		lines = other
	}
	if len(lines) == 0 && c.Log.Unavailable != "" {
		return "its log could not be read (" + c.Log.Unavailable + ")"
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			if r := []rune(l); len(r) > 200 {
				l = string(r[:199]) + "…"
			}
			return "its log ends: " + l
		}
	}
	return "its log is empty"
}

// PreviousFlag is " --previous" when the failed run is the container's last
// terminated one (it waits in back-off, or runs its next attempt): kubectl
// logs then reads it; while it is terminated, it is the current one.
func PreviousFlag(c ContainerStartup) string {
	if c.LastTermination != nil && c.State != "terminated" {
		return " --previous"
	}
	return ""
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
		const key = "sidecar.istio.io/proxyMemoryLimit"
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
			"   # istio-init needs NET_ADMIN and NET_RAW: let the namespace's policy (PodSecurity, PSP, SCC) or the pod's own istio-init override grant them, or install Istio with its CNI plugin (no istio-init)"
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
	}
	if c.Failure != "" {
		return logs + "   # fix the cause above, and the kubelet retries istio-init by itself"
	}
	return logs + "   # its log says why; fix that, and the kubelet retries istio-init by itself"
}
