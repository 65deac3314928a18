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
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

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
	Name   string `json:"name"`
	Status string `json:"status"`
	// Code is the catalogue's code of the finding that decides it.
	Code     string `json:"code,omitempty"`
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
	First string `json:"first,omitempty"`
	// Code and Title are the first failing check's finding's code and
	// title (the catalogue's).
	Code    string `json:"code,omitempty"`
	Title   string `json:"title,omitempty"`
	Verdict string `json:"verdict"`
	Fix     string `json:"fix,omitempty"`
	// Findings are every check's findings that are not a pass, in causal
	// order.
	Findings []Finding `json:"findings"`
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
	// Files are the manifests (-f) a pod or template not created yet was
	// read from.
	Files []string
	// Pod is the pod (nil for a template or a manifest): the checks of its
	// spec read it.
	Pod *corev1.Pod
	// Services are the Services of the pod's namespace that select it;
	// ServicesUnknown says why they could not be read.
	Services        []corev1.Service
	ServicesUnknown string
	// ServicesMissing are the Services of the pod's namespace that would
	// select it but for a label Istio's injector (InjectedLabelMiss) or
	// the pod's controller (TemplateLabelMiss) sets on the pod, whose value
	// the pod's differs from.
	ServicesMissing []corev1.Service
	// ServiceMeshed are, for a running pod outside the mesh, the pods in
	// the mesh that each Service selecting it also selects, by Service
	// name; ServiceMeshedUnknown says why they could not be read.
	ServiceMeshed        ServiceMembers
	ServiceMeshedUnknown string
	// NetworkPolicies are the NetworkPolicies of the pod's namespace whose
	// podSelector matches it; NetworkPoliciesUnknown says why they could
	// not be read.
	NetworkPolicies        []networkingv1.NetworkPolicy
	NetworkPoliciesUnknown string
	// Workload is what a workload that lacks pods reports (its row has no
	// pod: NoPod says so).
	Workload *WorkloadState
	// Owner is the workload whose template makes the pod (its own labels
	// and, for a Job, whether a CronJob made it), when read; OwnerUnknown
	// says why it could not be.
	Owner        *WorkloadState
	OwnerUnknown string
	// ClusterRanges are the cluster's pod and Service address ranges (read
	// once per run, for the pods whose outbound capture is narrowed);
	// ClusterRangesUnknown says which could not be read, and
	// ClusterRangesNeeds the permissions that would read them.
	// Quotas are the ResourceQuotas of the pod's namespace, read when its
	// facts need them (NeedsQuotas); QuotasUnknown says why they could not
	// be.
	Quotas        []corev1.ResourceQuota
	QuotasUnknown string
	// NodeRoom is what the nodes have left, read when the pod waits for
	// room (NeedsNodeRoom).
	NodeRoom NodeRoom
	// ConfigMapAdmissions are, for the cluster-written ConfigMaps the pod
	// cannot mount (MissingClusterConfigMaps), what admission made of a
	// dry-run create of each in its namespace, read with the quotas.
	ConfigMapAdmissions  []ConfigMapAdmission
	ClusterRanges        []ClusterRange
	ClusterRangesUnknown string
	ClusterRangesNeeds   []string
}

// ClusterRange is one of the cluster's address ranges, or one address of
// it when the range itself is not published (the kubernetes Service's
// ClusterIP, the pod's own IP).
type ClusterRange struct {
	Prefix netip.Prefix `json:"prefix"`
	// Pods: a range pods get their addresses from (else Services').
	Pods bool `json:"pods"`
	// From says where it was read ("node node-1's podCIDRs", "ServiceCIDR
	// kubernetes", "the kubernetes Service's ClusterIP").
	From string `json:"from"`
}

