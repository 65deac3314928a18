package capture

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// CaptureReport is everything the iptables command says about a pod's
// capture rules: the annotated dumps, the drift from the expected rules and
// the traces.
type CaptureReport struct {
	Dumps  []*Ruleset `json:"dumps"`
	Drift  *Drift     `json:"drift,omitempty"`
	Traces []*Trace   `json:"traces"`
	// Expected tells where the expected rules came from ("" when none were given).
	Expected string `json:"expected,omitempty"`
	// RuleModel is the Istio release whose istio-iptables the rules were
	// compared with, and where its version was read; nil when nothing was
	// compared. NoRuleModel says why the rules were not compared when the
	// release is outside the model or unknown.
	RuleModel   *RuleModelUse `json:"ruleModel,omitempty"`
	NoRuleModel string        `json:"noRuleModel,omitempty"`
	Notes       []string      `json:"notes,omitempty"`
	// Live says where a live pod's rules were read.
	Live *LiveSource `json:"live,omitempty"`
	// Connections are the pod's live flows, classified (--connections), and
	// their count per class.
	Connections        []Connection `json:"connections,omitempty"`
	ConnectionsSummary string       `json:"connectionsSummary,omitempty"`
	// Listeners are the pod's listening TCP sockets, when its socket tables
	// were read (nil when not).
	Listeners []Listener `json:"listeners,omitempty"`
	// Nameservers are the DNS servers of the pod's resolv.conf as read with
	// its rules.
	Nameservers []string `json:"nameservers,omitempty"`
}

// LiveSource is how the rules were read from a running pod.
type LiveSource struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Via       string `json:"via"`
	Container string `json:"container"`
	// Backend is the iptables backend that holds the rules.
	Backend  string `json:"backend"`
	Interval string `json:"interval,omitempty"`
}

// CaptureInput are the facts the report is built from.
type CaptureInput struct {
	Dumps      []*Ruleset
	Context    *PodContext
	PodIPs     []netip.Addr
	ExpectArgs []string // istio-iptables arguments, nil for no comparison
	ExpectEnv  map[string]string
	ExpectFrom string
	// IstioVersion is the Istio release whose istio-iptables wrote the
	// rules, and IstioVersionFrom where it was read: the rules are compared
	// with that release's model. "" with IstioVersionFrom "" (a dump given
	// as a file, no version given): the newest release's; "" with a
	// IstioVersionFrom: the version could not be read (it says why), so
	// nothing is compared.
	IstioVersion, IstioVersionFrom string
	// Ambient, for a pod in ambient mode (no sidecar), is what istio-cni
	// writes its in-pod rules from (AmbientConfigFor): the dumps are
	// compared with ExpectedAmbientRules. nil: no comparison.
	Ambient     *AmbientConfig
	Nameservers []string
	Traces      []string
	// Notes are said with the report (e.g. both backends hold rules).
	Notes []string
	// Conntrack and Sockets, when set, are the pod's connection-tracking
	// table and socket tables: its live flows are classified.
	Conntrack, Sockets string
	// Listening is the pod's socket tables as read with its rules (for its
	// listening sockets), "" when they were not read.
	Listening string
	// ConntrackRead says the table was read, though it may be empty (no
	// flows at all): the connections are then classified, none found.
	ConntrackRead bool
}

