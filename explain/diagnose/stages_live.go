package diagnose

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// The capture and connections families: the live rules and flows, and
// ambient mode's capture.
const (
	CodeRulesDrift         = "KM-CAP-001"
	CodeAmbientNotCaptured = "KM-CAP-006"
	CodeBypassing          = "KM-CONN-001"
)

// captureAnswer is the capture stage: the live rules against what the
// pod's annotations call for, and ambient mode's capture.
func (in *Input) captureAnswer() *stageAnswer {
	if in.capture != nil {
		return in.capture
	}
	c := captureCheck(in.Facts, in.Target)
	in.capture = &stageAnswer{row: c}
	if c.Code != "" && c.Status != Pass && c.Status != NotChecked {
		in.capture.findings = []Finding{{Code: c.Code, Status: c.Status, Evidence: c.Evidence, Fix: c.Fix, Needs: c.Needs}}
	}
	return in.capture
}

// connectionsAnswer is the connections stage: the live flows, each
// through the proxy or not.
func (in *Input) connectionsAnswer() *stageAnswer {
	if in.conns != nil {
		return in.conns
	}
	c := connectionsCheck(in.Facts, in.Target)
	if c.Code == CodeBypassing && c.Status == Fail && in.Capture != nil {
		if fix := bypassFix(in.Pod, in.Capture.Connections); fix != "" {
			c.Fix = fix
		}
	}
	in.conns = &stageAnswer{row: c}
	if c.Code != "" && c.Status != Pass && c.Status != NotChecked {
		in.conns.findings = []Finding{{Code: c.Code, Status: c.Status, Evidence: c.Evidence, Fix: c.Fix, Needs: c.Needs}}
	}
	return in.conns
}

func captureCheck(f Facts, target string) Check {
	r, inj := f.Capture, f.Injection
	c := Check{Name: CheckCapture, Detail: "kubectl mesh iptables " + target}
	switch {
	case inj != nil && inj.Ambient && inj.AmbientCapture == injection.AmbientNotSetUp:
		// What istio-cni wrote on the pod says so, rules read or not: it has
		// not set the pod up. (Redirection "pending" means it has, and
		// ztunnel has not taken the pod: one finding, KM-START-013.)
		c.Status, c.Evidence, c.Fix, c.Code = Fail, inj.Verdict, inj.Fix, CodeAmbientNotCaptured
		c.Detail = "kubectl mesh why-injected " + target
	case f.CaptureUnknown != "":
		c.Status, c.Evidence, c.Needs, c.Code = Unknown, f.CaptureUnknown, f.CaptureNeeds, CodeRulesDrift
	case f.CaptureSkipped != "":
		c.Status, c.Evidence = NotChecked, "not checked: "+f.CaptureSkipped
	case r == nil:
		c.Status, c.Evidence = NotChecked, "not checked: the pod's rules were not read"
		c.Detail = "kubectl mesh diagnose " + target + " --rules"
	case r.Drift == nil && r.NoRuleModel != "":
		// A release outside the model (or unread): unknown, never drift.
		c.Status, c.Evidence, c.Code = Unknown, "the rules were read; "+r.NoRuleModel, CodeRulesDrift
	case r.Drift == nil:
		c.Status, c.Evidence, c.Code = Unknown, "the rules were read, but what they should be is not known: "+strings.Join(r.Notes, "; "), CodeRulesDrift
	case len(r.Drift.Missing)+len(r.Drift.Extra)+len(r.Drift.Reordered) > 0:
		c.Status, c.Code = Fail, CodeRulesDrift
		c.Evidence = fmt.Sprintf("%d rules missing, %d extra, %d chains reordered against %s%s", len(r.Drift.Missing), len(r.Drift.Extra), len(r.Drift.Reordered), r.Expected, releaseOf(r))
		c.Fix = "kubectl delete pod " + target + "   # re-created, the pod's rules are written again"
		if said, fix := ownerGroups(f.Pod); said != "" {
			c.Evidence += "; " + said
			c.Fix = fix
		}
	default:
		c.Status, c.Evidence = Pass, "the rules are exactly those "+r.Expected+" call for"+releaseOf(r)
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
		c.Status, c.Evidence, c.Needs, c.Code = Unknown, f.CaptureUnknown, f.CaptureNeeds, CodeBypassing
		return c
	case f.CaptureSkipped != "":
		c.Status, c.Evidence = NotChecked, "not checked: "+f.CaptureSkipped
		return c
	case !f.Connections || r == nil:
		c.Status, c.Evidence = NotChecked, "not checked: the pod's live connections were not read"
		c.Detail = "kubectl mesh diagnose " + target + " --connections"
		return c
	case r.ConnectionsSummary == "" && len(r.Connections) == 0:
		c.Status, c.Evidence, c.Code = Unknown, "the pod's connection tracking table could not be read: "+strings.Join(r.Notes, "; "), CodeBypassing
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
		c.Status, c.Code, c.Evidence = Fail, CodeBypassing, fmt.Sprintf("%d connections bypass the proxy: %s", len(bypass), strings.Join(bypass, ", "))
		if rule != "" {
			c.Evidence += " (let through by: " + rule + ")"
		}
		c.Fix = "if this traffic must go through the proxy (mTLS, policy, telemetry), take its port or address out of the pod's traffic.sidecar.istio.io/exclude* annotations and re-create the pod; the rules and each flow: " + c.Detail + " --via node (without --via node, an ephemeral container is added to the pod, which cannot be removed)"
		if said, fix := ownerGroups(f.Pod); said != "" && ownerMatch.MatchString(rule) {
			// A group istio-init's environment lets out.
			c.Evidence += "; " + said
			c.Fix = fix
		} else if m := ownerMatch.FindStringSubmatch(rule); m != nil && m[2] == istio.ProxyUID {
			// The rule that lets the proxy's own traffic out let this flow
			// out: its socket is the proxy's user's (or group's).
			who := "uid"
			if strings.Contains(m[1], "gid") {
				who = "gid"
			}
			c.Fix = "a choice, in the app: its connection's socket belongs to " + who + " " + m[2] + ", the proxy's own, which the capture rules let out untouched; no annotation changes that: run the app's process as another " + who +
				" (its image's USER, or the user its entrypoint switches to with su, gosu or setuid; not " + m[2] + "), then re-create the pod; which process: " + c.Detail + " --via node"
		}
		return c
	}
	c.Status, c.Evidence = Pass, r.ConnectionsSummary
	return c
}

// releaseOf names the Istio release whose rules a report was compared with.
func releaseOf(r *capture.CaptureReport) string {
	if r.RuleModel == nil {
		return ""
	}
	return r.RuleModel.Phrase()
}

// ownerMatch is a capture rule that lets a socket's owner out (the
// proxy's uid or gid), iptables' or nftables' words.
var ownerMatch = regexp.MustCompile(`(--uid-owner|--gid-owner|skuid|skgid) (\d+)`)
