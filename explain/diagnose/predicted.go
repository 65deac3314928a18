package diagnose

import (
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// predicted are the catalogue's static findings on the pod admission made
// of a manifest not created yet (-f --verify's dry run): what the pod will
// meet once the manifest is applied. The fix is an edit of the manifest
// (there is nothing in the cluster to patch yet), so it names the file and
// what to change, then the apply.
func predicted(f Facts) []Finding {
	r := f.Injection
	if f.NoPod == "" || len(f.Files) == 0 || r == nil || r.Verified == nil || r.Verified.Pod == nil {
		return nil
	}
	var out []Finding
	for _, fd := range Hazards(r.Verified.Pod, r.Kind) {
		fd.predicted = true
		fd.Evidence = "predicted on the pod --verify's dry run admitted for " + strings.ToLower(r.Kind) + "/" + r.Name + " as the manifest gives it: " + fd.Evidence
		change := ""
		if s, ok := Lookup(fd.Code); ok {
			change = s.Fixes
		}
		if fd.edit != "" {
			change = fd.edit
		}
		fd.Fix = manifestEditFix(f.Files, change, r)
		out = append(out, fd)
	}
	return out
}

// manifestEditFix is the fix of a manifest not created yet (-f): what to
// change in its files, then their apply. A pod or a Job the manifest makes
// (r) cannot take the change in place once it exists: it is deleted first,
// if it does (the other objects of the files are applied as they are).
func manifestEditFix(files []string, change string, r *injection.InjectionReport) string {
	list := strings.Join(files, " -f ")
	fix := "# edit " + list + " first: " + change
	if r != nil && (r.Kind == "Pod" || r.Kind == "Job") {
		fix += "\nkubectl delete " + strings.ToLower(r.Kind) + " " + r.Name + " -n " + r.Namespace + " --ignore-not-found   # if it exists: a " + strings.ToLower(r.Kind) + " cannot take the change in place"
	}
	return fix + "\nkubectl apply -f " + list
}
