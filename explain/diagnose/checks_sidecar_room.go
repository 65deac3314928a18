package diagnose

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeSidecarNoRoom: the sidecar's requests, set by the pod's annotations,
// make the pod bigger than any node it may run on.
const CodeSidecarNoRoom = "KM-INJ-021"

// FactNodes is what the cluster's nodes can give their pods.
var FactNodes = Fact{"the nodes' allocatable cpu and memory", "list nodes"}

func init() {
	register(&Spec{Code: CodeSidecarNoRoom, Title: "the sidecar's requests fit no node", Stage: CheckInjection, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactMesh, FactNodes},
		Means:   "sidecar.istio.io/proxyCPU or proxyMemory sizes the sidecar the injector adds, and its requests count against the node like the app's: with them, the pod asks for more cpu or memory than any node it may run on can give (allocatable, not what is free), while without them it would fit. The scheduler leaves it Pending (Insufficient cpu/memory), or, for a pod pinned by spec.nodeName, the kubelet rejects it (Failed, OutOfcpu/OutOfmemory) and its controller makes another.",
		Detects: "A pod with the sidecar that is not running on a node (Pending and unscheduled, or Failed with the kubelet's OutOf… reason), or a manifest's template (-f) the injector would size by those annotations: the pod's requests (its containers', the sidecar's from its container or the annotation) exceed every candidate node's allocatable (spec.nodeName's node, else every node) in cpu or memory, and the pod without the sidecar fits one of them.",
		Fixes:   "Remove the annotations from the pod's template (kubectl patch the workload; a Job is re-created, a bare pod re-created from its applied manifest; a manifest applied with them taken out): the sidecar then asks for the mesh's defaults. Or set values under a node's allocatable, which the evidence gives.",
		Source:  "Istio docs, resource annotations (sidecar.istio.io/proxyCPU, proxyMemory); Kubernetes docs, node allocatable and the kubelet's admission (OutOfcpu, OutOfmemory) of a pod bound by spec.nodeName",
		Planted: "a bare pod, pinned to the node by spec.nodeName, annotated sidecar.istio.io/proxyCPU: \"64\"",
		run:     sidecarNoRoom})
}

// roomResources are the resources the check weighs.
var roomResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// roomKeys are the annotations that set the sidecar's requests, by resource.
var roomKeys = map[corev1.ResourceName]string{corev1.ResourceCPU: istio.AnnotationProxyCPU, corev1.ResourceMemory: istio.AnnotationProxyMemory}

