package startup

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 11, 22, 3, 20, 0, 0, time.UTC)

func at(s float64) metav1.Time {
	return metav1.NewTime(t0.Add(time.Duration(s * float64(time.Second))))
}

func running(name string, start float64, ready bool) corev1.ContainerStatus {
	started := ready // the startup probe (if any) has passed once it is ready
	return corev1.ContainerStatus{Name: name, Ready: ready, Started: &started, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(start)}}}
}

func done(name string, start, end float64, code int32, msg string) corev1.ContainerStatus {
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, Message: msg, StartedAt: at(start), FinishedAt: at(end)}}}
}

func crashLoop(name string, restarts int32, code int32, msg string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, RestartCount: restarts,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", Message: msg, StartedAt: at(5), FinishedAt: at(6)}}}
}

type podShape struct {
	inits      []corev1.Container
	containers []corev1.Container
	initSt     []corev1.ContainerStatus
	st         []corev1.ContainerStatus
	phase      corev1.PodPhase
	labels     map[string]string
	conds      []corev1.PodCondition
	// unscheduled: bound to no node.
	unscheduled bool
}

func shape(s podShape) *corev1.Pod {
	if s.phase == "" {
		s.phase = corev1.PodRunning
	}
	node := "node-1"
	if s.unscheduled {
		node = ""
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", CreationTimestamp: at(0), Labels: s.labels},
		Spec:       corev1.PodSpec{NodeName: node, InitContainers: s.inits, Containers: s.containers},
		Status:     corev1.PodStatus{Phase: s.phase, InitContainerStatuses: s.initSt, ContainerStatuses: s.st, Conditions: s.conds},
	}
}

func c(name string) corev1.Container { return corev1.Container{Name: name} }

func nativeProxy() corev1.Container {
	always := corev1.ContainerRestartPolicyAlways
	return corev1.Container{Name: "istio-proxy", RestartPolicy: &always}
}

func heldProxy() corev1.Container {
	return corev1.Container{Name: "istio-proxy", Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"pilot-agent", "wait"}}}}}
}

func hazardIDs(r *StartupReport) string {
	var ids []string
	for _, h := range r.Hazards {
		ids = append(ids, h.ID+"@"+h.Container)
	}
	return strings.Join(ids, " ")
}

