package startup

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// validationNoRedirect is istio-validation's known failure (also its exit 126).
const validationNoRedirect = "istio-validation found no redirection: the Istio CNI plugin did not set up this pod's rules (it is not installed in the node's CNI chain, or the pod was scheduled before istio-cni-node was ready on the node)"

// Causes of istio-init's failures that a fix can name.
const (
	CauseNoNetAdmin = "no-net-admin"
	CauseBadPorts   = "bad-ports"
	CauseOOM        = "oom"
	CauseLogLevel   = "log-level"
	CauseOwner      = "owner"
)

// badOwner is iptables' refusal of an owner it cannot resolve: the option
// and the value.
var badOwner = regexp.MustCompile(`Bad value for "(--[gu]id-owner)" option: "([^"]*)"`)

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
		"istio-init lacks the NET_ADMIN/NET_RAW capabilities it needs (its iptables calls are denied)", CauseNoNetAdmin},
	{[]string{"can't initialize iptables table", "table does not exist", "could not fetch rule set generation id"}, "",
		"iptables cannot use the nat table here: the node's kernel lacks the module for this backend, or the legacy/nft backends are mixed (iptables-legacy vs iptables-nft)", ""},
	{[]string{"iptables validation failed", "workload is not ready for istio"}, "",
		validationNoRedirect, ""},
	{[]string{"failed parsing cidr", "invalid cidr", "invalid cidr address"}, "",
		"an invalid CIDR reached istio-iptables (istiod refuses invalid CIDR annotations at admission, so it came from the mesh-wide values global.proxy.includeIPRanges / excludeIPRanges)", ""},
	{[]string{"invalid port/service"}, "",
		"iptables-restore refused a port istio-iptables was given: a " + istio.AnnotationIncludeOutboundPorts + " value that is not a port number (istiod does not check that annotation at admission), or a mesh-wide port list in the values", CauseBadPorts},
	{[]string{"invalid output level", "invalid log level", "unrecognized level"}, "",
		"istio-init refused the log level it was given: the pod's sidecar.istio.io/agentLogLevel (or logLevel) annotation, which the injector passes to istio-init and the proxy's agent, names a level they do not know (debug, info, warn, error, none; or scope:level)", CauseLogLevel},
	{[]string{`bad value for "--gid-owner"`, `bad value for "--uid-owner"`}, "",
		"iptables cannot resolve an owner istio-iptables was given: a group in istio-init's environment ISTIO_OUTBOUND_OWNER_GROUPS or ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE (the injector copies them from proxyMetadata: the pod's proxy.istio.io/config, a ProxyConfig, the mesh's) named by a name istio-init's image does not have: give groups by number", CauseOwner},
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
			if m := badOwner.FindStringSubmatch(strings.Join(text, "\n")); m != nil && f.cause == CauseOwner {
				cs.Failure += fmt.Sprintf(" (its log: %s %q)", m[1], m[2])
			}
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

// SettleRun is the least a restarted container must have run, ready, to
// have got past its failures: a crash loop's container can be ready
// between two crashes (one the kubelet kills for a liveness probe on the
// wrong port is ready for seconds each run, from its first restart).
const SettleRun = time.Minute

// classify reads a container's crash loop by what it means, not by the
// phase it is in this second: a container that failed is failing whether
// it is waiting in back-off, just terminated, or running its next attempt
// (an init container until it completes, any other until it has run for
// BackOffReset).
//
// A container that keeps running (the app, the proxy, a native sidecar),
// restarted and runs ready now, in a pod that is Running and Ready
// (podReady), has got past its failures once its run has outlived both
// SettleRun and its last run (BackOffReset at most), within BackOffReset
// too: it is Recovered, its restarts are evidence, not a failure. Until
// then it may be between two crashes of its loop, whatever its restart
// count: it is read as it was before it got ready (failing, after a failed
// run). A container that restarted and completed, in a pod that
// Succeeded (a Job's retried container), is Recovered too.
func classify(cs *ContainerStartup, p *corev1.Pod, now time.Time) {
	kubeletFailing(cs, p, now)
	restarted := cs.Restarts > 0 || cs.LastTermination != nil
	if !restarted || cs.runsToCompletion() || cs.Failing && cs.State != "running" {
		return
	}
	if cs.State == "terminated" && cs.ExitCode != nil && *cs.ExitCode == 0 && (p.Status.Phase == corev1.PodSucceeded || restartsOnFailureOnly(p)) {
		// It completed after all, and so did its pod (or will, once the
		// kubelet has stopped its native sidecars): a run-once pod's
		// container that exited 0 is done for good.
		cs.Recovered = true
		return
	}
	if cs.State != "running" || !cs.Ready || !podReady(p) {
		return
	}
	if betweenCrashes(*cs, now) {
		return
	}
	cs.Failing, cs.Recovered = false, true
}