func sidecarNoRoom(in *Input) []Finding {
	nodes := in.Injection // its Nodes, and a manifest's Template
	if nodes == nil || len(nodes.Nodes) == 0 {
		return nil
	}
	var spec *corev1.PodSpec
	var annotations map[string]string
	sidecar := corev1.ResourceList{}
	switch p := in.Pod; {
	case p != nil:
		if !in.injected() || !unplaced(p) {
			return nil
		}
		spec, annotations = &p.Spec, p.Annotations
		for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
			if c.Name == istio.ProxyContainer {
				sidecar = c.Resources.Requests
			}
		}
	case len(in.Files) > 0 && in.willInject() && nodes.Template != nil:
		t := nodes.Template
		spec, annotations = &t.Spec, t.Annotations
		for r, k := range roomKeys {
			if q, err := resource.ParseQuantity(annotations[k]); err == nil {
				sidecar[r] = q
			}
		}
	default:
		return nil
	}
	var keys []string
	for _, r := range roomResources {
		if _, set := annotations[roomKeys[r]]; set {
			keys = append(keys, roomKeys[r])
		}
	}
	if len(keys) == 0 {
		return nil
	}
	want := podRequests(spec, in.Pod == nil, sidecar)
	var names []string
	if spec.NodeName != "" {
		if _, ok := nodes.Nodes[spec.NodeName]; !ok {
			return nil
		}
		names = []string{spec.NodeName}
	} else {
		for n := range nodes.Nodes {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	without := corev1.ResourceList{}
	for r, q := range want {
		q = q.DeepCopy()
		if s, ok := sidecar[r]; ok {
			q.Sub(s)
		}
		without[r] = q
	}
	fitsWithout := false
	var over []string
	for _, n := range names {
		alloc := nodes.Nodes[n]
		if fits(want, alloc) {
			return nil
		}
		fitsWithout = fitsWithout || fits(without, alloc)
		over = append(over, n+" has "+roomSay(alloc))
	}
	if !fitsWithout {
		return nil // too big with or without the sidecar: not the mesh's
	}
	where := "any node"
	if spec.NodeName != "" {
		where = "node " + spec.NodeName + " (spec.nodeName)"
	}
	ev := fmt.Sprintf("the sidecar istio-proxy requests %s, set by %s; with it the pod asks for %s, more than %s can give (allocatable: %s), and without it the pod would fit",
		roomSay(sidecar), quoteAnnotations(annotations, keys), roomSay(want), where, strings.Join(over, "; "))
	if p := in.Pod; p != nil && p.Status.Phase == corev1.PodFailed {
		ev += "; the kubelet rejected it: " + p.Status.Reason
	}
	return []Finding{{Code: CodeSidecarNoRoom, Status: Fail, Evidence: ev, Fix: in.roomFix(keys), Mesh: quoteAnnotations(annotations, keys)}}
}

// unplaced says the pod runs on no node: unscheduled, or rejected by the
// kubelet it was bound to for want of room.
func unplaced(p *corev1.Pod) bool {
	switch {
	case p.DeletionTimestamp != nil:
		return false
	case p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "":
		return true
	case p.Status.Phase == corev1.PodFailed:
		return strings.HasPrefix(p.Status.Reason, "OutOf")
	}
	return false
}

// podRequests is what a pod asks of its node for cpu and memory
// (ownRequests); with manifest, the sidecar is not in the spec yet and is
// added.
func podRequests(spec *corev1.PodSpec, manifest bool, sidecar corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	t := &corev1.PodTemplateSpec{Spec: *spec}
	for _, r := range roomResources {
		q := ownRequests(t, r)
		if s, ok := sidecar[r]; ok && manifest {
			q.Add(s)
		}
		out[r] = q
	}
	return out
}

// fits says every request is within the allocatable.
func fits(want, alloc corev1.ResourceList) bool {
	for r, q := range want {
		if a, ok := alloc[r]; ok && q.Cmp(a) > 0 {
			return false
		}
	}
	return true
}

// roomSay is "cpu 64, memory 128Mi" (memory from 1Gi on that is not in
// whole Mi, Gi or Ti shown in Gi, to a tenth; nothing of what is zero).
func roomSay(l corev1.ResourceList) string {
	var parts []string
	for _, r := range roomResources {
		q, ok := l[r]
		switch {
		case !ok || q.IsZero():
		case r == corev1.ResourceMemory && q.Value() >= 1<<30 && (strings.HasSuffix(q.String(), "Ki") || !strings.HasSuffix(q.String(), "i")):
			parts = append(parts, fmt.Sprintf("memory %.1fGi", float64(q.Value())/(1<<30)))
		default:
			parts = append(parts, string(r)+" "+q.String())
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// roomFix takes the annotations out of what makes the pod: its workload's
// template, its applied manifest, or the file (-f) before it is applied.
func (in *Input) roomFix(keys []string) string {
	if p := in.Pod; p != nil {
		fix := removeAnnotations(p, keys) + "   # the sidecar then asks for the mesh's defaults; or set values a node can give"
		if o := in.Owner; o != nil && o.Kind == "Job" && strings.HasPrefix(o.Controller, "CronJob/") {
			// The CronJob makes its Jobs from its jobTemplate: that is
			// changed. A Job it scheduled is deleted after it (its next
			// run is made new); one made from it by hand is made again.
			cron := strings.TrimPrefix(o.Controller, "CronJob/")
			patch := templatePatch("cronjob/"+cron, p.Namespace, keys) + "   # the CronJob's next Jobs are made without them"
			if strings.HasPrefix(o.Name, cron+"-") {
				return patch
			}
			return patch + "\n" + fix
		}
		return fix
	}
	r := in.Injection
	apply := "kubectl apply -f " + strings.Join(in.Files, " -f ") + " -n " + r.Namespace
	if r.Kind == "Pod" {
		var gone []string
		for _, k := range keys {
			gone = append(gone, k+"-")
		}
		return "kubectl annotate --local -f " + strings.Join(in.Files, " -f ") + " " + strings.Join(gone, " ") + " -o json | kubectl apply -n " + r.Namespace + " -f -" +
			"   # the file applied without them (the sidecar then asks for the mesh's defaults): change the file the same way"
	}
	return apply + "   # creates it; its pods cannot be placed until the next line takes the annotations out (change the file the same way)\n" +
		templatePatch(strings.ToLower(r.Kind)+"/"+r.Name, r.Namespace, keys)
}
