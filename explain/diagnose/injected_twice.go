package diagnose

import (
	"regexp"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

// duplicateIstio is the apiserver's refusal of a pod that has a container
// or volume of Istio's twice (`Duplicate value: "istio-proxy"`).
var duplicateIstio = regexp.MustCompile(`Duplicate value: "(istio-[a-z-]+|workload-socket|credential-socket|workload-certs)"`)

// injectedTwice puts a refusal of a duplicate Istio container or volume
// down to the overlapping Istio webhooks that match the pod (KM-INJ-005's
// finding): each injects in turn, and the apiserver refuses what the second
// adds again. The fix deletes the configurations of those not of the
// revision the labels select; ok is false when the refusal is not that or
// which ones are extra is not known.
func injectedTwice(w *WorkloadState, r *injection.InjectionReport, text string) (ev, mesh, fix string, ok bool) {
	m := duplicateIstio.FindStringSubmatch(text)
	if m == nil || len(r.OverlapExtra) == 0 {
		return "", "", "", false
	}
	ev = "; two Istio webhooks inject its pods, one after the other: " + quoteList(r.OverlapExtra) + " as well as the one of the revision its labels select, so the second adds " + m[1] + " again and the apiserver refuses the pod (Duplicate value)"
	var lines []string
	for _, c := range r.OverlapExtra {
		lines = append(lines, "kubectl delete mutatingwebhookconfiguration "+c+"   # it also matches this namespace and injects a second time (a leftover of another revision or install); check first that no namespace is meant to use it: kubectl get mutatingwebhookconfiguration "+c+" -o yaml")
	}
	switch w.Kind {
	case "Deployment", "StatefulSet", "DaemonSet":
		lines = append(lines, "sleep 3; kubectl rollout restart "+strings.ToLower(w.Kind)+"/"+w.Name+" -n "+w.Namespace+"   # its controller tries again at once (its own retries back off for minutes)")
	}
	return ev, "the overlapping Istio webhooks (" + strings.Join(r.OverlapExtra, ", ") + ")", strings.Join(lines, "\n"), true
}
