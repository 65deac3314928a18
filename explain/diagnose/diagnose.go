// Package diagnose composes the subjects' findings about one pod into one
// checklist in the order things happen to a pod — admission (injection),
// init (istio-init, istio-validation, or ambient mode's CNI setup), start
// (the proxy and the app), capture (the live rules), connections (live
// flows) — and puts the first failing check, its finding and its fix on
// top. It is the one place that imports several subject packages
// (injection, startup, capture); they never import each other.
//
// Facts in (the subjects' reports), findings out: no client, no I/O.
package diagnose

import (
	"fmt"
	"strings"
	"time"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// Check statuses, best to worst but for the last two.
const (
	Pass       = "pass"
	Warning    = "warning"
	Fail       = "fail"
	Unknown    = "unknown"     // a fact it needs could not be read
	NotChecked = "not checked" // it was not asked for (Detail says how)
)

// The checks, in causal order.
const (
	CheckInjection   = "injection"
	CheckInit        = "init"
	CheckStart       = "start"
	CheckCapture     = "capture"
	CheckConnections = "connections"
)

// Order is the checks in causal order, as a diagnosis lists them.
var Order = []string{CheckInjection, CheckInit, CheckStart, CheckCapture, CheckConnections}

// Check is one step of a pod's data-plane setup.
type Check struct {
	Name     string `json:"name"`
	Status   string `json:"status"`
	Evidence string `json:"evidence"`
	Fix      string `json:"fix,omitempty"`
	// Detail is the kubectl-mesh command that shows this check in full (or,
	// for a check not run, the one that runs it).
	Detail string `json:"detail,omitempty"`
	// Needs names the permissions that would settle an unknown check.
	Needs []string `json:"needs,omitempty"`
}

// Diagnosis is one pod's checklist, the first failing check on top.
type Diagnosis struct {
	// WorkloadKind is Pod, or the kind of an object with no pod to check
	// (a workload whose pods admission refuses, a manifest's template).
	WorkloadKind string `json:"workloadKind"`
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	// Status is the worst status of the checks that ran (Worst).
	Status string  `json:"status"`
	Checks []Check `json:"checks"`
	// First names the first check that failed or, when none did, the first
	// that warned ("" when neither); Verdict and Fix are its evidence and
	// fix, or the summary when there is none.
	First   string `json:"first,omitempty"`
	Verdict string `json:"verdict"`
	Fix     string `json:"fix,omitempty"`
	// Incomplete names the facts about the pod that could not be read
	// (its events, a log) though every check could be made.
	Incomplete []string `json:"incomplete,omitempty"`
}

// Facts are the subjects' reports about one pod; Capture is nil when its
// rules were not read, and Connections is false when its flows were not.
type Facts struct {
	Injection   *injection.InjectionReport
	Startup     *startup.StartupReport
	Capture     *capture.CaptureReport
	Connections bool
	// CaptureUnknown says why the rules asked for could not be read (then
	// Capture is nil), CaptureNeeds the permissions that would read them.
	CaptureUnknown string
	CaptureNeeds   []string
	// CaptureSkipped says why the rules asked for were not read (the pod
	// is not running): the capture check is not checked.
	CaptureSkipped string
	// NoPod says why there is no pod to check past admission (a manifest
	// not applied, a workload whose pods are refused): the later checks
	// are not checked, and say so.
	NoPod string
}

// Diagnose walks the checks in order.
func Diagnose(f Facts) *Diagnosis {
	d := &Diagnosis{WorkloadKind: "Pod"}
	if r := f.Injection; r != nil {
		d.WorkloadKind, d.Namespace, d.Name = r.Kind, r.Namespace, r.Name
	} else if s := f.Startup; s != nil {
		d.Namespace, d.Name = s.Namespace, s.Name
	}
	target := d.Name + " -n " + d.Namespace
	if d.WorkloadKind != "Pod" {
		target = strings.ToLower(d.WorkloadKind) + "/" + target
	}
	d.Checks = []Check{injectionCheck(f.Injection, target)}
	if f.NoPod != "" {
		for _, name := range Order[1:] {
			c := Check{Name: name, Status: NotChecked, Evidence: "not checked: " + f.NoPod}
			if r := f.Injection; name == CheckInit && r != nil && r.InitFailure != "" && !r.CreationBlocked {
				// Known before any pod runs: what istiod admits, istio-init refuses.
				c.Status, c.Evidence = Fail, "predicted: "+r.InitFailure
				c.Fix = "correct or remove the annotation " + injection.UncheckedOutboundPorts + " in the pod template (a comma-separated list of ports)"
			}
			d.Checks = append(d.Checks, c)
		}
	} else {
		init := initCheck(f.Startup, target)
		d.Checks = append(d.Checks, init,
			startCheck(f.Startup, target, init),
			captureCheck(f, target),
			connectionsCheck(f, target))
	}
	d.Status = d.Worst()
	seen := map[string]bool{}
	var incomplete []string
	if f.Injection != nil {
		incomplete = append(incomplete, f.Injection.Incomplete...)
	}
	if f.Startup != nil {
		incomplete = append(incomplete, f.Startup.Incomplete...)
	}
	for _, u := range incomplete {
		if !seen[u] {
			seen[u] = true
			d.Incomplete = append(d.Incomplete, u)
		}
	}
	for _, status := range []string{Fail, Warning} {
		for _, c := range d.Checks {
			if c.Status == status {
				d.First, d.Verdict, d.Fix = c.Name, c.Evidence, c.Fix
				return d
			}
		}
	}
	var unknown, notRun []string
	for _, c := range d.Checks {
		switch c.Status {
		case Unknown:
			unknown = append(unknown, c.Name)
		case NotChecked:
			notRun = append(notRun, c.Name)
		}
	}
	parts := []string{"every check that ran passed"}
	if len(unknown) > 0 {
		parts = append(parts, "unknown: "+strings.Join(unknown, ", "))
	}
	if len(notRun) > 0 {
		parts = append(parts, "not checked: "+strings.Join(notRun, ", "))
	}
	d.Verdict = strings.Join(parts, "; ")
	return d
}

// worseness ranks the statuses for Worst.
var worseness = map[string]int{Pass: 0, NotChecked: 0, Warning: 1, Unknown: 2, Fail: 3}

// Worst is the worst status of the checklist (fail, then unknown, then
// warning, then pass; checks not run do not count).
func (d *Diagnosis) Worst() string {
	worst := Pass
	for _, c := range d.Checks {
		if worseness[c.Status] > worseness[worst] {
			worst = c.Status
		}
	}
	return worst
}

func injectionCheck(r *injection.InjectionReport, target string) Check {
	c := Check{Name: CheckInjection, Detail: "kubectl mesh why-injected " + target}
	if r == nil {
		c.Status, c.Evidence = NotChecked, "not checked: not read"
		return c
	}
	// istio-init's predicted failure is the init check's finding.
	warnings := warningsBut(r.Warnings, r.InitFailure)
	switch {
	case r.Ambient && (r.AmbientCapture == injection.AmbientPending || r.AmbientCapture == injection.AmbientNotSetUp):
		// Enrolled as it should be: its setup failed, which init, start or
		// capture says.
		c.Status, c.Evidence = Pass, "ambient mode enrolls it (no sidecar, none expected)"
	case r.CreationBlocked || r.IsMismatch():
		c.Status, c.Evidence, c.Fix = Fail, r.Verdict, r.Fix
	case r.Expected == nil || r.AmbientCapture == injection.EffectUnknown:
		c.Status, c.Evidence, c.Needs = Unknown, r.Verdict, r.Needs
	case len(warnings) > 0:
		c.Status, c.Evidence, c.Fix = Warning, r.Verdict+" ("+strings.Join(warnings, "; ")+")", r.Fix
	default:
		c.Status, c.Evidence = Pass, r.Verdict
	}
	proof(&c, r)
	return c
}

// warningsBut are the warnings but one (istio-init's predicted failure: the
// init check's finding).
func warningsBut(ws []string, but string) []string {
	var out []string
	for _, w := range ws {
		if w != but {
			out = append(out, w)
		}
	}
	return out
}

// proof adds --verify's dry-run create to the injection check: it agrees,
// it answers where the prediction could not, or it disagrees (then the
// apiserver is right, and the prediction is a bug to report).
func proof(c *Check, r *injection.InjectionReport) {
	v := r.Verified
	switch {
	case r.NotVerified != "":
		c.Evidence += " (not verified: " + r.NotVerified + ")"
	case v == nil:
	case v.Agrees != nil && *v.Agrees:
		c.Evidence += "; a dry-run create through the real admission chain agrees: " + v.Summary()
	case v.Refused:
		c.Status, c.Evidence = Fail, "a dry-run create was refused: "+v.Summary()
		if c.Fix == "" {
			c.Fix = "see what refuses it: " + c.Detail + " --verify"
		}
	case v.Agrees == nil && r.Injected != nil:
		// The prediction could not be made: the proof answers, compared
		// with what the pod has (sidecar or not, revision, kind).
		rev := r.InjectedRevision
		if rev == "" {
			rev = r.Revision
		}
		same := *r.Injected == v.Injected
		switch {
		case !same || v.Injected && v.Revision != "" && rev != "" && v.Revision != rev:
			has := "the pod has no sidecar"
			if *r.Injected {
				has = "the pod has a sidecar of revision " + dashed(rev)
			}
			c.Status, c.Needs = Fail, nil
			c.Evidence = has + ", but a dry-run create now: " + v.Summary() + ": re-created, it would get that"
			c.Fix = "re-create the pod so that admission decides again: kubectl rollout restart its Deployment, StatefulSet or DaemonSet, or delete the pod when a controller creates it again"
		case v.Injected && v.Sidecar != "" && r.Sidecar != "" && v.Sidecar != r.Sidecar:
			c.Status, c.Needs = Warning, nil
			c.Evidence = "the pod has a " + r.Sidecar + " sidecar; a dry-run create now: " + v.Summary()
		default:
			c.Status, c.Evidence, c.Needs = Pass, "a dry-run create now gives what the pod has: "+v.Summary(), nil
		}
	case v.Agrees == nil:
		c.Evidence += "; a dry-run create: " + v.Summary()
	default:
		c.Status = Unknown
		c.Evidence = "the prediction and a dry-run create disagree (" + v.Disagreement + "): a bug in kubectl-mesh's model of the mesh; the dry run's answer: " + v.Summary()
	}
}

// hazardsOf are the startup hazards of kinds, as "message" lines, and the
// first one's fix.
func hazardsOf(s *startup.StartupReport, kinds ...string) (msgs []string, fix string) {
	for _, h := range s.Hazards {
		for _, k := range kinds {
			if h.ID == k {
				msgs = append(msgs, h.Message)
				if fix == "" {
					fix = h.Fix
				}
			}
		}
	}
	return msgs, fix
}

// initHazards fail the init check: the pod's setup before any proxy runs.
var initHazards = []string{"istio-init-failed", "validation-failed", "stuck-in-init",
	"ambient-cni-not-ready", "ambient-no-ztunnel", "ambient-cni-failed"}

// startFailures fail the start check; startWarnings warn.
var (
	startFailures = []string{"container-failing", "proxy-not-ready", "ambient-pending", "job-with-classic-sidecar"}
	startWarnings = []string{"app-before-proxy-ready", "init-after-capture"}
)

// fromHazards starts a check read from the startup report: not checked
// without one, failed or warned by the hazards of the kinds given (ok is
// then true: the check is decided).
func fromHazards(name string, s *startup.StartupReport, target string, fails, warns []string) (c Check, ok bool) {
	c = Check{Name: name, Detail: "kubectl mesh startup " + target}
	if s == nil {
		c.Status, c.Evidence = NotChecked, "not read"
		return c, true
	}
	for _, k := range []struct {
		status string
		kinds  []string
	}{{Fail, fails}, {Warning, warns}} {
		if msgs, fix := hazardsOf(s, k.kinds...); len(msgs) > 0 {
			c.Status, c.Evidence, c.Fix = k.status, strings.Join(msgs, "; "), fix
			return c, true
		}
	}
	return c, false
}

func initCheck(s *startup.StartupReport, target string) Check {
	c, ok := fromHazards(CheckInit, s, target, initHazards, nil)
	if ok {
		return c
	}
	if unscheduled(s) {
		c.Status, c.Evidence = NotChecked, "not checked: the pod is on no node yet, nothing has run"
		return c
	}
	if len(s.Incomplete) > 0 && (s.InitResult == "running" || s.Phase == "Pending") {
		c.Status, c.Evidence = Unknown, "init "+s.InitResult+"; "+strings.Join(s.Incomplete, "; ")
		return c
	}
	c.Status = Pass
	switch {
	case s.Ambient:
		c.Evidence = "ambient mode: no init container; istio-cni set the pod's network up"
	case s.InitResult == "none":
		c.Evidence = "no init containers"
	default:
		c.Evidence = "init containers " + s.InitResult
		if s.InitResult == "running" {
			c.Status = Warning
		}
	}
	return c
}

func startCheck(s *startup.StartupReport, target string, init Check) Check {
	c, ok := fromHazards(CheckStart, s, target, startFailures, startWarnings)
	if s == nil || ok && c.Status == Fail {
		return c
	}
	// Containers that cannot start or keep restarting: a failure (waiting
	// to start again, or never started), else a warning (restarted, runs).
	if failed, restarted, fix := containerTrouble(s, target); len(failed) > 0 {
		c.Status, c.Evidence, c.Fix = Fail, strings.Join(failed, "; "), fix
		return c
	} else if !ok && len(restarted) > 0 {
		c.Status, c.Evidence, c.Fix = Warning, strings.Join(restarted, "; "), fix
		return c
	}
	if ok {
		return c
	}
	c.Status = Pass
	switch {
	case unscheduled(s):
		c.Status, c.Evidence = Warning, "the pod is on no node yet: the scheduler has not placed it, so nothing has run"
		c.Fix = "kubectl describe pod " + target + "   # the scheduler's events say why"
	case init.Status == Fail && s.Phase == "Pending":
		// Nothing starts before init completes: not a finding of its own.
		c.Status, c.Evidence = NotChecked, "not checked: nothing starts until init completes"
	case s.Phase != "Running" && s.Phase != "Succeeded":
		c.Status, c.Evidence = Warning, "the pod is "+s.Phase
	case len(s.StartOrder) > 0:
		c.Evidence = "started in order " + strings.Join(s.StartOrder, ", ") + " (" + s.OrderVerdict + ")"
	default:
		c.Evidence = s.OrderVerdict
	}
	return c
}

func dashed(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// waitingFailures are the reasons a container waits that it will not get
// past by itself.
var waitingFailures = map[string]bool{"CrashLoopBackOff": true, "ImagePullBackOff": true, "ErrImagePull": true,
	"InvalidImageName": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true}

// containerTrouble lists the containers (app, proxy, native sidecars) that
// cannot start — waiting for a reason they do not get past alone — and
// those that restarted, with the command that shows why.
func containerTrouble(s *startup.StartupReport, target string) (failed, restarted []string, fix string) {
	all := append(append([]startup.ContainerStartup(nil), s.InitContainers...), s.Containers...)
	for _, c := range all {
		if c.Role == startup.RoleIstioInit || c.Role == startup.RoleIstioValidation || c.Role == startup.RoleInit || c.Failing {
			continue // the init check's, or a crash loop (startup's container-failing)
		}
		last := ""
		if t := c.LastTermination; t != nil {
			last = "; last " + c.LastFailure
			if c.LastFailure == "" {
				last = fmt.Sprintf("; last exit %d", t.ExitCode)
				if t.Reason != "" {
					last += " (" + t.Reason + ")"
				}
			}
		}
		logs := "kubectl logs " + target + " -c " + c.Name + " --previous"
		switch {
		case c.State == "waiting" && waitingFailures[c.Reason]:
			failed = append(failed, fmt.Sprintf("container %s: %s (%s%s)", c.Name, c.Reason, startup.Plural(c.Restarts, "restart"), last))
			if fix == "" || strings.HasPrefix(fix, "kubectl logs") && c.Restarts == 0 {
				fix = logs
				if c.Restarts == 0 {
					fix = "kubectl describe pod " + target + "   # the events say why container " + c.Name + " cannot start"
				}
			}
		case c.Restarts > 0:
			restarted = append(restarted, fmt.Sprintf("container %s restarted %s%s%s", c.Name, startup.Plural(c.Restarts, "time"), last, runningSince(c)))
			if fix == "" {
				fix = logs
			}
		}
	}
	return failed, restarted, fix
}

// runningSince says since when a restarted container that runs again has
// run.
func runningSince(c startup.ContainerStartup) string {
	if c.State != "running" || c.StartedAt == nil {
		return ""
	}
	return "; running again since " + c.StartedAt.UTC().Format(time.RFC3339)
}

// unscheduled: the pod waits for the scheduler, no container was created.
func unscheduled(s *startup.StartupReport) bool {
	return s.Node == "" && s.Phase == "Pending"
}

func captureCheck(f Facts, target string) Check {
	r, inj := f.Capture, f.Injection
	c := Check{Name: CheckCapture, Detail: "kubectl mesh iptables " + target}
	switch {
	case inj != nil && inj.Ambient && (inj.AmbientCapture == injection.AmbientPending || inj.AmbientCapture == injection.AmbientNotSetUp):
		// What istio-cni wrote on the pod says so, rules read or not: the
		// rules may be right, ztunnel is what is missing.
		c.Status, c.Evidence, c.Fix = Fail, inj.Verdict, inj.Fix
		c.Detail = "kubectl mesh why-injected " + target
	case f.CaptureUnknown != "":
		c.Status, c.Evidence, c.Needs = Unknown, f.CaptureUnknown, f.CaptureNeeds
	case f.CaptureSkipped != "":
		c.Status, c.Evidence = NotChecked, "not checked: "+f.CaptureSkipped
	case r == nil:
		c.Status, c.Evidence = NotChecked, "not checked: the pod's rules were not read"
		c.Detail = "kubectl mesh diagnose " + target + " --rules"
	case r.Drift == nil:
		c.Status, c.Evidence = Unknown, "the rules were read, but what they should be is not known: "+strings.Join(r.Notes, "; ")
	case len(r.Drift.Missing)+len(r.Drift.Extra)+len(r.Drift.Reordered) > 0:
		c.Status = Fail
		c.Evidence = fmt.Sprintf("%d rules missing, %d extra, %d chains reordered against %s", len(r.Drift.Missing), len(r.Drift.Extra), len(r.Drift.Reordered), r.Expected)
		c.Fix = "re-create the pod so that its rules are written again: kubectl delete pod " + target
	default:
		c.Status, c.Evidence = Pass, "the rules are exactly those "+r.Expected+" call for"
	}
	if r == nil {
		return c
	}
	if l := r.Live; l != nil && l.Container != "" && c.Status != NotChecked {
		// Say how they were read: an ephemeral container stays in the pod.
		switch l.Via {
		case "ephemeral":
			c.Evidence += " (read by ephemeral container " + l.Container + ", listed in the pod until it is deleted)"
		default:
			c.Evidence += " (read by node pod " + l.Container + ", deleted since)"
		}
	}
	return c
}

func connectionsCheck(f Facts, target string) Check {
	r := f.Capture
	c := Check{Name: CheckConnections, Detail: "kubectl mesh iptables " + target + " --connections"}
	switch {
	case f.Connections && f.CaptureUnknown != "":
		c.Status, c.Evidence, c.Needs = Unknown, f.CaptureUnknown, f.CaptureNeeds
		return c
	case f.CaptureSkipped != "":
		c.Status, c.Evidence = NotChecked, "not checked: "+f.CaptureSkipped
		return c
	case !f.Connections || r == nil:
		c.Status, c.Evidence = NotChecked, "not checked: the pod's live connections were not read"
		c.Detail = "kubectl mesh diagnose " + target + " --connections"
		return c
	case r.ConnectionsSummary == "" && len(r.Connections) == 0:
		c.Status, c.Evidence = Unknown, "the pod's connection tracking table could not be read: "+strings.Join(r.Notes, "; ")
		return c
	}
	var bypass []string
	rule := ""
	for _, conn := range r.Connections {
		if conn.Class == capture.Bypassing {
			bypass = append(bypass, conn.Proto+" "+conn.Src.String()+" → "+conn.Dst.String())
			if rule == "" {
				rule = conn.Rule
			}
		}
	}
	if len(bypass) > 0 {
		c.Status, c.Evidence = Fail, fmt.Sprintf("%d connections bypass the proxy: %s", len(bypass), strings.Join(bypass, ", "))
		if rule != "" {
			c.Evidence += " (let through by: " + rule + ")"
		}
		c.Fix = "if this traffic must go through the proxy (mTLS, policy, telemetry), take its port or address out of the pod's traffic.sidecar.istio.io/exclude* annotations and re-create the pod; the rules and each flow: " + c.Detail
		return c
	}
	c.Status, c.Evidence = Pass, r.ConnectionsSummary
	return c
}