// Diagnose runs every check of the catalogue and walks the stages in
// order: each stage's row is decided by its worst finding.
func Diagnose(f Facts) *Diagnosis {
	d := &Diagnosis{WorkloadKind: "Pod"}
	if r := f.Injection; r != nil {
		d.WorkloadKind, d.Namespace, d.Name = r.Kind, r.Namespace, r.Name
	} else if s := f.Startup; s != nil {
		d.Namespace, d.Name = s.Namespace, s.Name
	} else if p := f.Pod; p != nil {
		d.Namespace, d.Name = p.Namespace, p.Name
	} else if w := f.Workload; w != nil {
		d.WorkloadKind, d.Namespace, d.Name = w.Kind, w.Namespace, w.Name
	}
	target := d.Name + " -n " + d.Namespace
	if d.WorkloadKind != "Pod" {
		target = strings.ToLower(d.WorkloadKind) + "/" + target
	}
	in := &Input{Facts: f, Target: target}
	d.Checks = []Check{in.injection().row}
	if f.NoPod != "" {
		for _, name := range Order[1:] {
			c := Check{Name: name, Status: NotChecked, Evidence: "not checked: " + f.NoPod}
			if name == CheckInit {
				if a := in.initAnswer(); a.row.Status == Fail {
					c = a.row // predicted: what istiod admits, istio-init refuses
				}
			}
			d.Checks = append(d.Checks, c)
		}
	} else {
		d.Checks = append(d.Checks, in.initAnswer().row, in.startAnswer().row, in.captureAnswer().row, in.connectionsAnswer().row)
	}
	for _, s := range Checks() {
		for _, fd := range s.run(in) {
			fd.Code, fd.Title, fd.Stage = s.Code, s.Title, s.Stage
			if fd.Status == "" {
				fd.Status = s.Status
			}
			d.Findings = append(d.Findings, fd)
		}
	}
	d.Findings = append(d.Findings, predicted(f)...)
	causesFirst(d)
	resumePaused(d, f)
	for i := range d.Checks {
		decide(&d.Checks[i], d.Findings, f.NoPod != "")
	}
	templateOverride(d, in)
	explainSymptoms(d, f.NoPod != "")
	cronJobTemplates(d, f)
	deleteActiveJob(d, f)
	stuckStatefulSetPod(d, f)
	if !staleStatefulSetPod(d, f) {
		markUnexplained(d, in.injected())
	}
	gone := leaving(d, f)
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
	if d.setFirst() {
		return d
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
	if gone != "" {
		parts = []string{gone}
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

// decide lets a stage's worst finding decide its row: a finding worse than
// the row's own answer takes its place (a static check's finding on a
// stage whose live facts were not read says that they were not).
func decide(c *Check, findings []Finding, noPod bool) {
	for _, status := range []string{Fail, Unknown, Warning} {
		for _, f := range findings {
			if f.Stage != c.Name || f.Status != status {
				continue
			}
			if c.Code == f.Code && c.Status == f.Status {
				return // the row is this finding already
			}
			if c.Status != NotChecked && worseness[c.Status] >= worseness[status] {
				return
			}
			if noPod && c.Status == NotChecked && f.Code != CodeWorkloadShort && f.Code != CodeJobFailed && !f.predicted {
				return // nothing of a pod that does not exist is checked
			}
			ev := f.Evidence
			if c.Status == NotChecked && c.Evidence != "" && !f.predicted {
				ev += " (" + c.Evidence + ")"
			}
			c.Status, c.Evidence, c.Fix, c.Code, c.Needs = f.Status, ev, f.Fix, f.Code, f.Needs
			return
		}
	}
}

// worseness ranks the statuses for Worst.
var worseness = map[string]int{Pass: 0, NotChecked: 0, Warning: 1, Unknown: 2, Fail: 3}

// setFirst puts the first check that failed (else warned) on top of d: its
// name, evidence, fix, code and the code's title; false when none did.
func (d *Diagnosis) setFirst() bool {
	for _, status := range []string{Fail, Warning} {
		for _, c := range d.Checks {
			if c.Status == status {
				d.First, d.Verdict, d.Fix, d.Code = c.Name, c.Evidence, c.Fix, c.Code
				if s, ok := Lookup(c.Code); ok {
					d.Title = s.Title
				}
				return true
			}
		}
	}
	return false
}

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

// explains are the findings that, on a pod whose app container fails,
// are the likely cause of it: a port the proxy holds, an app that started
// before the proxy was ready.
var explains = map[string]bool{CodeReservedPort: true, CodeAppBeforeProxy: true}

// causesFirst puts a cause before its symptom: when an app container fails
// and a finding explains why, that finding fails too and decides its
// stage's row; the symptom stays among the findings, after it.
func causesFirst(d *Diagnosis) {
	symptom := -1
	for i, f := range d.Findings {
		if f.Code == CodeAppFailing && f.Status == Fail {
			symptom = i
			break
		}
	}
	if symptom < 0 {
		return
	}
	var causes []Finding
	var rest []Finding
	for _, f := range d.Findings {
		if explains[f.Code] && (f.Status == Warning || f.Status == Fail) {
			f.Status, f.cause = Fail, true
			f.Evidence += "; the likely cause of: " + d.Findings[symptom].Evidence
			causes = append(causes, f)
			continue
		}
		rest = append(rest, f)
	}
	if len(causes) == 0 {
		return
	}
	// The causes go before the first finding of their stage.
	out := make([]Finding, 0, len(d.Findings))
	placed := false
	for _, f := range rest {
		if !placed && f.Stage == causes[0].Stage {
			out, placed = append(out, causes...), true
		}
		out = append(out, f)
	}
	if !placed {
		out = append(out, causes...)
	}
	d.Findings = out
	for i := range d.Checks {
		c := &d.Checks[i]
		for _, f := range causes {
			if f.Stage == c.Name {
				c.Status, c.Evidence, c.Fix, c.Code, c.Needs = f.Status, f.Evidence, f.Fix, f.Code, f.Needs
				break
			}
		}
	}
}
