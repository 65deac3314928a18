package diagnose

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// The init and start families: startup's hazards and the containers'
// states, one code per cause.
const (
	CodeInitNoNetAdmin     = "KM-INIT-001"
	CodeInitBadArgument    = "KM-INIT-002"
	CodeInitFailed         = "KM-INIT-003"
	CodeValidationFailed   = "KM-INIT-004"
	CodeStuckInInit        = "KM-INIT-005"
	CodeAmbientSetup       = "KM-INIT-006"
	CodeInitCaptured       = "KM-INIT-007"
	CodeAppBeforeProxy     = "KM-START-001"
	CodeProxyNotReady      = "KM-START-003"
	CodeProxyFailing       = "KM-START-004"
	CodeAppFailing         = "KM-START-005"
	CodeJobClassicSidecar  = "KM-START-007"
	CodeNotRunning         = "KM-START-012"
	CodeAmbientWaitZtunnel = "KM-START-013"
)

// initCause is the cause startup put an init container's failure down to.
func initCause(s *startup.StartupReport, container string) string {
	for _, c := range s.InitContainers {
		if c.Name == container {
			return c.Cause
		}
	}
	return ""
}

// hazardCode is the code of a startup hazard.
func hazardCode(s *startup.StartupReport, h startup.Hazard) string {
	switch h.ID {
	case "istio-init-failed":
		switch initCause(s, h.Container) {
		case startup.CauseNoNetAdmin:
			return CodeInitNoNetAdmin
		case startup.CauseBadPorts:
			return CodeInitBadArgument
		}
		return CodeInitFailed
	case "validation-failed":
		return CodeValidationFailed
	case "stuck-in-init":
		return CodeStuckInInit
	case "ambient-cni-not-ready", "ambient-no-ztunnel", "ambient-cni-failed":
		return CodeAmbientSetup
	case "init-after-capture":
		return CodeInitCaptured
	case "app-before-proxy-ready":
		return CodeAppBeforeProxy
	case "proxy-not-ready":
		return CodeProxyNotReady
	case "container-failing":
		if h.Container == istio.ProxyContainer {
			return CodeProxyFailing
		}
		return CodeAppFailing
	case "job-with-classic-sidecar":
		return CodeJobClassicSidecar
	case "ambient-pending":
		return CodeAmbientWaitZtunnel
	}
	return ""
}

// initHazards fail the init check: the pod's setup before any proxy runs;
// initWarnings warn.
var (
	initHazards = []string{"istio-init-failed", "validation-failed", "stuck-in-init",
		"ambient-cni-not-ready", "ambient-no-ztunnel", "ambient-cni-failed"}
	initWarnings = []string{"init-after-capture"}
)

// startFailures fail the start check; startWarnings warn.
var (
	startFailures = []string{"container-failing", "proxy-not-ready", "ambient-pending", "job-with-classic-sidecar"}
	startWarnings = []string{"app-before-proxy-ready"}
)

