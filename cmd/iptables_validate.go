package cmd

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"
)

// liveOnlyFlags are the flags of `iptables` that read (or create in) a
// live pod: with --from-file, they would be silently ignored.
var liveOnlyFlags = []string{"namespace", "container", "via", "interval", "timeout", "image", "force", "node-namespace", "dry-run", "connections"}

// flagChanged says whether the flag was given on the command line.
func (o *IptablesOptions) flagChanged(name string) bool {
	return o.changed != nil && o.changed(name)
}

// validateFlags checks every flag and argument on its own, before any
// request: the live path adds an ephemeral container or a node pod, so a
// usage error found after it would leave the pod changed for nothing.
func (o *IptablesOptions) validateFlags(fleet bool) error {
	extra := []string{outputRaw}
	if fleet {
		extra = nil
	}
	if err := validateOutput(o.Output, extra...); err != nil {
		return err
	}
	if err := validateDryRun(o.DryRun, o.Output); err != nil {
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
	case !fleet && (o.AllNamespaces || o.Selector != ""):
		which := "-A"
		if o.Selector != "" {
			which = "-l " + o.Selector
		}
		return usageErrorf("-A and -l select the pods of the fleet audit, its own command: kubectl mesh iptables audit %s (it creates one privileged pod per node; --dry-run prints them instead)", which)
	case o.Pod != "" && len(o.FromFiles) > 0:
		return usageErrorf("give either a POD or --from-file, not both")
	case len(o.FromFiles) > 2:
		return usageErrorf("--from-file takes at most two dumps (IPv4 and IPv6)")
	case o.Connections && o.Pod == "" && !fleet:
		return usageErrorf("--connections reads a live POD's connection-tracking table: give a POD")
	}
	if !fleet && o.Pod == "" && len(o.FromFiles) == 0 {
		if o.flagChanged("namespace") {
			ns := o.configFlags.Namespace
			if ns == nil {
				ns = new(string)
			}
			return usageErrorf("no POD given: -n only names the namespace of a POD (kubectl mesh iptables POD -n %[1]s).\nTo audit every pod of namespace %[1]s: kubectl mesh iptables audit -n %[1]s (it creates one privileged pod per node; --dry-run prints them instead)", *ns)
		}
		return usageErrorf("give a POD, or the rules to read with --from-file (iptables-save, iptables -S, iptables -L -v or nft list ruleset output of the pod's network namespace; - for standard input).\nTo audit every pod of a namespace: kubectl mesh iptables audit -n NS")
	}
	if !fleet && len(o.FromFiles) > 0 {
		var live []string
		for _, f := range liveOnlyFlags {
			if o.flagChanged(f) {
				live = append(live, "--"+f)
			}
		}
		if len(live) > 0 {
			return usageErrorf("%s read%s a live POD; --from-file reads a dump and takes none of them", strings.Join(live, ", "), map[bool]string{true: "", false: "s"}[len(live) > 1])
		}
	}
	if o.IstioVersion != "" {
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
	if o.fleet {
		return validateSelector(o.Selector)
	}
	if o.Pod != "" {
		return nil // a POD's own context is checked once it is read (Run)
	}
	// No POD and no dump, more than two dumps, --connections: refused by
	// validateFlags.
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
