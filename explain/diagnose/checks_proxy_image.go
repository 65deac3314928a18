package diagnose

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeProxyImageFails: an injected container runs the image the pod's
// sidecar.istio.io/proxyImage annotation chose, and fails.
const CodeProxyImageFails = "KM-INIT-012"

// annotationProxyImage replaces the image of every container the injector
// adds (istio-init, istio-proxy, istio-validation).
const annotationProxyImage = "sidecar.istio.io/proxyImage"

func init() {
	register(&Spec{Code: CodeProxyImageFails, Title: "the proxy image the pod chose fails", Stage: CheckInit, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactMesh, FactLogs},
		Means:   "sidecar.istio.io/proxyImage replaces the image of every container Istio's injector adds: istio-init runs istio-iptables from it, istio-proxy pilot-agent and Envoy. An image that is not Istio's proxy image of the same release (an app's image, another release's) has none of them, or other ones: istio-init fails (\"istio-iptables: not found\") or the proxy does, and the pod never starts.",
		Detects: "An injected container (istio-init, istio-validation, istio-proxy) that failed for want of what it runs (its command not in the image: the runtime's StartError, exit 126 or 127, \"not found\" or \"can't open\" in its log), whose image is the pod's sidecar.istio.io/proxyImage annotation's value; its log line is quoted.",
		Fixes:   "The annotation removed from the pod template (the injector then uses the revision's own proxy image); a Job re-created.",
		Source:  "Istio annotations reference (sidecar.istio.io/proxyImage); istio/istio issues on custom proxy images",
		Planted: "a Job whose template sets sidecar.istio.io/proxyImage to the app's image",
		run:     proxyImageFails})
}

func proxyImageFails(in *Input) []Finding {
	p, s := in.Pod, in.Startup
	image := ""
	if p != nil {
		image = p.Annotations[annotationProxyImage]
	}
	if image == "" || s == nil {
		return nil
	}
	for _, cs := range slices.Concat(s.InitContainers, s.Containers) {
		if !istio.IsIstioContainer(cs.Name) || !(cs.Failing || cs.State == "terminated" && cs.ExitCode != nil && *cs.ExitCode != 0) {
			continue
		}
		ran := ""
		for _, c := range slices.Concat(p.Spec.InitContainers, p.Spec.Containers) {
			if c.Name == cs.Name {
				ran = c.Image
			}
		}
		if ran != image || !missingBinary(cs) {
			continue // the image may well be a proxy's: another cause
		}
		mesh := fmt.Sprintf("the pod's %s=%q", annotationProxyImage, image)
		ev := fmt.Sprintf("%s runs %s, the image %s sets in place of the mesh's proxy image", cs.Name, image, mesh)
		if own := in.injectorImage(); own != "" && own != image {
			ev += " (" + own + ")"
		}
		ev += ", and failed"
		if cs.LastFailure != "" {
			ev += " (" + cs.LastFailure + ")"
		}
		if cs.Log != nil {
			ev += "; " + startup.LogEnd(cs)
		}
		return []Finding{{Status: Fail, Evidence: ev, Mesh: mesh,
			Fix:      annotationPatch(p, annotationProxyImage, "") + "   # the injector then uses the mesh's own proxy image",
			explains: []string{CodeInitFailed, CodeInitContainerFailed, CodeProxyFailing, CodeNotRunning, CodeJobFailed, CodeStuckInInit}}}
	}
	return nil
}

// missingBinary says a container failed for want of what it runs: its
// command not in the image (the runtime's StartError, exit 126 or 127, a
// shell's "not found" or "can't open").
func missingBinary(cs startup.ContainerStartup) bool {
	text := strings.ToLower(cs.LastFailure + " " + cs.Reason + " " + cs.Message)
	if cs.Log != nil {
		text += " " + strings.ToLower(strings.Join(slices.Concat(cs.Log.Previous, cs.Log.Current), " "))
	}
	if cs.ExitCode != nil && (*cs.ExitCode == 126 || *cs.ExitCode == 127) {
		return true
	}
	for _, w := range []string{"not found", "no such file", "can't open", "executable file not found", "starterror"} {
		if strings.Contains(text, w) {
			return true
		}
	}
	return false
}