// fromHazards starts a stage read from the startup report: not checked
// without one, failed or warned by the hazards of the kinds given (ok is
// then true: the row is decided); every such hazard is a finding.
func fromHazards(in *Input, name string, s *startup.StartupReport, fails, warns []string) (a *stageAnswer, ok bool) {
	a = &stageAnswer{row: Check{Name: name, Detail: "kubectl mesh startup " + in.Target}}
	c := &a.row
	if s == nil {
		c.Status, c.Evidence = NotChecked, "not read"
		return a, true
	}
	for _, k := range []struct {
		status string
		kinds  []string
	}{{Fail, fails}, {Warning, warns}} {
		var msgs []string
		for _, h := range s.Hazards {
			for _, kind := range k.kinds {
				if h.ID != kind {
					continue
				}
				code := hazardCode(s, h)
				if code == CodeAppBeforeProxy && noSidecarTemplate(in.Pod) {
					continue // that template's proxy has no hold: KM-CAP-011's finding
				}
				fix := h.Fix
				switch code {
				case CodeJobClassicSidecar:
					fix = in.jobNativeFix(h.Fix)
				case CodeAppBeforeProxy:
					fix = in.holdFix(h.Fix)
				case CodeInitFailed:
					if initCause(s, h.Container) == startup.CauseOwner {
						if _, ownerFix := ownerGroups(in.Pod); ownerFix != "" {
							fix = ownerFix
						}
					}
				}
				fd := Finding{Code: code, Status: k.status, Evidence: h.Message, Fix: fix, container: h.Container}
				if code == CodeJobClassicSidecar {
					fd.edit = jobNativeEdit(in.Pod)
				}
				a.findings = append(a.findings, fd)
				msgs = append(msgs, h.Message)
				if c.Fix == "" {
					c.Fix, c.Code = fix, code
				}
			}
		}
		if len(msgs) > 0 && !ok {
			c.Status, c.Evidence, ok = k.status, strings.Join(msgs, "; "), true
		}
	}
	// Stuck in init because istio-init or istio-validation fails: that
	// failure is the finding, not a second one.
	failing := false
	for _, f := range a.findings {
		failing = failing || f.Status == Fail && f.Code != CodeStuckInInit
	}
	var kept []Finding
	for _, f := range a.findings {
		if f.Code != CodeStuckInInit || !failing {
			kept = append(kept, f)
		}
	}
	a.findings = kept
	if !ok {
		c.Fix, c.Code = "", ""
	}
	return a, ok
}

