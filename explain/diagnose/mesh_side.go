package diagnose

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// ProvedMeshSide says which change of the injection admission takes, as
// the dry runs proved it: the template changed so, sidecar and all, is
// admitted (proof that the change gets the pod in, not that it is what the
// policy looks at).
func ProvedMeshSide(ms *injection.MeshSide) string {
	return "it is admitted with a change of " + ms.What + ": the same template with " + setMeta(ms) + " is admitted with its sidecar (a dry-run create)"
}

// setMeta says a MeshSide's change: its annotations', then its labels'.
func setMeta(ms *injection.MeshSide) string {
	var parts []string
	if len(ms.Set) > 0 {
		parts = append(parts, setAnnotations(ms.Set))
	}
	keys := make([]string, 0, len(ms.Labels))
	for k := range ms.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if ms.Labels[k] == "" {
			parts = append(parts, "no label "+k)
		} else {
			parts = append(parts, fmt.Sprintf("the label %s=%q", k, ms.Labels[k]))
		}
	}
	return strings.Join(parts, " and ")
}

// MeshSideFix is the fix that keeps the policy and the mesh: the template's
// annotations changed as the dry run proved admitted; the exemption from
// the policy (exempt, its own fix) follows as a comment, the other way out.
func MeshSideFix(w *WorkloadState, ms *injection.MeshSide, exempt string) string {
	fix := templateMetaFix(w, ms.Set, ms.Labels, "keeps the policy: a dry-run create of the template so changed was admitted, sidecar and all")
	if w.Kind == "Pod" {
		fix = "in the pod's manifest, set " + setMeta(ms) + ", then create it again   # a dry-run create of it so changed was admitted, sidecar and all"
	}
	if exempt != "" {
		fix += "\n# or, keeping the template and exempting it from the policy instead: " + strings.ReplaceAll(exempt, "\n", "\n#   ")
	}
	return fix
}

// setAnnotations is `k=v, …` (k removed, for a value "") in key order.
func setAnnotations(set map[string]string) string {
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		if set[k] == "" {
			parts = append(parts, "no "+k)
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%q", k, set[k]))
	}
	return quoteList(parts)
}
