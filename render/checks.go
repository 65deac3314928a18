package render

import (
	"fmt"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
)

// ChecksMarkdown is docs/checks.md: the catalogue, made from the registry.
func ChecksMarkdown() string {
	var b strings.Builder
	specs := diagnose.Checks()
	b.WriteString("# The checks of `kubectl mesh diagnose`\n\n")
	b.WriteString("<!-- Made from the registry (explain/diagnose) by `go test ./render -update-docs`; a test fails when it is stale. -->\n\n")
	fmt.Fprintf(&b, "%d checks, in causal order: injection (admission), init, start, capture, connections. ", len(specs))
	b.WriteString("A **static** check reads the pod's spec, statuses, events and API objects, and runs in every sweep (`-A`, `-n`, workloads). ")
	b.WriteString("A **live** check reads the pod's network namespace, and runs with `--rules` (`--connections` for flows); without them it is not checked, never passed. ")
	b.WriteString("`kubectl mesh diagnose --list-checks` prints this list; every finding in `-o json` carries its `code`.\n\n")
	b.WriteString("| Code | Stage | Kind | Status | istioctl | Title |\n|---|---|---|---|---|---|\n")
	for _, s := range specs {
		fmt.Fprintf(&b, "| [%s](#%s) | %s | %s | %s | %s | %s |\n", s.Code, strings.ToLower(s.Code), s.Stage, s.Kind, s.Status, Dash(strings.Join(s.Istioctl, ", ")), s.Title)
	}
	for _, s := range specs {
		fmt.Fprintf(&b, "\n## %s\n\n**%s** (%s, %s; reports %s", s.Code, s.Title, s.Stage, s.Kind, s.Status)
		if len(s.Istioctl) > 0 {
			fmt.Fprintf(&b, "; istioctl analyze %s", strings.Join(s.Istioctl, ", "))
		}
		b.WriteString(")\n\n")
		fmt.Fprintf(&b, "- **Means:** %s\n- **Detected by:** %s\n- **Fix:** %s\n", s.Means, s.Detects, s.Fixes)
		var reads []string
		for _, f := range s.Reads {
			reads = append(reads, f.Name+" ("+f.Permission+")")
		}
		fmt.Fprintf(&b, "- **Reads:** %s\n- **Known from:** %s\n- **Planted in the tests:** %s\n", strings.Join(reads, "; "), s.Source, s.Planted)
	}
	b.WriteString("\n## istioctl analyze messages that no check reports\n\n")
	b.WriteString("Every `istioctl analyze` message about a pod, its namespace, its Services' ports or the injection webhooks has a check above, or is here with the reason.\n\n")
	b.WriteString("| Code | Name | Why not a check |\n|---|---|---|\n")
	for _, m := range diagnose.IstioctlElsewhere {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", m.Code, m.Name, m.Why)
	}
	return b.String()
}
