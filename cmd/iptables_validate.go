package cmd

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"
)

// validateFlags checks every flag and argument on its own, before any
// request: the live path adds an ephemeral container or a node pod, so a
// usage error found after it would leave the pod changed for nothing.
func (o *IptablesOptions) validateFlags(fleet bool) error {
	if err := validateOutput(o.Output, outputRaw); err != nil {
		return err
	}
	switch {
	case o.Via != nsexec.ViaEphemeral && o.Via != nsexec.ViaNode:
		return usageErrorf("--via %q: ephemeral or node", o.Via)
	case o.Interval < 0:
		return usageErrorf("--interval must be positive")
	case o.Timeout <= 0:
		return usageErrorf("--timeout must be positive")
	case o.Parallel < 0 || o.Parallel > 64:
		return usageErrorf("--parallel must be between 0 (the node's CPUs) and 64")
	case o.Parallel != 0 && !fleet:
		return usageErrorf("--parallel is for the fleet audit (-n, -l, -A without a POD)")
	case o.Pod != "" && len(o.FromFiles) > 0:
		return usageErrorf("give either a POD or --from-file, not both")
	case o.Pod != "" && (o.AllNamespaces || o.Selector != ""):
		return usageErrorf("-A and -l select the pods of a fleet audit; they take no POD")
	case len(o.FromFiles) > 2:
		return usageErrorf("--from-file takes at most two dumps (IPv4 and IPv6)")
	case o.Connections && o.Pod == "" && !fleet:
		return usageErrorf("--connections reads a live POD's connection-tracking table: give a POD")
	}
	if fleet {
		switch {
		case o.Via == nsexec.ViaEphemeral && o.viaSet:
			return usageErrorf("the fleet audit reads every pod of a node with one node pod; --via ephemeral is for one POD")
		case o.Interval > 0 || o.expectSet || len(o.Traces) > 0 || len(o.PodIPs) > 0 || len(o.Nameservers) > 0:
			return usageErrorf("--interval, --expect-args, --trace, --pod-ip and --nameserver are for one POD; the audit compares each pod with its own arguments")
		case o.Output == outputRaw || o.Connections:
			return usageErrorf("-o raw and --connections are for one POD")
		}
	}
	if o.IstioVersion != "" {
		if fleet {
			return usageErrorf("--istio-version is for one POD or --from-file; the audit reads each pod's release from its images")
		}
		if _, _, err := capture.ParseIstioVersion(o.IstioVersion); err != nil {
			return usageErrorf("--istio-version: %v", err)
		}
	}
	var ips []netip.Addr
	for _, s := range o.PodIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return usageErrorf("--pod-ip %q: %v", s, err)
		}
		ips = append(ips, a)
	}
	for _, s := range o.Nameservers {
		if _, err := netip.ParseAddr(s); err != nil {
			return usageErrorf("--nameserver %q: %v", s, err)
		}
	}
	if o.expectSet {
		if _, _, err := o.expectArgs(); err != nil {
			return err
		}
	}
	if len(ips) == 0 && o.Pod != "" {
		// A live pod's own addresses are read later: stand-ins of both
		// families check the specs' syntax meanwhile.
		ips = []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}
	}
	for _, t := range o.Traces {
		if _, err := capture.ParseTraceSpec(t, ips); err != nil {
			return &UsageError{Err: err}
		}
	}
	return nil
}