func unhealthy(container string, s float64, probe string) corev1.Event {
	return corev1.Event{Reason: "Unhealthy", LastTimestamp: at(s), Message: probe + " probe failed: HTTP probe failed with statuscode: 503",
		InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{" + container + "}"}}
}

func TestStartup(t *testing.T) {
	now := t0.Add(10 * time.Minute)
	cases := []struct {
		name    string
		pod     podShape
		events  []corev1.Event
		logs    map[string]LogTail
		owner   string
		hazards string // hazard ids@container, in order
		init    string
		order   string
		failure string // substring of the istio-init/validation failure explanation
		check   func(*testing.T, *StartupReport)
	}{
		{name: "classic sidecar, app first, proxy slow: app before proxy ready",
			pod: podShape{inits: []corev1.Container{c("istio-init")}, containers: []corev1.Container{c("app"), c("istio-proxy")},
				initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 0, "")},
				st:     []corev1.ContainerStatus{running("app", 3, true), running("istio-proxy", 3.5, true)}},
			events:  []corev1.Event{unhealthy("istio-proxy", 8, "Startup"), unhealthy("istio-proxy", 12, "Startup")},
			hazards: "app-before-proxy-ready@app", init: "completed", order: "istio-init app istio-proxy",
			check: func(t *testing.T, r *StartupReport) {
				if r.Containers[1].ReadyAt == nil || !r.Containers[1].ReadyAt.Equal(at(12).Time) || !strings.Contains(r.Hazards[0].Message, "9s before") {
					t.Errorf("readyAt %v hazard %q", r.Containers[1].ReadyAt, r.Hazards[0].Message)
				}
			}},
		{name: "classic sidecar, app restarted past its first run: the kubelet's first Started event dates it",
			pod: podShape{inits: []corev1.Container{c("istio-init")}, containers: []corev1.Container{c("app"), c("istio-proxy")},
				initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 0, "")},
				st:     []corev1.ContainerStatus{running("app", 60, true), running("istio-proxy", 3.5, true)}},
			events: []corev1.Event{unhealthy("istio-proxy", 8, "Startup"), unhealthy("istio-proxy", 22, "Startup"),
				{Reason: "Started", FirstTimestamp: at(3), LastTimestamp: at(60), Count: 4, InvolvedObject: corev1.ObjectReference{FieldPath: "spec.containers{app}"}}},
			hazards: "app-before-proxy-ready@app", init: "completed", order: "istio-init app istio-proxy"},
		{name: "classic sidecar, no hold, proxy ready in the app's second: still a hazard",
			pod: podShape{inits: []corev1.Container{c("istio-init")}, containers: []corev1.Container{c("app"), c("istio-proxy")},
				initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 0, "")},
				st:     []corev1.ContainerStatus{running("app", 3, true), running("istio-proxy", 3, true)}},
			hazards: "app-before-proxy-ready@app", init: "completed", order: "istio-init app istio-proxy",
			check: func(t *testing.T, r *StartupReport) {
				if r.OrderVerdict == "ok" || !strings.Contains(r.Hazards[0].Message, "within the second") {
					t.Errorf("verdict %q hazard %+v", r.OrderVerdict, r.Hazards)
				}
			}},
		{name: "hold: proxy first with pilot-agent wait, no hazard",
			pod: podShape{inits: []corev1.Container{c("istio-init")}, containers: []corev1.Container{heldProxy(), c("app")},
				initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 0, "")},
				st:     []corev1.ContainerStatus{running("istio-proxy", 3, true), running("app", 9, true)}},
			init: "completed", order: "istio-init istio-proxy app",
			check: func(t *testing.T, r *StartupReport) {
				if !r.Hold || r.OrderVerdict != "ok" {
					t.Errorf("hold %v verdict %q", r.Hold, r.OrderVerdict)
				}
			}},
		{name: "native sidecar: user init after the proxy is fine",
			pod: podShape{inits: []corev1.Container{c("istio-init"), nativeProxy(), c("migrate")}, containers: []corev1.Container{c("app")},
				initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 0, ""), running("istio-proxy", 2.5, true), done("migrate", 5, 6, 0, "")},
				st:     []corev1.ContainerStatus{running("app", 7, true)},
				conds:  []corev1.PodCondition{{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at(6.5)}}},
			init: "completed", order: "istio-init istio-proxy migrate app",
			check: func(t *testing.T, r *StartupReport) {
				if !r.Native || r.InitContainers[1].Role != RoleProxyNative || !r.InitContainers[1].ReadyAt.Equal(at(6.5).Time) {
					t.Errorf("native %v role %q readyAt %v", r.Native, r.InitContainers[1].Role, r.InitContainers[1].ReadyAt)
				}
			}},
		{name: "classic: user init container after istio-init",
			pod: podShape{inits: []corev1.Container{c("istio-init"), c("fetch-config")}, containers: []corev1.Container{heldProxy(), c("app")},
				initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 0, ""), done("fetch-config", 3, 9, 1, "connection refused")},
				st:     []corev1.ContainerStatus{{Name: "istio-proxy", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}},
				phase:  corev1.PodPending},
			hazards: "stuck-in-init@fetch-config init-after-capture@fetch-config", init: "failed", order: "istio-init fetch-config"},
		{name: "CNI mode: every user init container is captured",
			pod: podShape{inits: []corev1.Container{c("istio-validation"), c("wait-db")}, containers: []corev1.Container{c("app"), heldProxy()},
				initSt: []corev1.ContainerStatus{done("istio-validation", 1, 2, 0, ""), running("wait-db", 3, false)},
				phase:  corev1.PodPending},
			hazards: "stuck-in-init@wait-db init-after-capture@wait-db", init: "running"},
		{name: "istio-init crash-looping on a legacy/nft mismatch",
			pod: podShape{inits: []corev1.Container{c("istio-init")}, containers: []corev1.Container{c("app"), c("istio-proxy")},
				initSt: []corev1.ContainerStatus{crashLoop("istio-init", 4, 1, "")}, phase: corev1.PodPending},
			logs:    map[string]LogTail{"istio-init": {Previous: []string{"iptables-restore: unable to initialize table 'nat'", "iptables v1.8.9 (legacy): can't initialize iptables table `nat': Table does not exist"}}},
			hazards: "istio-init-failed@istio-init stuck-in-init@istio-init", init: "crash-looping", failure: "legacy/nft"},
		{name: "istio-init failed on a bad CIDR, once",
			pod: podShape{inits: []corev1.Container{c("istio-init")}, containers: []corev1.Container{c("app")},
				initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 1, `error: failed parsing CIDR "10.0.0.0/33": netip.ParsePrefix("10.0.0.0/33"): prefix length out of range`)}, phase: corev1.PodPending},
			hazards: "istio-init-failed@istio-init stuck-in-init@istio-init", init: "failed", failure: "invalid CIDR"},
		{name: "istio-init without NET_ADMIN",
			pod: podShape{inits: []corev1.Container{c("istio-init")}, containers: []corev1.Container{c("app")},
				initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 1, "")}, phase: corev1.PodPending},
			logs:    map[string]LogTail{"istio-init": {Current: []string{"iptables-restore v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)"}}},
			hazards: "istio-init-failed@istio-init stuck-in-init@istio-init", init: "failed", failure: "NET_ADMIN"},
		{name: "istio-validation exit 126",
			pod: podShape{inits: []corev1.Container{c("istio-validation")}, containers: []corev1.Container{c("app"), c("istio-proxy")},
				initSt: []corev1.ContainerStatus{crashLoop("istio-validation", 2, 126, "")}, phase: corev1.PodPending},
			hazards: "validation-failed@istio-validation stuck-in-init@istio-validation", init: "crash-looping", failure: "CNI plugin"},
		{name: "Job with a classic sidecar",
			pod: podShape{inits: []corev1.Container{c("istio-init")}, containers: []corev1.Container{heldProxy(), c("job")},
				initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 0, "")},
				st:     []corev1.ContainerStatus{running("istio-proxy", 3, true), done("job", 5, 20, 0, "")}, labels: map[string]string{"job-name": "nightly"}},
			owner: "Job", hazards: "job-with-classic-sidecar@istio-proxy", init: "completed"},
		{name: "proxy running, never ready",
			pod: podShape{inits: []corev1.Container{c("istio-init"), nativeProxy()}, containers: []corev1.Container{c("app")},
				initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 0, ""), running("istio-proxy", 3, false)}, phase: corev1.PodPending},
			events:  []corev1.Event{unhealthy("istio-proxy", 400, "Startup")},
			hazards: "stuck-in-init@istio-proxy proxy-not-ready@istio-proxy", init: "running"},
		{name: "no mesh container",
			pod:  podShape{containers: []corev1.Container{c("web")}, st: []corev1.ContainerStatus{running("web", 2, true)}},
			init: "none", order: "web",
			check: func(t *testing.T, r *StartupReport) {
				if r.Mesh != "" || r.OrderVerdict != "no sidecar" || len(r.Notes) == 0 {
					t.Errorf("mesh %q verdict %q notes %q", r.Mesh, r.OrderVerdict, r.Notes)
				}
			}},
		{name: "on a node, nothing started yet",
			pod:  podShape{inits: []corev1.Container{c("istio-init")}, containers: []corev1.Container{c("app"), c("istio-proxy")}, phase: corev1.PodPending},
			init: "running", hazards: "stuck-in-init@istio-init"},
		{name: "not scheduled: waiting for the scheduler, not stuck in init",
			pod:  podShape{inits: []corev1.Container{c("istio-init")}, containers: []corev1.Container{c("app"), c("istio-proxy")}, phase: corev1.PodPending, unscheduled: true},
			init: "running"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := AnalyzeStartup(StartupFacts{Pod: shape(tc.pod), Events: tc.events, Logs: tc.logs, OwnerKind: tc.owner, Now: now})
			if got := hazardIDs(r); got != tc.hazards {
				t.Errorf("hazards %q, want %q: %+v", got, tc.hazards, r.Hazards)
			}
			if r.InitResult != tc.init {
				t.Errorf("init result %q, want %q", r.InitResult, tc.init)
			}
			if tc.order != "" && strings.Join(r.StartOrder, " ") != tc.order {
				t.Errorf("start order %q, want %q", r.StartOrder, tc.order)
			}
			if tc.failure != "" && (len(r.InitContainers) == 0 || !strings.Contains(r.InitContainers[0].Failure, tc.failure)) {
				t.Errorf("failure %q, want it to mention %q", r.InitContainers[0].Failure, tc.failure)
			}
			for _, h := range r.Hazards {
				if h.Fix == "" || h.Message == "" {
					t.Errorf("hazard %s without message or fix", h.ID)
				}
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

// sandboxFailed is the kubelet's event for a sandbox whose CNI chain failed
// in Istio's plugin with err (containerd's wording around the plugin's).
func sandboxFailed(err string, count int32) corev1.Event {
	return corev1.Event{Reason: "FailedCreatePodSandBox", LastTimestamp: at(30), Count: count,
		Message: `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "0f3c": plugin type="istio-cni" name="istio-cni" failed (add): ` + err}
}

// Ambient pods (no sidecar): the CNI readiness race (the plugin could not
// reach the node agent, or the agent had no ztunnel), another plugin
// failure, a pod ztunnel has not taken, and a healthy one.
func TestAmbientStartup(t *testing.T) {
	unreachable := `istio-cni cmdAdd failed to contact node Istio CNI agent: Post "http://dummy/cmdadd": dial unix /var/run/istio-cni/pluginevent.sock: connect: no such file or directory`
	noZtunnel := `istio-cni cmdAdd failed to contact node Istio CNI agent: unable to push CNI event (status code 500): failed to add pod to mesh: no ztunnel connection`
	creating := []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
	cases := []struct {
		name       string
		pending    bool
		annotation string
		events     []corev1.Event
		hazards    string
		message    string
		fix        string
		verdict    string
	}{
		{name: "agent not ready", pending: true, events: []corev1.Event{sandboxFailed(unreachable, 7)},
			hazards: "ambient-cni-not-ready@", message: "could not reach the istio-cni agent on node node-1", fix: "--field-selector spec.nodeName=node-1"},
		{name: "no ztunnel", pending: true, events: []corev1.Event{sandboxFailed(noZtunnel, 3)},
			hazards: "ambient-no-ztunnel@", message: "has no ztunnel connected", fix: "-l app=ztunnel --field-selector spec.nodeName=node-1"},
		{name: "another plugin failure", pending: true, events: []corev1.Event{sandboxFailed("istio-cni cmdAdd failed to check if pod is ambient: timeout", 1)},
			hazards: "ambient-cni-failed@", message: "failed to check if pod is ambient", fix: "-l k8s-app=istio-cni-node"},
		{name: "ztunnel has not taken it", annotation: "pending",
			hazards: "ambient-pending@", message: "ambient.istio.io/redirection=pending", fix: "-l app=ztunnel"},
		{name: "captured", annotation: "enabled", verdict: "no sidecar"},
	}
	checked := 0
	for _, tc := range cases {
		s := podShape{containers: []corev1.Container{c("app")}, st: []corev1.ContainerStatus{running("app", 2, true)}}
		if tc.pending {
			s.phase, s.st = corev1.PodPending, creating
		}
		p := shape(s)
		if tc.annotation != "" {
			p.Annotations = map[string]string{"ambient.istio.io/redirection": tc.annotation}
		}
		r := AnalyzeStartup(StartupFacts{Pod: p, Events: tc.events, Now: t0.Add(time.Minute)})
		if !r.Ambient || r.Mesh != "istio" || hazardIDs(r) != tc.hazards {
			t.Errorf("%s: ambient %v, mesh %q, hazards %q; want %q", tc.name, r.Ambient, r.Mesh, hazardIDs(r), tc.hazards)
			continue
		}
		if tc.hazards != "" && (!strings.Contains(r.Hazards[0].Message, tc.message) || !strings.Contains(r.Hazards[0].Fix, tc.fix)) {
			t.Errorf("%s: %+v", tc.name, r.Hazards[0])
		}
		if tc.verdict != "" && r.OrderVerdict != tc.verdict {
			t.Errorf("%s: order verdict %q", tc.name, r.OrderVerdict)
		}
		checked++
	}
	// A sidecar pod whose events mention istio-cni is not an ambient pod.
	p := shape(podShape{inits: []corev1.Container{c("istio-validation")}, containers: []corev1.Container{c("app"), c("istio-proxy")}, phase: corev1.PodPending})
	if r := AnalyzeStartup(StartupFacts{Pod: p, Events: []corev1.Event{sandboxFailed(unreachable, 1)}, Now: t0}); r.Ambient {
		t.Error("a pod with a sidecar reported as ambient")
	}
	t.Logf("%d ambient pods checked", checked+1)
}

// A crash loop is failing in every phase of it (terminated, waiting in
// back-off, running its next attempt), for an init container and for the
// app; only a container that has run past the kubelet's back-off reset has
// got past its failure.
func TestCrashLoopPhases(t *testing.T) {
	failedRun := &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "boom", StartedAt: at(5), FinishedAt: at(6)}
	phases := map[string]corev1.ContainerStatus{
		"terminated": {RestartCount: 1, State: corev1.ContainerState{Terminated: failedRun}},
		"waiting":    {RestartCount: 1, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}, LastTerminationState: corev1.ContainerState{Terminated: failedRun}},
		"running":    {RestartCount: 2, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(20)}}, LastTerminationState: corev1.ContainerState{Terminated: failedRun}},
	}
	now := t0.Add(time.Minute)
	checked := 0
	for phase, st := range phases {
		// istio-init
		init := st
		init.Name = "istio-init"
		r := AnalyzeStartup(StartupFacts{Pod: shape(podShape{inits: []corev1.Container{c("istio-init")}, containers: []corev1.Container{c("app"), c("istio-proxy")},
			initSt: []corev1.ContainerStatus{init}, phase: corev1.PodPending}), Now: now})
		if !r.InitContainers[0].Failing || r.InitResult != "crash-looping" || !strings.Contains(hazardIDs(r), "istio-init-failed@istio-init") || StartupSeverity(r) != 3 ||
			!strings.Contains(r.Hazards[0].Message, "exit 2 (Error): boom") {
			t.Errorf("istio-init %s: failing %v, init %q, hazards %q, severity %d, message %q", phase, r.InitContainers[0].Failing, r.InitResult, hazardIDs(r), StartupSeverity(r), r.Hazards)
		}
		checked++
		// the app
		app := st
		app.Name = "app"
		r = AnalyzeStartup(StartupFacts{Pod: shape(podShape{containers: []corev1.Container{c("app")}, st: []corev1.ContainerStatus{app}}), Now: now})
		if !r.Containers[0].Failing || hazardIDs(r) != "container-failing@app" || StartupSeverity(r) != 3 || !strings.Contains(r.Hazards[0].Message, "app failed: exit 2 (Error): boom") {
			t.Errorf("app %s: failing %v, hazards %q, severity %d, message %q", phase, r.Containers[0].Failing, hazardIDs(r), StartupSeverity(r), r.Hazards)
		}
		checked++
	}
	// Past the back-off reset the app has recovered: no longer failing.
	app := phases["running"]
	app.Name = "app"
	r := AnalyzeStartup(StartupFacts{Pod: shape(podShape{containers: []corev1.Container{c("app")}, st: []corev1.ContainerStatus{app}}), Now: at(20).Add(BackOffReset)})
	if r.Containers[0].Failing || len(r.Hazards) != 0 || r.Containers[0].LastFailure != "exit 2 (Error): boom" {
		t.Errorf("app running for the back-off reset: failing %v hazards %q last failure %q", r.Containers[0].Failing, hazardIDs(r), r.Containers[0].LastFailure)
	}
	t.Logf("%d crash-loop phases checked", checked+1)
}