// ExplainCapture annotates the dumps, compares them with the rules the
// arguments call for, and traces each connection.
func ExplainCapture(in CaptureInput) (*CaptureReport, error) {
	rep := &CaptureReport{Dumps: in.Dumps, Traces: []*Trace{}, Notes: append([]string(nil), in.Notes...)}
	if in.Listening != "" {
		rep.Listeners = ParseListeners(in.Listening)
	}
	rep.Nameservers = in.Nameservers
	ambient := false
	for _, d := range in.Dumps {
		ambient = ambient || IsAmbientInPod(d)
	}
	ctx := in.Context
	if ambient {
		c := PodContext{Ambient: true}
		if ctx != nil {
			c.Ports, c.ProxyUID = ctx.Ports, ctx.ProxyUID
		}
		ctx = &c
		rep.Notes = append(rep.Notes, "ambient mode: these are istio-cni's in-pod rules; ztunnel, on the node, serves ports 15001, 15006, 15008 and 15053 inside the pod")
	}
	istio := false
	for _, d := range in.Dumps {
		d.Annotate(ctx)
		for _, t := range d.Tables {
			for _, c := range t.Chains {
				if strings.HasPrefix(c.Name, "ISTIO_") || strings.HasPrefix(c.Name, "PROXY_INIT_") {
					istio = true
				}
			}
		}
		if d.RuleCount() == 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("the %s dump holds no rules", d.Family))
		}
		for _, w := range d.Warnings {
			rep.Notes = append(rep.Notes, "iptables-save: "+w)
		}
	}
	if !istio {
		rep.Notes = append(rep.Notes, "no Istio (ISTIO_*) or Linkerd (PROXY_INIT_*) chains: this pod's traffic is not captured by a sidecar")
	}
	if in.Ambient != nil {
		if err := compareAmbient(rep, in); err != nil {
			return nil, err
		}
	}
	if in.ExpectArgs != nil && in.Ambient == nil {
		cfg, err := ParseCaptureArgs(in.ExpectArgs, in.ExpectEnv)
		if err != nil {
			return nil, err
		}
		cfg.PodAddrs = in.PodIPs
		use, why, err := ruleModelOf(in)
		switch {
		case err != nil:
			return nil, err
		case use == nil:
			// A release outside the model, or one that could not be read:
			// the rules are explained and traced, not compared.
			rep.NoRuleModel = why
			rep.Notes = append([]string{why}, rep.Notes...)
		default:
			cfg.Model, rep.RuleModel = use.RuleModel, use
			if err := compareArgs(rep, in, cfg); err != nil {
				return nil, err
			}
		}
	}
	for _, spec := range in.Traces {
		p, err := ParseTraceSpec(spec, in.PodIPs)
		if err != nil {
			return nil, err
		}
		var dump *Ruleset
		for _, d := range in.Dumps {
			if (d.Family == "ipv6") == p.Dst.Is6() {
				dump = d
			}
		}
		if dump == nil {
			return nil, fmt.Errorf("--trace %q: no %s dump to trace through (give it with another --from-file)", spec, map[bool]string{true: "IPv6", false: "IPv4"}[p.Dst.Is6()])
		}
		rep.Traces = append(rep.Traces, dump.Trace(p))
	}
	if in.Conntrack != "" || in.ConntrackRead {
		uid := 1337
		if in.Context != nil {
			if n, err := strconv.Atoi(in.Context.ProxyUID); err == nil {
				uid = n
			}
		}
		rep.Connections = ClassifyConnections(ParseConntrack(in.Conntrack), ParseSockets(in.Sockets), in.Dumps, in.PodIPs, uid)
		rep.ConnectionsSummary = ConnectionSummary(rep.Connections)
	}
	return rep, nil
}

// compareArgs fills the report's drift: the dumps against the rules cfg
// (istio-init's arguments, in its release's model) calls for.
func compareArgs(rep *CaptureReport, in CaptureInput, cfg *CaptureConfig) error {
	nativeDump := false
	for _, d := range in.Dumps {
		nativeDump = nativeDump || d.Backend == BackendNative
	}
	if cfg.NativeNftables || nativeDump {
		return compareNative(rep, in, cfg, nativeDump)
	}
	rep.Expected = in.ExpectFrom
	rep.Drift = &Drift{Missing: []string{}, Extra: []string{}}
	have := map[string]bool{}
	for _, d := range in.Dumps {
		have[d.Family] = true
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		if have[fam] {
			continue
		}
		if n := countRules(ExpectedRules(cfg, fam == "ipv6", in.Nameservers)); n > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("the arguments call for %d %s rules and no %s dump was given: %s is not compared (give its dump with a second --from-file; an empty file if it has none)", n, fam, fam, fam))
		}
	}
	for _, d := range in.Dumps {
		want := ExpectedRules(cfg, d.Family == "ipv6", in.Nameservers)
		dr, err := CompareRules(d, want)
		if err != nil {
			return err
		}
		rep.Drift.Missing = append(rep.Drift.Missing, dr.Missing...)
		rep.Drift.Extra = append(rep.Drift.Extra, dr.Extra...)
		rep.Drift.Reordered = append(rep.Drift.Reordered, dr.Reordered...)
	}
	return nil
}

// compareAmbient fills the report's drift for ambient mode's in-pod rules:
// each dump against what istio-cni writes in its backend (iptables, or
// native nftables).
func compareAmbient(rep *CaptureReport, in CaptureInput) error {
	if why := ambientUnmodelled(in.Ambient); why != "" {
		rep.NoRuleModel = why
		rep.Notes = append([]string{why}, rep.Notes...)
		return nil
	}
	rep.Expected = in.Ambient.Source
	rep.Drift = &Drift{Missing: []string{}, Extra: []string{}}
	nft4, nft6, err := ExpectedAmbientNftRules(in.Ambient)
	if err != nil {
		return err
	}
	native := false
	for _, d := range in.Dumps {
		var dr *Drift
		switch {
		case d.Backend == BackendNative:
			native = true
			want := nft4
			if d.Family == "ipv6" {
				want = nft6
			}
			dr = CompareNftRules(d, want)
		case d.RuleCount() == 0 && in.Ambient.NativeNftables:
			continue // the iptables view of a pod whose rules are in nftables
		default:
			if dr, err = CompareRules(d, ExpectedAmbientRules(in.Ambient, d.Family == "ipv6")); err != nil {
				return err
			}
		}
		rep.Drift.Missing = append(rep.Drift.Missing, dr.Missing...)
		rep.Drift.Extra = append(rep.Drift.Extra, dr.Extra...)
		rep.Drift.Reordered = append(rep.Drift.Reordered, dr.Reordered...)
	}
	if in.Ambient.NativeNftables && !native {
		rep.Notes = append(rep.Notes, "istio-cni's ConfigMap asks for native nftables (NATIVE_NFTABLES), but the pod's rules are iptables rules: the agent falls back to iptables where iptables artifacts already exist or nft lacks JSON support")
	}
	return nil
}