// initAnswer is the init stage: istio-init, istio-validation, ambient
// mode's setup, user init containers.
func (in *Input) initAnswer() *stageAnswer {
	if in.init != nil {
		return in.init
	}
	s := in.Startup
	if s == nil && in.NoPod != "" {
		// No pod: what istiod admits and istio-init will refuse is known.
		a := &stageAnswer{row: Check{Name: CheckInit, Status: NotChecked, Evidence: "not checked: " + in.NoPod}}
		if r := in.Injection; r != nil && r.InitFailure != "" && !r.CreationBlocked {
			a.row.Status, a.row.Evidence, a.row.Code = Fail, "predicted: "+r.InitFailure, CodeInitBadArgument
			a.row.Fix = "correct or remove the annotation " + istio.AnnotationIncludeOutboundPorts + " in the pod template (a comma-separated list of ports)"
			a.findings = []Finding{{Code: CodeInitBadArgument, Status: Fail, Evidence: a.row.Evidence, Fix: a.row.Fix}}
		}
		in.init = a
		return a
	}
	a, ok := fromHazards(in, CheckInit, s, initHazards, initWarnings)
	in.init = a
	for i := range a.findings {
		f := &a.findings[i]
		switch f.Code {
		case CodeInitNoNetAdmin:
			in.refineNoNetAdmin(f)
		case CodeStuckInInit:
			in.refineCapturedWait(f, a.findings)
			if ev, fix, ok := in.initRunsOn(s, f.container); ok && f.Mesh == "" {
				f.Evidence, f.Fix = f.Evidence+": "+ev, fix
			}
		default:
			continue
		}
		if a.row.Code == f.Code && a.row.Status == f.Status {
			a.row.Evidence, a.row.Fix = f.Evidence, f.Fix
		}
	}
	// The platform's account of the init containers: a cause it names goes
	// before "stuck in init", which is then only its symptom.
	if platform := in.initPlatform(); len(platform) > 0 {
		var kept []Finding
		for _, f := range a.findings {
			if f.Code != CodeStuckInInit {
				kept = append(kept, f)
			}
		}
		a.findings = append(kept, platform...)
		if !ok || a.row.Code == CodeStuckInInit || a.row.Status != Fail {
			f := platform[0]
			a.row.Status, a.row.Evidence, a.row.Fix, a.row.Code = f.Status, f.Evidence, f.Fix, f.Code
		}
		return a
	}
	if ok {
		return a
	}
	c := &a.row
	if unscheduled(s) {
		c.Status, c.Evidence = NotChecked, "not checked: the pod is on no node yet, nothing has run"
		return a
	}
	if len(s.Incomplete) > 0 && (s.InitResult == "running" || s.Phase == "Pending") {
		c.Status, c.Evidence = Unknown, "init "+s.InitResult+"; "+strings.Join(s.Incomplete, "; ")
		return a
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
	return a
}

// startAnswer is the start stage: the proxy and the app, their order, their
// crash loops and restarts.
func (in *Input) startAnswer() *stageAnswer {
	if in.start != nil {
		return in.start
	}
	s := in.Startup
	a, ok := fromHazards(in, CheckStart, s, startFailures, startWarnings)
	in.start = a
	for i := range a.findings {
		if f := &a.findings[i]; f.Code == CodeProxyNotReady {
			in.refineProxyNotReady(f)
			if a.row.Code == f.Code && a.row.Status == f.Status {
				a.row.Evidence, a.row.Fix = f.Evidence, f.Fix
			}
		}
		if f := &a.findings[i]; f.Code == CodeAppFailing || f.Code == CodeProxyFailing {
			in.refineFailing(f)
			if a.row.Code == f.Code && a.row.Status == f.Status {
				a.row.Evidence, a.row.Fix = f.Evidence, f.Fix
			}
		}
		if f := &a.findings[i]; f.Code == CodeJobClassicSidecar {
			if fix := in.nativeSidecarFix(); fix != "" {
				f.Fix = fix
				if a.row.Code == f.Code {
					a.row.Fix = fix
				}
			}
		}
	}
	c := &a.row
	if s == nil {
		return a
	}
	// Containers that cannot start or keep restarting: a failure (waiting
	// to start again, or never started), else a warning (restarted, runs),
	// or evidence (restarted, runs ready in a Ready pod: info, always
	// listed).
	failed, all, fix := containerTrouble(in, s, in.Pod, in.Target)
	var restarted, recovered []Finding
	for _, f := range all {
		if f.Status == Info {
			recovered = append(recovered, f)
		} else {
			restarted = append(restarted, f)
		}
	}
	a.findings = append(a.findings, failed...)
	if !ok {
		a.findings = append(a.findings, restarted...)
	}
	a.findings = append(a.findings, recovered...)
	if ok && c.Status == Fail {
		return a
	}
	if len(failed) > 0 {
		c.Status, c.Evidence, c.Fix, c.Code = Fail, joinEvidence(failed), fix, failed[0].Code
		return a
	}
	// A pod that does not run: the scheduler's or the kubelet's reason,
	// worse than any warning of how it started (nothing starts before
	// init completes, which the init check says).
	init := in.initAnswer().row
	if unscheduled(s) || s.Phase != "Running" && s.Phase != "Succeeded" && !(init.Status == Fail && s.Phase == "Pending") {
		status, evidence, nrFix := in.notRunning()
		a.findings = append(a.findings, Finding{Code: CodeNotRunning, Status: status, Evidence: evidence, Fix: nrFix, Mesh: in.notRunningMesh})
		if worseness[status] > worseness[c.Status] || !ok && len(restarted) == 0 {
			c.Status, c.Evidence, c.Fix, c.Code = status, evidence, nrFix, CodeNotRunning
			return a
		}
	}
	if !ok && len(restarted) > 0 {
		c.Status, c.Evidence, c.Fix, c.Code = Warning, joinEvidence(restarted), fix, restarted[0].Code
		return a
	}
	if ok || c.Code == CodeNotRunning {
		return a
	}
	c.Status = Pass
	switch {
	case init.Status == Fail && s.Phase == "Pending":
		// Nothing starts before init completes: not a finding of its own.
		c.Status, c.Evidence = NotChecked, "not checked: nothing starts until init completes"
	case len(s.StartOrder) > 0:
		c.Evidence = "started in order " + strings.Join(s.StartOrder, ", ") + " (" + s.OrderVerdict + ")"
	default:
		c.Evidence = s.OrderVerdict
	}
	return a
}

func joinEvidence(fs []Finding) string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Evidence)
	}
	return strings.Join(out, "; ")
}