// A cause istio-init's log names is fixed where it comes from: the
// annotation and its value on the object that re-creates the pod, or the
// capabilities istio-init lacks.
func TestIstioInitFixNamesTheCause(t *testing.T) {
	loop := crashLoop("istio-init", 2, 1, "")
	portsLog := map[string]LogTail{"istio-init": {Previous: []string{"iptables-restore v1.8.9 (nf_tables): invalid port/service `abc' specified", "Error occurred at line: 27"}}}
	capsLog := map[string]LogTail{"istio-init": {Previous: []string{"error: could not fetch rule set generation id: Permission denied (you must be root)"}}}
	cases := []struct {
		name     string
		logs     map[string]LogTail
		workload string
		annot    map[string]string
		want     []string
	}{
		{"bad port, a Deployment's pod", portsLog, "deployment/broken-init", map[string]string{"traffic.sidecar.istio.io/includeOutboundPorts": "abc"},
			[]string{`kubectl patch deployment/broken-init -n shop --type=json`, `traffic.sidecar.istio.io~1includeOutboundPorts`, `traffic.sidecar.istio.io/includeOutboundPorts="abc"`}},
		{"bad port, a bare pod", portsLog, "", map[string]string{"traffic.sidecar.istio.io/includeOutboundPorts": "abc"},
			[]string{`kubectl get pod web-1 -n shop -o yaml > web-1.yaml`, `traffic.sidecar.istio.io/includeOutboundPorts="abc"`, `kubectl replace --force -f web-1.yaml`}},
		{"bad port from the mesh-wide values", portsLog, "deployment/web", nil,
			[]string{`kubectl logs web-1 -n shop -c istio-init --previous`, "global.proxy.includeOutboundPorts"}},
		{"no NET_ADMIN", capsLog, "deployment/web", nil,
			[]string{`kubectl get pod web-1 -n shop -o jsonpath='{.spec.initContainers[?(@.name=="istio-init")].securityContext.capabilities}'`, "NET_ADMIN and NET_RAW"}},
		{"bad port, but the annotation is a list of ports: the mesh-wide values", portsLog, "deployment/web", map[string]string{"traffic.sidecar.istio.io/includeOutboundPorts": "443, 8080"},
			[]string{`kubectl logs web-1 -n shop -c istio-init --previous`, "global.proxy.includeOutboundPorts"}},
		{"bad log level, a Deployment's pod", map[string]LogTail{"istio-init": {Previous: []string{`Error: invalid output level 'verbose'`}}}, "deployment/web", map[string]string{"sidecar.istio.io/agentLogLevel": "verbose"},
			[]string{`kubectl patch deployment/web -n shop --type=json -p '[{"op":"remove","path":"/spec/template/metadata/annotations/sidecar.istio.io~1agentLogLevel"}]'`}},
		{"bad log level, a Job's pod", map[string]LogTail{"istio-init": {Previous: []string{`Error: invalid output level 'verbose'`}}}, "job/migrate", map[string]string{"sidecar.istio.io/agentLogLevel": "verbose"},
			[]string{`kubectl get job migrate -n shop -o json | kubectl patch --local`, `"sidecar.istio.io/agentLogLevel":null`}},
		{"unrecognised: the log's last line", map[string]LogTail{"istio-init": {Previous: []string{"something odd", ""}}}, "", nil,
			[]string{`kubectl logs web-1 -n shop -c istio-init --previous`}},
	}
	for _, tc := range cases {
		p := shape(podShape{inits: []corev1.Container{c("istio-init")}, containers: []corev1.Container{c("app"), c("istio-proxy")},
			initSt: []corev1.ContainerStatus{loop}, phase: corev1.PodPending})
		p.Annotations = tc.annot
		r := AnalyzeStartup(StartupFacts{Pod: p, Logs: tc.logs, Workload: tc.workload, Now: t0.Add(time.Minute)})
		if len(r.Hazards) == 0 || r.Hazards[0].ID != "istio-init-failed" {
			t.Errorf("%s: hazards %q", tc.name, hazardIDs(r))
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(r.Hazards[0].Fix, w) {
				t.Errorf("%s: fix %q lacks %q", tc.name, r.Hazards[0].Fix, w)
			}
		}
		if tc.name == "unrecognised: the log's last line" && !strings.Contains(r.Hazards[0].Message, "its log ends: something odd") {
			t.Errorf("%s: message %q does not quote the log's last line", tc.name, r.Hazards[0].Message)
		}
	}
}