// Validate checks every flag (validateFlags) and, for --from-file, parses
// the dumps, addresses and arguments; a POD's are checked once it is read.
func (o *IptablesOptions) Validate() error {
	if err := o.validateFlags(o.fleet); err != nil {
		return err
	}
	if o.Pod != "" || o.fleet {
		return nil // a POD's own context is checked once it is read (Run)
	}
	// --connections and more than two dumps were refused by validateFlags.
	if len(o.FromFiles) == 0 {
		return usageErrorf("give a POD, the rules to read with --from-file (iptables-save, iptables -S, iptables -L -v or nft list ruleset output of the pod's network namespace; - for standard input), or -n/-l/-A to audit every pod they select")
	}
	if err := o.readFiles(); err != nil {
		return err
	}
	var empty []*capture.Ruleset
	for i, b := range o.raw {
		if len(strings.TrimSpace(string(b))) == 0 {
			// iptables-save prints nothing for a network namespace with no
			// table at all (ip6tables-save of a pod without IPv6 rules, a
			// pod the CNI plugin skipped): no rules, compared as such.
			rs := &capture.Ruleset{Family: "ipv4", Form: "empty"}
			empty = append(empty, rs)
			o.input.Dumps = append(o.input.Dumps, rs)
			o.input.Notes = append(o.input.Notes, o.FromFiles[i]+": empty: no table at all, as iptables-save prints it for a network namespace without rules")
			continue
		}
		d, err := capture.ParseDump(b)
		if err != nil {
			return &UsageError{Err: fmt.Errorf("%s: %w", o.FromFiles[i], err)}
		}
		if len(o.FromFiles) > 1 && len(d.Rulesets) > 1 {
			return usageErrorf("%s holds both families' rules (%s): give it alone", o.FromFiles[i], d.Form)
		}
		o.input.Dumps = append(o.input.Dumps, d.Rulesets...)
		if note := d.Note(); note != "" {
			o.input.Notes = append(o.input.Notes, o.FromFiles[i]+": "+note)
		}
	}
	// An empty dump beside another is the other family's (the second, when
	// both are empty).
	if len(o.input.Dumps) == 2 && len(empty) > 0 && o.input.Dumps[0].Family == o.input.Dumps[1].Family {
		e := empty[len(empty)-1]
		if other := o.input.Dumps[0]; other != e && other.Family == "ipv6" {
			e.Family = "ipv4"
		} else {
			e.Family = "ipv6"
		}
	}
	if len(o.input.Dumps) == 2 && o.input.Dumps[0].Family == o.input.Dumps[1].Family {
		return usageErrorf("the two dumps are both %s; give one IPv4 and one IPv6 dump", o.input.Dumps[0].Family)
	}
	return o.validateCommon()
}

// validateCommon checks the flags both sources share.
func (o *IptablesOptions) validateCommon() error {
	if len(o.PodIPs) > 0 {
		o.input.PodIPs = nil
	}
	for _, s := range o.PodIPs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return usageErrorf("--pod-ip %q: %v", s, err)
		}
		o.input.PodIPs = append(o.input.PodIPs, a)
	}
	for _, s := range o.Nameservers {
		if _, err := netip.ParseAddr(s); err != nil {
			return usageErrorf("--nameserver %q: %v", s, err)
		}
	}
	if len(o.Nameservers) > 0 || o.live == nil {
		o.input.Nameservers = o.Nameservers
	}
	if o.IstioVersion != "" {
		o.input.IstioVersion, o.input.IstioVersionFrom = o.IstioVersion, "--istio-version"
	}
	if o.expectSet {
		args, env, err := o.expectArgs()
		if err != nil {
			return err
		}
		o.input.ExpectArgs, o.input.ExpectEnv, o.input.ExpectFrom = args, env, "--expect-args"
	}
	for _, t := range o.Traces {
		if _, err := capture.ParseTraceSpec(t, o.input.PodIPs); err != nil {
			return &UsageError{Err: err}
		}
	}
	o.input.Traces = o.Traces
	if o.input.Context == nil {
		o.input.Context = &capture.PodContext{ProxyUID: istio.ProxyUID}
	}
	return nil
}

// expectArgs reads --expect-args: shell words, istio-init's environment
// first (NAME=VALUE), then istio-iptables arguments, checked.
func (o *IptablesOptions) expectArgs() (args []string, env map[string]string, err error) {
	words, err := capture.SplitShell(o.ExpectArgs)
	if err != nil {
		return nil, nil, usageErrorf("--expect-args: %v", err)
	}
	env, args = capture.SplitEnv(words)
	if args == nil {
		args = []string{}
	}
	if _, err := capture.ParseCaptureArgs(append([]string{}, args...), env); err != nil {
		return nil, nil, usageErrorf("--expect-args: %v", err)
	}
	return args, env, nil
}
