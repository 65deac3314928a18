package diagnose

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// fileRelabel is a manifest's fix when its first line relabels the
// namespace (kubectl label namespace NS KEY=VALUE --overwrite) and the
// manifest itself declares that namespace with another value of KEY:
// applying the file as it is would put the old value back. The namespace
// is applied from the file with the new value, then the rest of the file
// without it (a selector that leaves it out). nil when it does not apply.
func fileRelabel(first string, r *injection.InjectionReport, files []string) []string {
	if r.FileNamespaceLabels == nil {
		return nil
	}
	rest, ok := strings.CutPrefix(first, "kubectl label namespace "+r.Namespace+" ")
	if !ok {
		return nil
	}
	kv, _, _ := strings.Cut(rest, " ")
	key, value, ok := strings.Cut(kv, "=")
	old, declared := r.FileNamespaceLabels[key]
	if !ok || !declared || old == value || strings.ContainsAny(key+value+old, "'\" ") {
		return nil
	}
	why := ""
	if _, c, ok := strings.Cut(first, "   # "); ok {
		why = "; " + c
	}
	fs := "-f " + strings.Join(files, " -f ")
	return []string{
		fmt.Sprintf("kubectl apply %s -l '%s=%s' --dry-run=client -o yaml | kubectl label --local -f - %s=%s --overwrite -o yaml | kubectl apply -f -   # namespace %s as the file declares it, with %s=%s (the file says %s: change it there too)%s",
			fs, key, old, key, value, r.Namespace, key, value, old, why),
		fmt.Sprintf("sleep 3; kubectl apply %s -n %s -l '%s!=%s'   # then the rest of the file, its namespace left out (as the file has it, it would undo the line above)", fs, r.Namespace, key, old),
	}
}

// fileMeshSideFix is, for a pod of a manifest that admission refuses and
// admits with its annotations changed (the dry runs' proof), the file
// applied with that change: kubectl annotate --local over the file (every
// object of it gets the change, harmless on any but the pod), then apply.
// "" when no change was proved.
func fileMeshSideFix(files []string, r *injection.InjectionReport) string {
	var ms *injection.MeshSide
	switch {
	case r.Verified != nil && r.Verified.MeshSide != nil:
		ms = r.Verified.MeshSide
	case r.RefusedBy != nil && r.RefusedBy.MeshSide != nil:
		ms = r.RefusedBy.MeshSide
	default:
		return ""
	}
	if len(ms.Labels) > 0 {
		return "" // kubectl label --local would label the file's objects, not their pod templates
	}
	keys := make([]string, 0, len(ms.Set))
	for k := range ms.Set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var args []string
	for _, k := range keys {
		v := ms.Set[k]
		if strings.Contains(v, "'") {
			return ""
		}
		if v == "" {
			args = append(args, k+"-")
			continue
		}
		args = append(args, "'"+k+"="+v+"'")
	}
	return fmt.Sprintf("kubectl annotate --local -f %s %s --overwrite -o json | kubectl apply -n %s -f -   # the file applied with the pod's annotations so changed (a dry-run create of it so changed was admitted, sidecar and all; the file's other objects get them too, to no effect): change the file the same way",
		strings.Join(files, " -f "), strings.Join(args, " "), r.Namespace)
}
