package cmd

import (
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"
)

// touch is what one way of running a command does to a cluster.
type touch struct {
	invocations []string
	changes     string
	rbac        string
}

// touches are the commands and flags, by what they do to the cluster; the
// permissions come from the checks the code makes before it acts, the
// reads from the facts the checks read. README's "What it touches" is
// rendered from them (TestReadmeWhatItTouches).
func touches() []touch {
	nodePod := "creates one pod on the POD's node, privileged (hostPID, hostNetwork) and tolerating every taint, in `--node-namespace` (default `default`); deleted when the read ends, on error and on Ctrl-C"
	return []touch{
		{[]string{"why-injected", "startup", "diagnose", "iptables --from-file", "version", "completion"},
			"nothing: reads only", reads()},
		{[]string{"why-injected --verify", "diagnose --verify", "why-injected, diagnose: a workload a platform policy refuses"},
			"server-side dry-run creates (`dryRun=All`), one per pod template (without --verify: one per refused template, labelled `sidecar.istio.io/inject=false`, to tell a refusal of what the injector adds from one of the pod's own): the admission chain runs, nothing is stored",
			"reads, and " + nsexec.Describe([]authorizationv1.ResourceAttributes{inspect.DryRunPermission("NS")}) + " in the template's namespace (without it, nothing is said)"},
		{[]string{"upgrade-plan"},
			"posts each template's pod to the target revision's injector (its webhook's url, or its Service through the apiserver's service proxy), then a server-side dry-run create of what it returns: nothing is stored",
			"reads, and " + nsexec.Describe([]authorizationv1.ResourceAttributes{inspect.DryRunPermission("NS")}) + " in the template's namespace; create services/proxy on the injector's Service when its webhook names one"},
		{[]string{"iptables POD", "iptables POD --interval D", "diagnose POD --rules", "diagnose POD --connections"},
			"adds an **ephemeral container** to POD (the pod's proxy image, root, NET_ADMIN and NET_RAW, not privileged). **It can never be removed**: it stays in the pod's spec, terminated, until the pod is deleted",
			nsexec.Describe(nsexec.EphemeralPermissions("NS")) + " in the pod's namespace"},
		{[]string{"iptables POD --via node", "diagnose POD --rules --via node"},
			nodePod, nsexec.Describe(nsexec.NodePodPermissions("NS")) + " in `--node-namespace`"},
		{[]string{"iptables audit -n NS / -l SEL / -A", "diagnose -n / -l / -A / a workload, with --rules or --connections"},
			"creates such a pod on every node that runs a selected pod, never an ephemeral container; `-n` is the scope of the pods read, not where the node pods go",
			nsexec.Describe(nsexec.NodePodPermissions("NS")) + " in `--node-namespace`"},
	}
}

// reads lists what the read-only commands read, from the facts diagnose's
// checks read (the live ones aside).
func reads() string {
	seen := map[string]bool{}
	var out []string
	for _, f := range []diagnose.Fact{diagnose.FactPod, diagnose.FactMesh, diagnose.FactBackends, diagnose.FactOwner,
		diagnose.FactEvents, diagnose.FactLogs, diagnose.FactServices, diagnose.FactPolicies} {
		for _, p := range strings.Split(f.Permission, ", ") {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return strings.Join(out, ", ") + "; a sweep also lists nodes and the workloads (deployments, statefulsets, daemonsets, jobs). Anything refused is unknown, with the permission named"
}

// WhatItTouchesMarkdown is README's "What it touches" table.
func WhatItTouchesMarkdown() string {
	var b strings.Builder
	b.WriteString("| command | what it changes in the cluster | RBAC it needs |\n|---|---|---|\n")
	for _, t := range touches() {
		var inv []string
		for _, i := range t.invocations {
			inv = append(inv, "`"+i+"`")
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", strings.Join(inv, "<br>"), t.changes, t.rbac)
	}
	return b.String()
}
