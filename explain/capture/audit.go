package capture

import (
	"strconv"
	"strings"
)

// AuditSummary is one pod's line in a fleet audit: what its capture rules
// are and do, from its CaptureReport (explained with the three audit traces:
// an inbound connection to an app port, an outbound one to an outside
// address, and a DNS query to its first nameserver).
type AuditSummary struct {
	Backend string `json:"backend"`
	Rules   int    `json:"rules"`
	// Drift is null when nothing said what the rules should be.
	Drift   *bool `json:"drift"`
	Missing int   `json:"missing"`
	Extra   int   `json:"extra"`
	// Release is the Istio release whose rules the pod's were compared
	// with; NoRuleModel why they were not (a release outside the model, or
	// one that could not be read): the drift is then unknown.
	Release     string `json:"release,omitempty"`
	NoRuleModel string `json:"noRuleModel,omitempty"`
	// Inbound, Outbound and DNS say where the audit traces go: "captured
	// (15006)", "not captured", or "-" when not traced.
	Inbound  string   `json:"inbound"`
	Outbound string   `json:"outbound"`
	DNS      string   `json:"dns"`
	Hazards  []string `json:"hazards"`
}

// AuditTraces are the traces an audit runs: specs for inbound, outbound and
// DNS ("" leaves one out).
type AuditTraces struct{ In, Out, DNS string }

// Summarize reads rep (explained with traces) into an audit line.
func Summarize(rep *CaptureReport, traces AuditTraces, backend string) AuditSummary {
	s := AuditSummary{Backend: shortBackend(backend), Inbound: "-", Outbound: "-", DNS: "-", Hazards: []string{}}
	for _, d := range rep.Dumps {
		s.Rules += d.RuleCount()
	}
	if rep.Drift != nil {
		s.Missing, s.Extra = len(rep.Drift.Missing), len(rep.Drift.Extra)
		drift := s.Missing+s.Extra+len(rep.Drift.Reordered) > 0
		s.Drift = &drift // the drift column says it; not a hazard line too
	}
	if rep.RuleModel != nil {
		s.Release = rep.RuleModel.Version()
	}
	s.NoRuleModel = rep.NoRuleModel
	where := func(tr *Trace) string {
		if tr.Verdict == "redirect" || tr.Verdict == "tproxy" {
			return "captured (" + itoa(tr.Port) + ")"
		}
		return "not captured"
	}
	for _, tr := range rep.Traces {
		switch tr.Spec {
		case traces.In:
			s.Inbound = where(tr)
		case traces.Out:
			s.Outbound = where(tr)
		case traces.DNS:
			s.DNS = where(tr)
		}
	}
	s.Hazards = append(s.Hazards, rep.Notes...)
	if s.Rules == 0 {
		s.Hazards = append(s.Hazards, "no capture rules")
	}
	return s
}

func itoa(n int) string { return strconv.Itoa(n) }

// Worst ranks audit lines, worst first: 0 drift or no rules, 1 other hazards, 2 fine.
func (s AuditSummary) Worst() int {
	switch {
	case s.Drift != nil && *s.Drift, s.Rules == 0:
		return 0
	case len(s.Hazards) > 0:
		return 1
	}
	return 2
}

// HazardText joins the hazards for one table cell.
func (s AuditSummary) HazardText() string { return strings.Join(s.Hazards, "; ") }

// shortBackend says "iptables: nft, ip6tables: nft" as "nft", and keeps
// anything less uniform as it is.
func shortBackend(b string) string {
	parts := strings.Split(b, ", ")
	first := ""
	for _, p := range parts {
		_, be, ok := strings.Cut(p, ": ")
		if !ok || first != "" && be != first || strings.Contains(be, " ") {
			return b
		}
		first = be
	}
	return first
}