// A container the kubelet stopped is not failing: a native sidecar ended
// when its pod finished, or any container of a pod being deleted.
func TestStoppedContainersAreNotFailing(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	proxy := corev1.Container{Name: "istio-proxy", RestartPolicy: &always}
	sigterm := corev1.ContainerStatus{Name: "istio-proxy", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143, Reason: "Error"}}}
	for _, phase := range []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed} {
		r := AnalyzeStartup(StartupFacts{Pod: shape(podShape{inits: []corev1.Container{c("istio-init"), proxy}, containers: []corev1.Container{c("app")},
			initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 0, ""), sigterm}, st: []corev1.ContainerStatus{done("app", 3, 9, 0, "")}, phase: phase}), Now: t0.Add(time.Minute)})
		if r.InitContainers[1].Failing || strings.Contains(hazardIDs(r), "container-failing") {
			t.Errorf("%s pod: its native sidecar ended with 143 is failing: %q", phase, hazardIDs(r))
		}
	}
	p := shape(podShape{containers: []corev1.Container{c("app")}, st: []corev1.ContainerStatus{done("app", 3, 9, 137, "")}})
	now := metav1.NewTime(t0.Add(time.Minute))
	p.DeletionTimestamp = &now
	if r := AnalyzeStartup(StartupFacts{Pod: p, Now: t0.Add(time.Minute)}); r.Containers[0].Failing {
		t.Errorf("a pod being deleted: its app ended with 137 is failing: %q", hazardIDs(r))
	}
	// Its own failure is still one: a Failed pod's app that exited 1.
	p = shape(podShape{containers: []corev1.Container{c("app")}, st: []corev1.ContainerStatus{done("app", 3, 9, 1, "")}, phase: corev1.PodFailed})
	if r := AnalyzeStartup(StartupFacts{Pod: p, Now: t0.Add(time.Minute)}); !r.Containers[0].Failing {
		t.Errorf("a Failed pod's app that exited 1 is not failing")
	}
}

