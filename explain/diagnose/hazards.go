package diagnose

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
)

// RefusalCode is the catalogue's code for an admission refusal of the kind
// injection.RefusalOf gives ("" for the platform's own: KM-INJ-013).
func RefusalCode(kind string) string {
	if kind == "" {
		return CodeWorkloadShort
	}
	return blockedCode(kind)
}

// hazardReads are the facts a check may read to run on a pod that does not
// exist yet (one a dry run admitted): its spec; its events and logs are
// none yet; the Services that will select it are those given (none: a
// check of a Service's port then finds nothing, one of the pod's own
// ports still does).
var hazardReads = []Fact{FactPod, FactMesh, FactEvents, FactLogs, FactServices}

// Hazards runs the catalogue's static checks that read only a pod's spec on
// a pod not created yet (what a dry run admitted), made by a controller of
// kind (Job, CronJob: run-once): the hazards it will meet when it is.
func Hazards(p *corev1.Pod, kind string, services ...corev1.Service) []Finding {
	p = p.DeepCopy()
	p.Status = corev1.PodStatus{Phase: corev1.PodPending}
	p.CreationTimestamp = metav1.Now() // not created yet: nothing has waited
	if kind == "Job" || kind == "CronJob" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: p.GenerateName + "plan", Controller: &yes}}
	}
	facts := startup.StartupFacts{Pod: p, Now: time.Now()}
	if ref := metav1.GetControllerOf(p); ref != nil {
		facts.OwnerKind = ref.Kind
	}
	in := &Input{Facts: Facts{Pod: p, Startup: startup.AnalyzeStartup(facts), Services: services}, Target: p.GenerateName + " -n " + p.Namespace}
	var out []Finding
	for _, s := range Checks() {
		if s.Kind != Static || !readsOnly(s.Reads, hazardReads) || s.Code == CodeNotRunning {
			// (Not running: it is not created yet.)
			continue
		}
		for _, fd := range s.run(in) {
			fd.Code, fd.Title, fd.Stage = s.Code, s.Title, s.Stage
			if fd.Status == "" {
				fd.Status = s.Status
			}
			if fd.Status == Fail || fd.Status == Warning {
				out = append(out, fd)
			}
		}
	}
	return out
}

func readsOnly(reads, allowed []Fact) bool {
	for _, r := range reads {
		if !slices.Contains(allowed, r) {
			return false
		}
	}
	return true
}