// compareNative fills the report's drift for Istio's native nftables mode:
// the listed inet tables against ExpectedNftRules, the iptables dumps against
// nothing (that mode writes none). nativeDump tells whether any inet
// istio-proxy-* table was read at all.
func compareNative(rep *CaptureReport, in CaptureInput, cfg *CaptureConfig, nativeDump bool) error {
	rep.Expected = in.ExpectFrom + " (Istio's native nftables mode)"
	want4, want6, err := ExpectedNftRules(cfg, in.Nameservers)
	var refusal *NftRefusal
	switch {
	case errors.As(err, &refusal):
		rep.Notes = append(rep.Notes, refusal.Error()+": no rules are expected to load, so no drift is computed")
		return nil
	case err != nil:
		return err
	}
	rep.Drift = &Drift{Missing: []string{}, Extra: []string{}}
	dumps := in.Dumps
	if !nativeDump {
		// Nothing was listed with nft: every rule of that mode is missing.
		dumps = append(append([]*Ruleset(nil), dumps...),
			&Ruleset{Family: "ipv4", Backend: BackendNative}, &Ruleset{Family: "ipv6", Backend: BackendNative})
		rep.Notes = append(rep.Notes, "the arguments ask for Istio's native nftables mode, and no inet istio-proxy-* table was read")
	}
	// One inet table serves both families: a rule missing from both views
	// is one missing rule.
	seen := map[string]bool{}
	addOnce := func(list *[]string, items []string) {
		for _, it := range items {
			if !seen[it] {
				seen[it] = true
				*list = append(*list, it)
			}
		}
	}
	for _, d := range dumps {
		want := map[string][]*Rule{} // iptables tables: none in this mode
		if d.Backend == BackendNative {
			want = want4
			if d.Family == "ipv6" {
				want = want6
			}
		}
		dr := CompareNftRules(d, want)
		addOnce(&rep.Drift.Missing, dr.Missing)
		addOnce(&rep.Drift.Extra, dr.Extra)
		addOnce(&rep.Drift.Reordered, dr.Reordered)
		addOnce(&rep.Drift.Extra, d.Foreign)
	}
	return nil
}

// RuleModelUse is the rule model a report compared with, and where the
// release's version was read.
type RuleModelUse struct {
	RuleModel
	// From says where the version was read ("--istio-version", "image tag
	// of istio-init", …), or that none was given and the newest was taken.
	From string `json:"from"`
}

// Phrase says, after what the rules were compared with, in which release
// and how it was known: " in Istio 1.24.6 (--istio-version)".
func (u *RuleModelUse) Phrase() string {
	return " in Istio " + u.Version() + " (" + u.From + ")"
}

// ruleModelOf picks the rule model for in's release: nil and the reason
// when the release is outside the model or could not be read; an error for
// a version string that is not a version.
func ruleModelOf(in CaptureInput) (*RuleModelUse, string, error) {
	switch {
	case in.IstioVersion == "" && in.IstioVersionFrom == "":
		return &RuleModelUse{RuleModel: NewestRuleModel(), From: "no version given: the newest modelled release; --istio-version for another"}, "", nil
	case in.IstioVersion == "":
		return nil, "the Istio release that wrote these rules is unknown (" + in.IstioVersionFrom + "): the rules are explained and traced, not compared", nil
	}
	m, err := RuleModelFor(in.IstioVersion)
	var none *NoModelError
	switch {
	case errors.As(err, &none):
		return nil, none.Error(), nil
	case err != nil:
		return nil, "", err
	}
	return &RuleModelUse{RuleModel: m, From: in.IstioVersionFrom}, "", nil
}

// ambientUnmodelled says why an ambient pod's in-pod rules are not
// compared: istio-cni's release is unknown, or not the one whose rule
// writer the model was checked against ("" when they are compared).
func ambientUnmodelled(a *AmbientConfig) string {
	switch {
	case a.Release == "" && a.ReleaseFrom == "":
		return ""
	case a.Release == "":
		return "istio-cni's release is unknown (" + a.ReleaseFrom + "): the in-pod rules are explained and traced, not compared"
	}
	major, minor, err := ParseIstioVersion(a.Release)
	if err == nil && major == 1 && minor == NewestModelled {
		return ""
	}
	return fmt.Sprintf("no in-pod rule model for istio-cni %s (%s): ambient mode's rules are modelled for Istio 1.%d, whose istio-cni writes them in the tests; they are explained and traced, not compared", a.Release, a.ReleaseFrom, NewestModelled)
}

func countRules(tables map[string][]string) int {
	n := 0
	for _, rules := range tables {
		n += len(rules)
	}
	return n
}