// The fixes that suggest a native sidecar follow the Istio release that
// injected the pod (its proxy image): the pod annotation from 1.24; before,
// native sidecars are mesh-wide only; a release not known keeps the
// annotation and says from which release istiod reads it.
func TestNativeSidecarAdviceByRelease(t *testing.T) {
	for _, tc := range []struct {
		image      string
		annotation bool   // the fixes suggest the annotation
		note       string // in every fix that mentions native sidecars
	}{
		{"docker.io/istio/proxyv2:1.28.1", true, ""},
		{"docker.io/istio/proxyv2:1.24.6-distroless", true, ""},
		{"docker.io/istio/proxyv2:1.22.3", false, "Istio 1.22 (this pod's proxy image 1.22.3) does not read sidecar.istio.io/nativeSidecar (1.24+ does): there native sidecars are mesh-wide, ENABLE_NATIVE_SIDECARS=true"},
		{"docker.io/istio/proxyv2:latest", true, "the annotation is read by istiod from Istio 1.24"},
		{"docker.io/istio/proxyv2:1.19.5", true, "the annotation is read by istiod from Istio 1.24"},
	} {
		t.Run(tc.image, func(t *testing.T) {
			proxy := c("istio-proxy")
			proxy.Image = tc.image
			for _, p := range []podShape{
				// app-before-proxy-ready and init-after-capture
				{inits: []corev1.Container{c("istio-init"), c("fetch-config")}, containers: []corev1.Container{c("app"), proxy},
					initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 0, ""), done("fetch-config", 2, 3, 0, "")},
					st:     []corev1.ContainerStatus{running("app", 3, true), running("istio-proxy", 3.5, true)}},
				// job-with-classic-sidecar
				{inits: []corev1.Container{c("istio-init")}, containers: []corev1.Container{proxy, c("job")},
					initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 0, "")},
					st:     []corev1.ContainerStatus{running("istio-proxy", 3, true), done("job", 5, 20, 0, "")}, labels: map[string]string{"job-name": "nightly"}},
			} {
				r := AnalyzeStartup(StartupFacts{Pod: shape(p), Events: []corev1.Event{unhealthy("istio-proxy", 12, "Startup")}, Now: t0.Add(10 * time.Minute)})
				if len(r.Hazards) == 0 {
					t.Fatalf("no hazard")
				}
				for _, h := range r.Hazards {
					if strings.Contains(h.Fix, `sidecar.istio.io/nativeSidecar: "true"`) != tc.annotation || !strings.Contains(h.Fix, tc.note) {
						t.Errorf("%s: fix %q; want the annotation %v, note %q", h.ID, h.Fix, tc.annotation, tc.note)
					}
				}
			}
		})
	}
}

