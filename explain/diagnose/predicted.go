package diagnose

import "strings"

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
		fd.Evidence = "predicted on the pod --verify's dry run admitted (" + strings.ToLower(r.Kind) + "/" + r.Name + " is not created yet): " + fd.Evidence
		change := ""
		if s, ok := Lookup(fd.Code); ok {
			change = s.Fixes
		}
		fd.Fix = manifestEditFix(f.Files, change)
		out = append(out, fd)
	}
	return out
}

// manifestEditFix is the fix of a manifest not created yet (-f): what to
// change in its files, then their apply.
func manifestEditFix(files []string, change string) string {
	list := strings.Join(files, " -f ")
	return "# edit " + list + " first: " + change + "\nkubectl apply -f " + list
}
