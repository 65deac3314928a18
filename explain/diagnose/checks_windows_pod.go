package diagnose

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// CodeWindowsPod: a pod template for Windows nodes that Istio's injector
// selects: its sidecar and istio-init are Linux containers.
const CodeWindowsPod = "KM-INJ-024"

func init() {
	register(&Spec{Code: CodeWindowsPod, Title: "a Windows pod selected for the sidecar", Stage: CheckInjection, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactOwner, FactMesh},
		Means:   "The pod template says spec.os.name: windows, and Istio's injector selects it: the sidecar and istio-init it adds are Linux containers, with Linux-only securityContext fields (capabilities, runAsUser, runAsGroup, privileged, readOnlyRootFilesystem) that the apiserver refuses on a Windows pod, so no pod is created. Istio's sidecar runs on Linux only: the workload is kept out of the mesh.",
		Detects: "A workload's template (one short of its pods, or a manifest's, -f) with spec.os.name windows that the injection check says is to get a sidecar.",
		Fixes:   "The label sidecar.istio.io/inject=\"false\" on its pod template (a patch of the workload; a Job made again; for a manifest, in the file, then applied): its pods are created without the sidecar.",
		Source:  "Istio docs, platform requirements (Linux nodes only for the sidecar); Kubernetes API validation of spec.os.name windows (Linux securityContext fields forbidden)",
		Planted: "a Deployment whose template sets spec.os.name windows in a namespace labelled istio-injection=enabled",
		run:     windowsPod})
}

// windowsTemplate is the template a Windows check reads: a workload's
// that lacks pods, or a manifest's.
func windowsTemplate(in *Input) *corev1.PodTemplateSpec {
	if w := in.Workload; w != nil && w.Template != nil {
		return w.Template
	}
	if r := in.Injection; r != nil && r.Template != nil {
		return r.Template
	}
	return nil
}

func windowsPod(in *Input) []Finding {
	t, r := windowsTemplate(in), in.Injection
	if t == nil || t.Spec.OS == nil || t.Spec.OS.Name != corev1.Windows || r == nil || r.Expected == nil || !*r.Expected {
		return nil
	}
	kind, name, ns := r.Kind, r.Name, r.Namespace
	if w := in.Workload; w != nil {
		kind, name, ns = w.Kind, w.Name, w.Namespace
	}
	said := fmt.Sprintf("%s/%s's pod template sets spec.os.name: windows, and Istio's injector selects it", strings.ToLower(kind), name)
	f := Finding{Status: Fail, Mesh: "the sidecar Istio's injector adds to a Windows pod", explains: []string{CodeWorkloadShort, CodePolicyRefused, CodeWebhookUnreachable},
		Evidence: said + ": the sidecar and istio-init it adds are Linux containers, whose securityContext (capabilities, runAsUser, privileged, …) the apiserver refuses on a Windows pod, so none of its pods is created; Istio's sidecar runs on Linux only"}
	optOut := map[string]string{InjectLabel: "false"}
	switch {
	case len(in.Files) > 0 && in.Workload == nil:
		f.Fix = fmt.Sprintf("in %s, put %s: \"false\" under %s/%s's pod template metadata.labels, then kubectl apply -f %s   # Windows workloads stay out of the mesh",
			strings.Join(in.Files, ", "), InjectLabel, strings.ToLower(kind), name, strings.Join(in.Files, " -f "))
	default:
		w := in.Workload
		if w == nil {
			w = &WorkloadState{Kind: kind, Name: name, Namespace: ns}
		}
		f.Fix = templateMetaFix(w, nil, optOut, "its pods are created without the sidecar: Windows workloads stay out of the mesh")
	}
	return []Finding{f}
}