// A container that restarted and runs ready now, in a Ready pod, has
// recovered once its run outlived SettleRun and its last run, within the
// back-off reset too: not failing, no hazard, a note with its last exit
// and what its log said then. Before, it may be a crash loop caught ready
// between two crashes (whatever its restart count): still failing; a
// ready container in a pod that is not Ready keeps the back-off reset.
func TestRecoveredRestart(t *testing.T) {
	readyCond := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(40)}}
	notReady := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: at(40)}}
	app := func(restarts int32, started float64, lastRun [2]float64, msg string) corev1.ContainerStatus {
		yes := true
		return corev1.ContainerStatus{Name: "app", Ready: true, Started: &yes, RestartCount: restarts,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(started)}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: msg,
				StartedAt: at(lastRun[0]), FinishedAt: at(lastRun[1])}}}
	}
	cases := []struct {
		name      string
		st        corev1.ContainerStatus
		conds     []corev1.PodCondition
		logs      map[string]LogTail
		now       time.Duration
		recovered bool
		note      string
	}{
		{"crashed once, ready 7 minutes since", app(1, 30, [2]float64{3, 4}, "database not reachable yet"), readyCond, nil, 7*time.Minute + 30*time.Second, true,
			"app restarted 1 time, last exit 1 (Error): database not reachable yet; running and ready since 2026-"},
		{"crashed twice, ready 70 seconds, its log read", app(2, 30, [2]float64{3, 4}, ""), readyCond, map[string]LogTail{"app": {Previous: []string{"dial tcp: connection refused"}, Current: []string{"serving"}}},
			100 * time.Second, true, "last exit 1 (Error); its log then ended: dial tcp: connection refused; running and ready"},
		{"no message, no log read: the command", app(1, 30, [2]float64{3, 4}, ""), readyCond, nil, 2 * time.Minute, true,
			"its last run's log: kubectl logs web-1 -n shop -c app --previous"},
		{"no Ready condition, every container ready", app(1, 30, [2]float64{3, 4}, ""), nil, nil, 2 * time.Minute, true, "app restarted 1 time"},
		{"restarted once, ready for 5s: a liveness kill loop from its first restart", app(1, 30, [2]float64{20, 28}, ""), readyCond, nil, 35 * time.Second, false, ""},
		{"a loop caught ready for 20s", app(4, 100, [2]float64{50, 80}, ""), readyCond, nil, 120 * time.Second, false, ""},
		{"a loop whose runs last 3 minutes, ready for 2", app(4, 300, [2]float64{100, 280}, ""), readyCond, nil, 420 * time.Second, false, ""},
		{"a loop that outlived its last run and a minute", app(4, 300, [2]float64{100, 130}, ""), readyCond, nil, 400 * time.Second, true, "app restarted 4 times"},
		{"ready, the pod not Ready, within the back-off reset", app(1, 30, [2]float64{3, 4}, ""), notReady, nil, time.Minute, false, ""},
	}
	for _, tc := range cases {
		r := AnalyzeStartup(StartupFacts{Pod: shape(podShape{containers: []corev1.Container{c("app")}, st: []corev1.ContainerStatus{tc.st}, conds: tc.conds}),
			Logs: tc.logs, Now: t0.Add(tc.now)})
		got := r.Containers[0]
		if got.Recovered != tc.recovered || got.Failing == tc.recovered {
			t.Errorf("%s: recovered %v failing %v, want recovered %v", tc.name, got.Recovered, got.Failing, tc.recovered)
			continue
		}
		if !tc.recovered {
			if hazardIDs(r) != "container-failing@app" || StartupSeverity(r) != 3 {
				t.Errorf("%s: hazards %q severity %d", tc.name, hazardIDs(r), StartupSeverity(r))
			}
			continue
		}
		if len(r.Hazards) != 0 || StartupSeverity(r) != 0 || len(r.Notes) == 0 || !strings.Contains(strings.Join(r.Notes, "\n"), tc.note) ||
			!strings.Contains(strings.Join(r.Notes, "\n"), "a past restart, not a failure") {
			t.Errorf("%s: hazards %q severity %d notes %q, want a note with %q", tc.name, hazardIDs(r), StartupSeverity(r), r.Notes, tc.note)
		}
	}
	// A Job's container that failed once and completed on its retry, in a
	// pod that Succeeded: recovered too.
	retried := corev1.ContainerStatus{Name: "app", RestartCount: 1,
		State:                corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: at(10), FinishedAt: at(70)}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "database not reachable yet", StartedAt: at(3), FinishedAt: at(4)}}}
	r := AnalyzeStartup(StartupFacts{Pod: shape(podShape{containers: []corev1.Container{c("app")}, st: []corev1.ContainerStatus{retried}, phase: corev1.PodSucceeded}),
		OwnerKind: "Job", Now: t0.Add(time.Hour)})
	if !r.Containers[0].Recovered || r.Containers[0].Failing || len(r.Hazards) != 0 ||
		!strings.Contains(strings.Join(r.Notes, "\n"), "app restarted 1 time, last exit 1 (Error): database not reachable yet; completed at 2026-") {
		t.Errorf("a Job's retried container: recovered %v failing %v hazards %q notes %q", r.Containers[0].Recovered, r.Containers[0].Failing, hazardIDs(r), r.Notes)
	}
	t.Logf("%d restarted containers checked", len(cases)+1)
}