// containerTrouble lists the containers (app, proxy, native sidecars) that
// cannot start — waiting for a reason they do not get past alone — and
// those that restarted, with the command that shows why.
func containerTrouble(in *Input, s *startup.StartupReport, p *corev1.Pod, target string) (failed, restarted []Finding, fix string) {
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
		code := CodeAppFailing
		if c.Name == istio.ProxyContainer {
			code = CodeProxyFailing
		}
		switch {
		case waitingFailure(c):
			own := logs
			ev := fmt.Sprintf("container %s cannot start: %s", c.Name, kubeletSays(c))
			if c.Restarts == 0 {
				own = waitingFix(in, c, ev)
			}
			if c.Restarts > 0 || last != "" {
				ev += fmt.Sprintf(" (%s%s)", startup.Plural(c.Restarts, "restart"), last)
			}
			if evs := warningEventsBut(s, c.Name, c.Reason, 2); len(evs) > 0 {
				ev += "; events: " + strings.Join(evs, "; ")
			}
			f := Finding{Code: code, Status: Fail, Fix: own, Evidence: ev}
			if by := injectedBy(p, c.Name, c.Reason); by != "" {
				if rewritten, rfix, ok := in.imageRewrite(c.Name); ok && imageReason(c.Reason) {
					by, own = rewritten, rfix
				} else if imageReason(c.Reason) {
					own = meshImageFix(p, c.Name, in.injectorImage())
				}
				f.Evidence += "; " + by
				f.Mesh = by
				f.Fix = own
			}
			failed = append(failed, f)
			if fix == "" || strings.HasPrefix(fix, "kubectl logs") && c.Restarts == 0 {
				fix = own
			}
		case c.Recovered:
			// Ready now, in a Ready pod (or completed, in a pod that
			// Succeeded): its restarts are evidence, no fault (startup's
			// classify says when a crash loop is not).
			restarted = append(restarted, Finding{Code: code, Status: Info,
				Evidence: "container " + c.RecoverySummary(s.Name, s.Namespace) + ", in a " + map[bool]string{true: "Succeeded", false: "Ready"}[s.Phase == "Succeeded"] + " pod: a past restart, not a failure"})
		case c.Restarts > 0:
			restarted = append(restarted, Finding{Code: code, Status: Warning, Fix: logs,
				Evidence: fmt.Sprintf("container %s restarted %s%s%s", c.Name, startup.Plural(c.Restarts, "time"), last, runningSince(c))})
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

// jobNativeFix is the fix of a Job's pod kept alive by its classic sidecar,
// as a command on what makes the pod: a CronJob's template (and the stuck
// run deleted), a Job of its own re-created (its template cannot be
// patched); else the hazard's own advice.
func (in *Input) jobNativeFix(advice string) string {
	p, o := in.Pod, in.Owner
	if p == nil || o == nil || o.Kind != "Job" && o.Kind != "CronJob" {
		return advice
	}
	job, isJob := strings.CutPrefix(templateOwner(p), "job/")
	if !isJob {
		return advice
	}
	yes := "true"
	native := map[string]*string{istio.AnnotationNativeSidecar: &yes}
	cron, ok := strings.CutPrefix(o.Controller, "CronJob/")
	if o.Kind == "CronJob" {
		cron, ok = o.Name, true // the Job's CronJob, read for its labels
	}
	if ok {
		return fmt.Sprintf(`kubectl patch cronjob %s -n %s --type=merge -p '{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{%q:"true"}}}}}}}'`, cron, p.Namespace, istio.AnnotationNativeSidecar) +
			"   # its next runs get a native sidecar, which the kubelet stops when the job is done\n" +
			"kubectl delete job " + job + " -n " + p.Namespace + "   # the run its classic sidecar keeps alive"
	}
	return injection.RecreateJob(job, p.Namespace, native, nil)
}

// jobNativeEdit is what to change, in a manifest not created yet (-f), for
// a run-once pod with a classic sidecar: the annotation where its kind
// keeps it.
func jobNativeEdit(p *corev1.Pod) string {
	where := "the pod's metadata.annotations"
	if p != nil {
		if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "Job" {
			where = "the Job's spec.template.metadata.annotations (a CronJob's spec.jobTemplate.spec.template.metadata.annotations)"
		}
	}
	return istio.AnnotationNativeSidecar + `: "true" in ` + where + " (istiod reads it from Istio 1.24; before, native sidecars are mesh-wide: ENABLE_NATIVE_SIDECARS=true)"
}
