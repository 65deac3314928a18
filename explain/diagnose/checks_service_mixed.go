package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeServiceMixed: a Service sends to pods in the mesh and to this pod,
// which is not in it and would not be if re-created.
const CodeServiceMixed = "KM-CONN-009"

// FactServicePods are the other pods of the Services that select a pod
// outside the mesh.
var FactServicePods = Fact{"the other pods of the Services that select a pod outside the mesh: whether they are in it", "list pods"}

func init() {
	register(&Spec{Code: CodeServiceMixed, Title: "a Service sends to this pod outside the mesh too", Stage: CheckConnections, Kind: Static, Status: Warning,
		Reads:   []Fact{FactPod, FactMesh, FactServices, FactServicePods},
		Means:   "A Service selects pods with a sidecar (or in ambient mode) and this running pod, which has none and would get none if re-created (an opt-out, a namespace or webhook that does not select it): the share of the Service's traffic that reaches this pod skips the mesh, with no mTLS, no authorization policy and no telemetry, and a STRICT PeerAuthentication does not protect it. Often a debug or migration pod that carries the app's labels.",
		Detects: "The pod is running, has no istio-proxy and no ambient redirection, the injection model says it would not be injected now, and a Service whose selector matches it also matches another pod of its namespace that has istio-proxy or ambient redirection.",
		Fixes:   "A choice, said in the fix: take the pod out of the Service (kubectl label pod POD KEY-, a key of the Service's selector, for a pod no controller re-creates), or bring it into the mesh (remove its opt-out from its template: the rollout re-creates it with a sidecar).",
		Source:  "Istio docs, mutual TLS migration (workloads without sidecars behind the same service) and security best practices; istio/istio issues on plaintext endpoints mixed into a meshed Service",
		Planted: "a bare pod labelled app=web and sidecar.istio.io/inject=false beside a meshed Deployment web, both selected by Service web",
		run:     serviceMixed})
}

// InMesh says whether a pod is in the mesh: an istio-proxy container (a
// sidecar, classic or native) or ambient redirection.
func InMesh(p *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == istio.ProxyContainer {
				return true
			}
		}
	}
	return p.Annotations[istio.AnnotationRedirection] == "enabled"
}

// MixedCandidate says whether the Service peers of a pod matter to its
// diagnosis: a running pod outside the mesh that some Service selects.
func MixedCandidate(p *corev1.Pod, services int) bool {
	return p != nil && services > 0 && !p.Spec.HostNetwork && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && !InMesh(p)
}

// ServiceMembers are the pods in the mesh that each Service selects, by
// Service name, as the engines gather them (a sweep's pods, or one LIST).
type ServiceMembers map[string][]string

// Add records pod p for each Service of svcs that selects it, when it is
// in the mesh and not being deleted.
func (m ServiceMembers) Add(p *corev1.Pod, svcs []corev1.Service) {
	if p.DeletionTimestamp != nil || !InMesh(p) {
		return
	}
	set := labels.Set(p.Labels)
	for _, s := range svcs {
		if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(set) {
			m[s.Name] = append(m[s.Name], p.Name)
		}
	}
}

func serviceMixed(in *Input) []Finding {
	p := in.Pod
	if !MixedCandidate(p, len(in.Services)) || in.Injection == nil || in.Injection.Ambient {
		return nil
	}
	if r := in.Injection; r.Expected == nil || *r.Expected || r.Injected == nil || *r.Injected {
		return nil // unknown (the injection check says so) or injected on re-creation (another check's)
	}
	var mixed []corev1.Service
	for _, s := range in.Services {
		if len(in.ServiceMeshed[s.Name]) > 0 {
			mixed = append(mixed, s)
		}
	}
	if len(mixed) == 0 {
		if in.ServiceMeshedUnknown != "" {
			return []Finding{{Status: Unknown, Evidence: "whether the Services that select this pod (outside the mesh) also select pods in it could not be read: " + in.ServiceMeshedUnknown,
				Needs: []string{"list pods"}}}
		}
		return nil
	}
	var said, keys []string
	for _, s := range mixed {
		peers := in.ServiceMeshed[s.Name]
		sort.Strings(peers)
		shown := peers
		if len(shown) > 3 {
			shown = append(peers[:3:3], fmt.Sprintf("%d more", len(peers)-3))
		}
		said = append(said, fmt.Sprintf("Service %s (selector %s) sends to it and to %d pod(s) in the mesh (%s)", s.Name, labels.SelectorFromSet(s.Spec.Selector), len(peers), strings.Join(shown, ", ")))
		for k := range s.Spec.Selector {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	why := in.Injection.Reason
	if why == "" {
		why = "it would not be injected if re-created"
	}
	ev := fmt.Sprintf("%s; this pod has no sidecar (%s): the part of that traffic that reaches %s skips the mesh (no mTLS, no authorization policy, no telemetry; a STRICT PeerAuthentication does not cover it)",
		strings.Join(said, "; "), why, p.Name)
	return []Finding{{Status: Warning, Evidence: ev, Fix: mixedFix(p, mixed[0].Name, keys),
		Mesh: fmt.Sprintf("Service %s sends to pods in the mesh and to %s, outside it", mixed[0].Name, p.Name)}}
}

// mixedFix takes a bare pod out of the Services (its labels), or brings a
// workload's pods into the mesh (their opt-out removed from the template).
func mixedFix(p *corev1.Pod, svc string, keys []string) string {
	owner := templateOwner(p)
	optOut := ""
	if p.Labels[InjectLabel] == "false" {
		optOut = "label"
	} else if p.Annotations[InjectLabel] == "false" {
		optOut = "annotation"
	}
	if owner == "" {
		drop := make([]string, 0, len(keys))
		for _, k := range keys {
			drop = append(drop, k+"-")
		}
		return fmt.Sprintf("kubectl label pod %s -n %s %s   # takes it out of Service %s (the other choice: keep the labels and re-create it in the mesh, without its opt-out)",
			p.Name, p.Namespace, strings.Join(drop, " "), svc)
	}
	switch optOut {
	case "label":
		if !strings.HasPrefix(owner, "job/") {
			return fmt.Sprintf(`kubectl patch %s -n %s --type=json -p '[{"op":"remove","path":"/spec/template/metadata/labels/%s"}]'   # brings its pods into the mesh (the other choice: change its template's labels so that Service %s no longer selects them)`,
				owner, p.Namespace, jsonPointer(InjectLabel), svc)
		}
	case "annotation":
		return annotationPatch(p, InjectLabel, "") + "   # brings its pods into the mesh (the other choice: change its template's labels so that Service " + svc + " no longer selects them)"
	}
	return fmt.Sprintf("either bring %s's pods into the mesh (kubectl mesh why-injected pod/%s -n %s says what keeps them out) or change its template's labels so that Service %s no longer selects them",
		owner, p.Name, p.Namespace, svc)
}