// A native proxy waiting for its image (or anything it waits on to be
// created) is its own failure, said with its reason: never a proxy that
// runs and has not passed its startup probe.
func TestNativeProxyWaitingIsNotStuckUnready(t *testing.T) {
	p := shape(podShape{inits: []corev1.Container{c("istio-init"), nativeProxy()}, containers: []corev1.Container{c("app")},
		initSt: []corev1.ContainerStatus{done("istio-init", 1, 2, 0, ""), {Name: "istio-proxy", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}},
		phase:  corev1.PodPending})
	r := AnalyzeStartup(StartupFacts{Pod: p, Now: t0.Add(3 * time.Minute)})
	for _, h := range r.Hazards {
		if h.ID == "stuck-in-init" {
			t.Errorf("a proxy waiting for its image is said to be stuck unready: %+v", h)
		}
	}
}

// A classic istio-proxy after an app container whose postStart hook holds
// the kubelet: the proxy never started, and the order is a hazard, not
// "ok" (diagnose's KM-START-012 reads the same condition).
func TestPostStartHoldsTheProxy(t *testing.T) {
	hook := &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "until nc -z 127.0.0.1 15021; do sleep 1; done"}}}}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	pod := shape(podShape{inits: []corev1.Container{c("istio-init")}, phase: corev1.PodPending,
		containers: []corev1.Container{{Name: "worker", Lifecycle: hook}, c("istio-proxy")},
		initSt:     []corev1.ContainerStatus{done("istio-init", 1, 2, 0, "")},
		st:         []corev1.ContainerStatus{{Name: "worker", State: waiting}, {Name: "istio-proxy", State: waiting}}})
	r := AnalyzeStartup(StartupFacts{Pod: pod, Now: t0.Add(3 * time.Minute)})
	if got := hazardIDs(r); got != "poststart-holds-proxy@worker" || r.OrderVerdict != "poststart-holds-proxy" || !strings.Contains(r.Hazards[0].Fix, "sidecar.istio.io/nativeSidecar") {
		t.Errorf("hazards %q, verdict %q: %+v", got, r.OrderVerdict, r.Hazards)
	}
	// The proxy started: no hazard.
	pod.Status.ContainerStatuses[1].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(3)}}
	if r := AnalyzeStartup(StartupFacts{Pod: pod, Now: t0.Add(3 * time.Minute)}); strings.Contains(hazardIDs(r), "poststart") {
		t.Errorf("the proxy started, yet: %+v", r.Hazards)
	}
}

// A failed run's log is quoted by the line that says what was wrong, not
// by the program's pointer to its help after it.
func TestLogEndSkipsTheUsageHint(t *testing.T) {
	cases := map[string][]string{
		`Bad value for option "--gid-owner": "2000;3000"`: {"iptables-restore v1.8.9 (nf_tables): ", `Bad value for option "--gid-owner": "2000;3000"`, "Try `iptables-restore -h' for more information."},
		"boom":                                 {"boom"},
		"Try 'x --help' for more information.": {"Try 'x --help' for more information."}, // nothing before it
	}
	for want, lines := range cases {
		got := LogEnd(ContainerStartup{State: "terminated", Log: &LogTail{Current: lines}})
		if got != "its log ends: "+want {
			t.Errorf("%q: %q", lines, got)
		}
	}
}