// restartsOnFailureOnly says a pod's containers are not restarted once they exit 0
// (restartPolicy Never or OnFailure: a Job's pods).
func restartsOnFailureOnly(p *corev1.Pod) bool {
	return p.Spec.RestartPolicy == corev1.RestartPolicyNever || p.Spec.RestartPolicy == corev1.RestartPolicyOnFailure
}

// betweenCrashes: a ready container that may only be between two crashes
// of its loop (classify).
func betweenCrashes(cs ContainerStartup, now time.Time) bool {
	if cs.StartedAt == nil {
		return true
	}
	settle := SettleRun
	if lt := cs.LastTermination; lt != nil && lt.StartedAt != nil && lt.FinishedAt != nil {
		settle = max(settle, lt.FinishedAt.Sub(*lt.StartedAt))
	}
	return now.Sub(*cs.StartedAt) < min(settle, BackOffReset)
}

// podReady: the pod is Running and its Ready condition is true; with no
// Ready condition reported, every container has a status and is ready.
func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	if len(p.Status.ContainerStatuses) < len(p.Spec.Containers) {
		return false
	}
	for _, st := range p.Status.ContainerStatuses {
		if !st.Ready {
			return false
		}
	}
	return true
}

// appsDone says a run-once pod's containers have all ended, whatever
// their exit codes: the kubelet then stops its native sidecars, and the pod
// is about to end too.
func appsDone(p *corev1.Pod) bool {
	if !restartsOnFailureOnly(p) || len(p.Status.ContainerStatuses) == 0 {
		return false
	}
	for _, st := range p.Status.ContainerStatuses {
		if st.State.Terminated == nil {
			return false
		}
	}
	return true
}

// kubeletFailing is classify's reading of the kubelet's states alone.
func kubeletFailing(cs *ContainerStartup, p *corev1.Pod, now time.Time) {
	lt := cs.LastTermination
	stopped := p.DeletionTimestamp != nil ||
		(p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || appsDone(p)) && (cs.Role == RoleProxyNative || cs.Role == RoleNativeSidecar)
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
	if l := lastLine(lines); l != "" {
		return "its log ends: " + l
	}
	return "its log is empty"
}

// lastLine is the last line of a log that is not blank, cut short, past a
// program's closing pointer to its help (iptables-restore's "Try
// `iptables-restore -h' for more information.": the line before says what
// was wrong); "" for none.
func lastLine(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !(usageHint.MatchString(l) && i > 0) {
			if r := []rune(l); len(r) > 200 {
				l = string(r[:199]) + "…"
			}
			return l
		}
	}
	return ""
}

// RecoverySummary is a Recovered container's account: how often it
// restarted, how its last run ended, what its log said last then (the
// kubelet's termination message, else the previous run's log read, else
// the command that shows it), and since when it runs ready.
func (cs ContainerStartup) RecoverySummary(pod, ns string) string {
	s := cs.Name + " restarted " + Plural(cs.Restarts, "time")
	lt := cs.LastTermination
	if lt != nil {
		s += ", last " + termination(lt.ExitCode, lt.Reason, lt.Message)
	}
	if lt == nil || strings.TrimSpace(lt.Message) == "" {
		line := ""
		if cs.Log != nil {
			line = lastLine(cs.Log.Previous)
		}
		if line != "" {
			s += "; its log then ended: " + line
		} else {
			s += fmt.Sprintf("; its last run's log: kubectl logs %s -n %s -c %s --previous", pod, ns, cs.Name)
		}
	}
	switch {
	case cs.State == "terminated" && cs.FinishedAt != nil:
		s += "; completed at " + cs.FinishedAt.UTC().Format(time.RFC3339)
	case cs.State == "terminated":
		s += "; completed"
	case cs.StartedAt != nil:
		s += "; running and ready since " + cs.StartedAt.UTC().Format(time.RFC3339)
	default:
		s += "; running and ready"
	}
	return s
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

// usageHint is a program's last word after a usage error: where its help is.
var usageHint = regexp.MustCompile("(?i)^try [`'\"]?\\S+ (-h|--help)|for more information\\.?$")
