package diagnose

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// annotationsLimit is the apiserver's limit on a pod's annotations, keys
// and values together (256 KiB).
const annotationsLimit = 256 * 1024

// annotationBudget: the apiserver refuses the pods for annotations over
// its limit, while the template without the sidecar is admitted: what the
// injector adds (its status annotation, its own) tips a template near the
// limit over it. The fix is a choice: the template's largest annotation of
// its own removed (its content kept elsewhere, a ConfigMap).
func annotationBudget(w *WorkloadState, text string) (ev, mesh, fix string, ok bool) {
	t := w.Template
	if t == nil || !strings.Contains(text, "metadata.annotations: Too long") {
		return "", "", "", false
	}
	total := 0
	type sized struct {
		key  string
		size int
	}
	var own []sized
	for k, v := range t.Annotations {
		total += len(k) + len(v)
		if !strings.Contains(k, "istio.io/") {
			own = append(own, sized{k, len(k) + len(v)})
		}
	}
	if len(own) == 0 {
		return "", "", "", false
	}
	sort.Slice(own, func(i, j int) bool {
		return own[i].size > own[j].size || own[i].size == own[j].size && own[i].key < own[j].key
	})
	big := own[0]
	mesh = "the annotations Istio's injector adds (" + istio.AnnotationStatus + " and its own)"
	ev = fmt.Sprintf("the template's annotations are %d bytes of the apiserver's %d-byte limit on a pod's annotations, and %s take the pod over it; the largest of the template's own is %s (%d bytes)",
		total, annotationsLimit, mesh, big.key, big.size)
	fix = templateAnnotationsFix(w, map[string]string{big.key: ""},
		fmt.Sprintf("a choice: %s (%d bytes) out of the pod's annotations, its content kept elsewhere (a ConfigMap the app mounts); or any other annotations as large", big.key, big.size))
	return ev, mesh, fix, true
}
