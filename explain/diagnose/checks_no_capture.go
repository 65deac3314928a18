package diagnose

import (
	"fmt"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeSidecarNoCapture: the pod has Istio's sidecar but nothing that
// writes its capture rules.
const CodeSidecarNoCapture = "KM-CAP-011"

func init() {
	register(&Spec{Code: CodeSidecarNoCapture, Title: "a sidecar with no capture", Stage: CheckCapture, Kind: Static, Status: Warning,
		Reads: []Fact{FactPod},
		Means: "Istio's sidecar template always adds istio-init (or, with Istio's CNI plugin, istio-validation) to write or check the pod's capture rules, unless interception is NONE. " +
			"A pod injected without either has a proxy that no traffic is sent to: every connection in and out bypasses it (no mTLS, authorization or telemetry). " +
			"inject.istio.io/templates naming an agent-only template (grpc-agent, grpc-simple: Istio's proxyless gRPC templates) does this by design, for gRPC apps that speak xDS themselves; on any other app it is a bypass.",
		Detects: "An injected pod (its sidecar.istio.io/status annotation and an istio-proxy container) with no istio-init and no istio-validation init container, interception not NONE (KM-CAP-004's); its inject.istio.io/templates annotation, which names what the injector was asked to render.",
		Fixes:   "Remove inject.istio.io/templates from the pod template (the default sidecar template then adds istio-init), unless the app is a proxyless gRPC app; without the annotation, what removed istio-init is to be found (the pod's admission mutators).",
		Source:  "Istio docs, proxyless gRPC (inject.istio.io/templates: grpc-agent) and custom injection templates; Istio's injection template (istio-init or istio-validation unless interception is NONE)",
		Planted: "a StatefulSet of a plain HTTP app with inject.istio.io/templates: grpc-agent",
		run:     sidecarNoCapture})
}

func sidecarNoCapture(in *Input) []Finding {
	p := in.Pod
	if p == nil || !in.injected() || p.Annotations[istio.AnnotationStatus] == "" || p.Annotations[istio.AnnotationInterceptionMode] == "NONE" {
		return nil
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name == istio.InitContainer || c.Name == istio.ValidationContainer {
			return nil
		}
	}
	if tmpl := p.Annotations[istio.AnnotationTemplates]; tmpl != "" {
		if !istio.OmitsSidecarTemplate(p.Annotations) {
			return nil // the sidecar template's istio-init is missing: KM-CAP-010's or a mutator's
		}
		return []Finding{{
			Evidence: fmt.Sprintf("the pod asks for the injection templates %s=%q, which add the proxy without istio-init or istio-validation: the pod has no capture rules, so every connection in and out bypasses the proxy (no mTLS, no authorization, no telemetry); by design only for a proxyless gRPC app, which speaks xDS itself", istio.AnnotationTemplates, tmpl),
			Mesh:     istio.AnnotationTemplates + "=" + tmpl,
			Fix:      removeAnnotations(p, []string{istio.AnnotationTemplates}) + "   # the default sidecar template then captures its traffic; keep the annotation only for a proxyless gRPC app",
		}}
	}
	return []Finding{{
		Evidence: "the pod was injected (sidecar.istio.io/status) and has istio-proxy, but neither istio-init nor istio-validation, which Istio's sidecar template always adds unless interception is NONE: nothing wrote its capture rules, so every connection bypasses the proxy; something after the injector removed the init container (an admission mutator), or a custom template leaves it out",
		Fix:      "kubectl mesh why-injected " + in.Target + "   # names the admission mutators that act on the pod after Istio's injector",
	}}
}
