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
	Namespace string  `json:"namespace"`
	Name      string  `json:"name"`
	Checks    []Check `json:"checks"`
	// First names the first check that failed ("" when none did); Verdict
	// and Fix are its evidence and fix, or the summary when none failed.
	First   string `json:"first,omitempty"`
	Verdict string `json:"verdict"`
	Fix     string `json:"fix,omitempty"`
}

// Facts are the subjects' reports about one pod; Capture is nil when its
// rules were not read, and Connections is false when its flows were not.
type Facts struct {
	Injection   *injection.InjectionReport
	Startup     *startup.StartupReport
	Capture     *capture.CaptureReport
	Connections bool
}

// Diagnose walks the checks in order.
func Diagnose(f Facts) *Diagnosis {
	d := &Diagnosis{}
	target := ""
	if r := f.Injection; r != nil {
		d.Namespace, d.Name = r.Namespace, r.Name
	} else if s := f.Startup; s != nil {
		d.Namespace, d.Name = s.Namespace, s.Name
	}
	target = d.Name + " -n " + d.Namespace
	d.Checks = []Check{
		injectionCheck(f.Injection, target),
		initCheck(f.Startup, target),
		startCheck(f.Startup, target),
		captureCheck(f.Capture, f.Injection, target),
		connectionsCheck(f.Capture, f.Connections, target),
	}
	for _, c := range d.Checks {
		if c.Status == Fail {
			d.First, d.Verdict, d.Fix = c.Name, c.Evidence, c.Fix
			return d
		}
	}
	var warned, unknown, notRun []string
	for _, c := range d.Checks {
		switch c.Status {
		case Warning:
			warned = append(warned, c.Name)
		case Unknown:
			unknown = append(unknown, c.Name)
		case NotChecked:
			notRun = append(notRun, c.Name)
		}
	}
	parts := []string{"no check failed"}
	if len(warned) > 0 {
		parts = append(parts, "warnings: "+strings.Join(warned, ", "))
	}
	if len(unknown) > 0 {
		parts = append(parts, "unknown: "+strings.Join(unknown, ", "))
	}
	if len(notRun) > 0 {
		parts = append(parts, "not checked: "+strings.Join(notRun, ", "))
	}
	d.Verdict = strings.Join(parts, "; ")
	return d
}

// Worst is the worst status of the checklist (fail, then unknown, then
// warning, then pass; checks not run do not count).
func (d *Diagnosis) Worst() string {
	rank := map[string]int{Pass: 0, NotChecked: 0, Warning: 1, Unknown: 2, Fail: 3}
	worst := Pass
	for _, c := range d.Checks {
		if rank[c.Status] > rank[worst] {
			worst = c.Status
		}
	}
	return worst
}

func injectionCheck(r *injection.InjectionReport, target string) Check {
	c := Check{Name: CheckInjection, Detail: "kubectl mesh why-injected " + target}
	switch {
	case r == nil:
		c.Status, c.Evidence = NotChecked, "not read"
	case r.Ambient && (r.AmbientCapture == injection.AmbientPending || r.AmbientCapture == injection.AmbientNotSetUp):
		// Enrolled as it should be: its setup failed, which init, start or
		// capture says.
		c.Status, c.Evidence = Pass, "ambient mode enrolls it (no sidecar, none expected)"
	case r.CreationBlocked || r.IsMismatch():
		c.Status, c.Evidence, c.Fix = Fail, r.Verdict, r.Fix
	case r.Expected == nil || r.AmbientCapture == injection.EffectUnknown:
		c.Status, c.Evidence, c.Needs = Unknown, r.Verdict, r.Needs
	case len(r.Warnings) > 0:
		c.Status, c.Evidence = Warning, r.Verdict+" ("+strings.Join(r.Warnings, "; ")+")"
	default:
		c.Status, c.Evidence = Pass, r.Verdict
	}
	return c
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
	startFailures = []string{"proxy-not-ready", "ambient-pending", "job-with-classic-sidecar"}
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

func startCheck(s *startup.StartupReport, target string) Check {
	c, ok := fromHazards(CheckStart, s, target, startFailures, startWarnings)
	if ok {
		return c
	}
	c.Status = Pass
	switch {
	case s.Phase != "Running" && s.Phase != "Succeeded":
		c.Status, c.Evidence = Warning, "the pod is "+s.Phase
	case len(s.StartOrder) > 0:
		c.Evidence = "started in order " + strings.Join(s.StartOrder, ", ") + " (" + s.OrderVerdict + ")"
	default:
		c.Evidence = s.OrderVerdict
	}
	return c
}

func captureCheck(r *capture.CaptureReport, inj *injection.InjectionReport, target string) Check {
	c := Check{Name: CheckCapture, Detail: "kubectl mesh iptables " + target}
	switch {
	case inj != nil && inj.Ambient && (inj.AmbientCapture == injection.AmbientPending || inj.AmbientCapture == injection.AmbientNotSetUp):
		// What istio-cni wrote on the pod says so, rules read or not.
		c.Status, c.Evidence, c.Fix = Fail, inj.Verdict, inj.Fix
	case r == nil:
		c.Status, c.Evidence = NotChecked, "the pod's rules were not read (--rules reads them)"
	case r.Drift == nil:
		c.Status, c.Evidence = Unknown, "the rules were read, but what they should be is not known: "+strings.Join(r.Notes, "; ")
	case len(r.Drift.Missing)+len(r.Drift.Extra)+len(r.Drift.Reordered) > 0:
		c.Status = Fail
		c.Evidence = fmt.Sprintf("%d rules missing, %d extra, %d chains reordered against %s", len(r.Drift.Missing), len(r.Drift.Extra), len(r.Drift.Reordered), r.Expected)
		c.Fix = "re-create the pod so that its rules are written again: kubectl delete pod " + target
	default:
		c.Status, c.Evidence = Pass, "the rules are exactly those "+r.Expected+" call for"
	}
	return c
}

func connectionsCheck(r *capture.CaptureReport, asked bool, target string) Check {
	c := Check{Name: CheckConnections, Detail: "kubectl mesh iptables " + target + " --connections"}
	if !asked || r == nil {
		c.Status, c.Evidence = NotChecked, "the pod's live connections were not read (--connections reads them)"
		return c
	}
	var bypass []string
	for _, conn := range r.Connections {
		if conn.Class == "bypassing the proxy" {
			bypass = append(bypass, conn.Proto+" "+conn.Src.String()+" → "+conn.Dst.String())
		}
	}
	if len(bypass) > 0 {
		c.Status, c.Evidence = Fail, fmt.Sprintf("%d connections bypass the proxy: %s", len(bypass), strings.Join(bypass, ", "))
		return c
	}
	c.Status, c.Evidence = Pass, r.ConnectionsSummary
	return c
}
