package diagnose

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Checks of the pod's spec: static, in every sweep, from the pod alone.
const (
	CodeImageAuto         = "KM-INJ-006"
	CodeUnknownAnnotation = "KM-INJ-008"
	CodeReservedPort      = "KM-START-008"
	CodeProbeNotRewritten = "KM-START-009"
	CodeShutdownOrder     = "KM-START-010"
	CodeDNSPolicy         = "KM-START-011"
	CodeProxyUID          = "KM-CAP-002"
	CodeInterceptionNone  = "KM-CAP-004"
)

func init() {
	spec := []Fact{FactPod}
	register(&Spec{Code: CodeImageAuto, Title: `istio-proxy image "auto", not injected`, Stage: CheckInjection, Kind: Static, Status: Fail,
		Istioctl: []string{"IST0147", "IST0146"}, Reads: spec,
		Means:   `A container named istio-proxy has image "auto", which only the injector replaces: the pod was not injected (a gateway deployed where no webhook selects it), and the container can never start.`,
		Detects: `The istio-proxy container's image on a pod without the injector's status annotation.`,
		Fixes:   "Let a webhook select the pod: remove istio-injection=disabled from its namespace, or label the template istio.io/rev=REVISION; then re-create it.",
		Source:  "istioctl analyze IST0147/IST0146",
		Planted: `a pod with a container istio-proxy, image auto, in a namespace labelled istio-injection=disabled`,
		run:     imageAuto})
	register(&Spec{Code: CodeUnknownAnnotation, Title: "Istio annotation unknown or misplaced", Stage: CheckInjection, Kind: Static, Status: Warning,
		Istioctl: []string{"IST0108", "IST0107"}, Reads: spec,
		Means:   "An annotation in an Istio domain that Istio does not know (a typo), or one that belongs on another kind of resource: it has no effect. A label in sidecar.istio.io/ other than sidecar.istio.io/inject (sidecar.istio.io/injected) on a pod without a sidecar: no webhook selects by it.",
		Detects: "The pod's annotations against Istio's own table of annotations (generated from istio.io/api), with the closest known name; the labels of a pod with no sidecar in sidecar.istio.io/ but the one the webhooks select on.",
		Fixes:   "Rename it in the pod template to the name Istio knows, or move it where it belongs; for the label, set sidecar.istio.io/inject with the value meant in the template.",
		Source:  "istioctl analyze IST0108 UnknownAnnotation, IST0107 MisplacedAnnotation",
		Planted: "a pod annotated traffic.sidecar.istio.io/excludeOutboundPort (no s)",
		run:     unknownAnnotations})
	register(&Spec{Code: CodeReservedPort, Title: "container port collides with the proxy", Stage: CheckStart, Kind: Static, Status: Fail,
		Reads:   append(slices.Clone(spec), FactServices),
		Means:   "An app container declares a port the proxy or its agent listens on (15000-15090): one of them cannot bind it, and the pod's traffic or health checks break.",
		Detects: "The app containers' declared ports on a pod with a sidecar, against the proxy's ports; and a proxy's port an app container's command or args name without declaring it, when its log says a bind failed (address already in use).",
		Fixes:   "A command that moves the app's port to a free one (6000 lower: 15090 → 9090): its declared port, and the number in its command, args and env; the targetPort of the Services that name it by number; a StatefulSet's pod that never became ready is deleted. An app that reads its port from elsewhere (a config file) must move it there too.",
		Source:  "Istio docs, application requirements (ports used by Istio)",
		Planted: "a sidecar pod whose app declares containerPort 15021",
		run:     reservedPorts})
	register(&Spec{Code: CodeProbeNotRewritten, Title: "probes go through the proxy", Stage: CheckStart, Kind: Static, Status: Warning,
		Reads:   spec,
		Means:   "The injector's probe rewrite is off (sidecar.istio.io/rewriteAppHTTPProbers: \"false\") and an app container has an HTTP or TCP probe: a TCP probe is answered by the proxy even when the app is down, an HTTP probe fails under STRICT mTLS.",
		Detects: "The annotation and the app containers' probes on a pod with a sidecar.",
		Fixes:   "Remove the annotation (the injector rewrites the probes to the agent's port 15020), then re-create the pod.",
		Source:  "Istio docs, health checking of Istio services; istio/istio issues on TCP probes",
		Planted: "rewriteAppHTTPProbers: \"false\" and a tcpSocket readiness probe on a port nothing listens on",
		run:     probesNotRewritten})
	register(&Spec{Code: CodeShutdownOrder, Title: "proxy may stop before the app", Stage: CheckStart, Kind: Static, Status: Warning,
		Reads:   spec,
		Means:   "A classic sidecar gets SIGTERM with the app: an app that goes on working while it stops (a preStop hook) loses its network once the proxy has drained.",
		Detects: "A classic istio-proxy without EXIT_ON_ZERO_ACTIVE_CONNECTIONS, and an app container with a preStop hook.",
		Fixes:   "A native sidecar (the kubelet stops it last), or proxyMetadata EXIT_ON_ZERO_ACTIVE_CONNECTIONS=true.",
		Source:  "istio/istio issues on Envoy shutting down before the app",
		Planted: "a classic-sidecar pod whose app has a preStop hook",
		run:     shutdownOrder})
	register(&Spec{Code: CodeDNSPolicy, Title: "dnsPolicy not ClusterFirst", Stage: CheckStart, Kind: Static, Status: Warning,
		Reads:   spec,
		Means:   "The pod with a sidecar does not use the cluster's DNS (dnsPolicy Default, or None without it): cluster names may not resolve for the app, and the agent may not resolve istiod, so the proxy gets no configuration.",
		Detects: "spec.dnsPolicy and dnsConfig on a pod with a sidecar, not on the node's network.",
		Fixes:   "dnsPolicy: ClusterFirst in the template.",
		Source:  "istiod's injector, which warns of it at admission",
		Planted: "a sidecar pod with dnsPolicy: Default",
		run:     dnsPolicy})
	register(&Spec{Code: CodeProxyUID, Title: "app runs as the proxy's uid 1337", Stage: CheckCapture, Kind: Static, Status: Fail,
		Istioctl: []string{"IST0144"}, Reads: spec,
		Means:   "An app container runs as uid 1337, the proxy's: istio-iptables lets that uid's traffic through uncaptured, so the app's outbound traffic bypasses the proxy (no mTLS, no policy): a bypass, so it fails.",
		Detects: "The app containers' effective runAsUser (the container's, else the pod's: a pod-level runAsUser 1337 is inherited by every container that sets none) on a pod in the mesh.",
		Fixes:   "Run the app as another uid: a strategic patch of the template setting the container's securityContext.runAsUser (1000, a choice: any uid the image runs as but 0 and 1337); a bare pod re-created from its applied manifest.",
		Source:  "istioctl analyze IST0144; Istio docs, application requirements (application UIDs)",
		Planted: "a sidecar pod whose app runs as uid 1337",
		run:     proxyUID})
	register(&Spec{Code: CodeInterceptionNone, Title: "injected, capture turned off", Stage: CheckCapture, Kind: Static, Status: Warning,
		Reads:   spec,
		Means:   "The pod has a sidecar but no rules capture its traffic, which goes around the proxy unless the app is configured to use it: sidecar.istio.io/interceptionMode is NONE, or traffic.sidecar.istio.io/excludeInterfaces names the pod's own network interface (eth0), whose traffic istio-init's first rules return before any capture.",
		Detects: "The annotations on a pod with a sidecar: interceptionMode NONE; excludeInterfaces naming eth0 (the interface Kubernetes gives a pod's network).",
		Fixes:   "Remove the annotation if capture was meant, then re-create the pod (excludeInterfaces is meant for extra interfaces, such as a CNI's second one).",
		Source:  "Istio's annotations (interceptionMode NONE: no istio-init)",
		Planted: "a pod annotated sidecar.istio.io/interceptionMode: NONE",
		run:     interceptionNone})
}

// sidecarPod is a pod that has Istio's sidecar (injected, or written so).
func sidecarPod(in *Input) *corev1.Pod {
	if in.Pod == nil || !in.injected() {
		return nil
	}
	return in.Pod
}

func imageAuto(in *Input) []Finding {
	p := in.Pod
	if p == nil || p.Annotations[istio.AnnotationStatus] != "" {
		return nil
	}
	for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
		if c.Name == istio.ProxyContainer && c.Image == "auto" {
			fix := "label the pod template sidecar.istio.io/inject=\"true\" (or istio.io/rev=REVISION), then re-create the pod"
			switch owner := templateOwner(p); {
			case namespaceBlocks(in):
				// istio-injection set to another value than enabled keeps
				// every Istio webhook away from the namespace.
				fix = "kubectl label namespace " + p.Namespace + " istio-injection-   # or label the pod template istio.io/rev=REVISION; then re-create the pod"
			case strings.HasPrefix(owner, "deployment/"), strings.HasPrefix(owner, "statefulset/"), strings.HasPrefix(owner, "daemonset/"):
				fix = "kubectl patch " + owner + " -n " + p.Namespace + ` --type merge -p '{"spec":{"template":{"metadata":{"labels":{"sidecar.istio.io/inject":"true"}}}}}'` +
					"   # the default revision's webhook then injects it (with the template its inject.istio.io/templates annotation names); or label it istio.io/rev=REVISION for another revision"
			}
			return []Finding{{Evidence: `container istio-proxy has image "auto", which only Istio's injector replaces, and no injector has processed the pod: it cannot start`,
				Fix: fix}}
		}
	}
	return nil
}

// namespaceBlocks: the pod's namespace has an istio-injection label that
// keeps every Istio webhook away (a value other than enabled).
func namespaceBlocks(in *Input) bool {
	if in.Injection == nil {
		return false
	}
	for _, f := range in.Injection.Factors {
		if f.Factor == "namespace label istio-injection" && f.Effect == injection.EffectBlocks {
			return true
		}
	}
	return false
}

// templateReads are the annotations Istio's injection template reads that
// its API (istio.io/api's annotation package, the table) does not
// declare: they have their effect (capNetBindService gives istio-proxy
// NET_BIND_SERVICE and uid 0), whatever istioctl analyze says of them.
var templateReads = map[string]bool{"sidecar.istio.io/capNetBindService": true}

func unknownAnnotations(in *Input) []Finding {
	p := in.Pod
	if p == nil {
		return nil
	}
	var names []string
	for k := range p.Annotations {
		names = append(names, k)
	}
	sort.Strings(names)
	var out []Finding
	for _, k := range names {
		if !istio.IsIstioAnnotation(k) || istio.IsExemptAnnotation(k) || templateReads[k] {
			continue
		}
		a, known := istio.LookupAnnotation(k)
		switch {
		case !known:
			ev := "annotation " + k + " is not one Istio knows: it has no effect"
			fix := annotationPatch(p, k, "")
			if near := istio.Closest(k); near != "" {
				ev += " (did you mean " + near + "?)"
				fix = annotationPatch(p, k, near)
			}
			out = append(out, Finding{Evidence: ev, Fix: fix})
		case !istio.AppliesTo(a, "Pod"):
			out = append(out, Finding{Evidence: "annotation " + k + " belongs on " + quoteList(a.Resources) + ", not on a pod: it has no effect here",
				Fix: "move the annotation " + k + " to the " + quoteList(a.Resources) + " it is meant for"})
		}
	}
	return append(out, unknownInjectLabels(in)...)
}

// unknownInjectLabels: a pod label in sidecar.istio.io/ other than
// sidecar.istio.io/inject, the only one Istio's webhooks select on (a
// misspelt key: sidecar.istio.io/injected), on a pod with no sidecar. Its
// fix sets the label meant, with the same value, in the pod's template.
func unknownInjectLabels(in *Input) []Finding {
	p := in.Pod
	if p == nil || in.injected() {
		return nil
	}
	var out []Finding
	var keys []string
	for k := range p.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !strings.HasPrefix(k, "sidecar.istio.io/") || k == istio.KeyInject {
			continue
		}
		if _, set := p.Labels[istio.KeyInject]; set {
			continue
		}
		v := p.Labels[k]
		out = append(out, Finding{Status: Warning,
			Evidence: fmt.Sprintf("label %s=%q is not one Istio knows (did you mean %s?): no webhook selects the pod by it, and it has no sidecar", k, v, istio.KeyInject),
			Mesh:     "label " + k,
			Fix:      specFixLabel(p, templateOwner(p), istio.KeyInject, v) + "   # the label the webhooks select on, with the value meant (the misspelt one can go)"})
	}
	return out
}

func reservedPorts(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil {
		return nil
	}
	var hits, edits []string
	var hit []corev1.Container
	// The app's containers, and its own native sidecars (restartable init
	// containers), which run beside the proxy too.
	cs := appContainers(p)
	for _, c := range p.Spec.InitContainers {
		if !istio.IsIstioContainer(c.Name) && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			cs = append(cs, c)
		}
	}
	hbone := true // every port hit is the tunnel's (15008, 15009)
	for _, c := range cs {
		for _, port := range c.Ports {
			if slices.Contains(istio.ReservedPorts, port.ContainerPort) {
				hbone = hbone && (port.ContainerPort == istio.PortHBONE || port.ContainerPort == istio.PortHBONE+1)
				hits = append(hits, fmt.Sprintf("container %s port %d", c.Name, port.ContainerPort))
				edits = append(edits, fmt.Sprintf("container %s's port %d → %d", c.Name, port.ContainerPort, freePort(p, port.ContainerPort)))
				if len(hit) == 0 || hit[len(hit)-1].Name != c.Name {
					hit = append(hit, c)
				}
			}
		}
	}
	moves := map[string][]int32{} // undeclared ports, by container
	for _, c := range cs {
		if ports := undeclaredInUse(in, c); len(ports) > 0 {
			moves[c.Name] = ports
			for _, port := range ports {
				hits = append(hits, fmt.Sprintf("container %s port %d (in its command, undeclared; its log: address already in use)", c.Name, port))
				edits = append(edits, fmt.Sprintf("container %s's port %d → %d", c.Name, port, freePort(p, port)))
				hbone = hbone && (port == istio.PortHBONE || port == istio.PortHBONE+1)
			}
			if len(hit) == 0 || hit[len(hit)-1].Name != c.Name {
				hit = append(hit, c)
			}
		}
	}
	if len(hits) == 0 {
		return nil
	}
	for i, c := range hit {
		// An undeclared port moves as a declared one would.
		for _, port := range moves[c.Name] {
			c.Ports = append(slices.Clone(c.Ports), corev1.ContainerPort{ContainerPort: port, Protocol: corev1.ProtocolTCP})
		}
		hit[i] = c
	}
	fix := "move the app to another port, and the Service's targetPort with it"
	if cmd := in.movePortsFix(hit); cmd != "" {
		fix = cmd
	}
	ev := quoteList(hits) + ": a port the proxy or its agent listens on (Istio uses 15000-15090): the two cannot both bind it, and the one that starts second fails (\"address already in use\")"
	if hbone {
		ev = quoteList(hits) + ": the mesh's tunnel (HBONE) port, which the capture rules leave alone: connections to it reach the app without the proxy (no mTLS, no policy, no telemetry), and a proxy that serves HBONE binds it too"
	}
	return []Finding{{Evidence: ev,
		Mesh:     "the proxy's ports (" + quoteList(hits) + ")",
		Fix:      fix,
		edit:     "move " + quoteList(edits) + ": its containerPort, the number in its command, args, env and probes, and the targetPort of the Services that send to it",
		explains: []string{CodeAppFailing, CodeInitContainerFailed, CodeProxyFailing, CodeProxyNotReady}}}
}

func probesNotRewritten(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil || p.Annotations[istio.AnnotationRewriteProbes] != "false" || p.Annotations[istio.AnnotationInterceptionMode] == "NONE" {
		return nil
	}
	var hits []string
	for _, c := range appContainers(p) {
		for kind, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
			switch {
			case pr == nil:
			case pr.TCPSocket != nil:
				hits = append(hits, fmt.Sprintf("container %s's %s probe (TCP %s: the proxy accepts it even when the app is down)", c.Name, kind, pr.TCPSocket.Port.String()))
			case pr.HTTPGet != nil:
				hits = append(hits, fmt.Sprintf("container %s's %s probe (HTTP %s: through the proxy, refused under STRICT mTLS)", c.Name, kind, pr.HTTPGet.Port.String()))
			}
		}
	}
	if len(hits) == 0 {
		return nil
	}
	sort.Strings(hits)
	return []Finding{{Evidence: istio.AnnotationRewriteProbes + ` is "false": ` + strings.Join(hits, "; "),
		Fix: annotationPatch(p, istio.AnnotationRewriteProbes, "") + "   # the injector then rewrites the probes to the agent (port 15020)"}}
}

func shutdownOrder(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil {
		return nil
	}
	var proxy *corev1.Container
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Name == istio.ProxyContainer {
			proxy = &p.Spec.Containers[i]
		}
	}
	if proxy == nil {
		return nil // a native sidecar: the kubelet stops it after the app
	}
	for _, e := range proxy.Env {
		if e.Name == "EXIT_ON_ZERO_ACTIVE_CONNECTIONS" && e.Value == "true" {
			return nil
		}
	}
	var hooked, trapped []string
	for _, c := range appContainers(p) {
		switch {
		case c.Lifecycle != nil && c.Lifecycle.PreStop != nil:
			hooked = append(hooked, c.Name)
		case trapsTerm(c):
			trapped = append(trapped, c.Name)
		}
	}
	if len(hooked)+len(trapped) == 0 {
		return nil
	}
	exit := `proxy.istio.io/config: '{"proxyMetadata":{"EXIT_ON_ZERO_ACTIVE_CONNECTIONS":"true"}}'`
	fix := `add the annotation sidecar.istio.io/nativeSidecar: "true" to the pod template (the kubelet stops a native sidecar last), or ` + exit
	switch a := startup.NativeSidecarAdvice(p); {
	case !a.Annotation:
		fix = "add the annotation " + exit + " to the pod template (the proxy then waits for the app's connections to end); a native sidecar, which the kubelet stops last: " + a.Note
	case a.Note != "":
		fix = `add the annotation sidecar.istio.io/nativeSidecar: "true" to the pod template (the kubelet stops a native sidecar last; ` + a.Note + `), or ` + exit
	}
	if a := startup.NativeSidecarAdvice(p); a.Annotation {
		if cmd := setTemplateAnnotations(p, map[string]string{istio.AnnotationNativeSidecar: "true"}); !strings.HasPrefix(cmd, "in the pod's manifest") {
			fix = cmd + "   # the kubelet stops a native sidecar after the app's containers; or " + exit
		}
	}
	var what []string
	if len(hooked) > 0 {
		what = append(what, "container "+quoteList(hooked)+", which has a preStop hook")
	}
	if len(trapped) > 0 {
		what = append(what, "container "+quoteList(trapped)+", whose command traps SIGTERM to work on")
	}
	return []Finding{{Evidence: "classic sidecar: istio-proxy gets SIGTERM with " + strings.Join(what, ", and ") + ", and goes on working while the proxy drains and exits (its last connections are refused)",
		Fix: fix}}
}

// trapTerm: a shell's trap of SIGTERM ("trap 'cleanup' TERM", "trap … SIGTERM", "trap … 15").
var trapTerm = regexp.MustCompile(`\btrap\s+(?:'[^']*'|"[^"]*"|\S+)\s+(?:[A-Z0-9 ]+\s+)?(?:SIG)?(?:TERM|15)\b`)

// trapsTerm: the container's command traps SIGTERM: it goes on working
// after the kubelet asks it to stop.
func trapsTerm(c corev1.Container) bool {
	return trapTerm.MatchString(strings.Join(append(append([]string{}, c.Command...), c.Args...), " "))
}

func dnsPolicy(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil || p.Spec.HostNetwork {
		return nil
	}
	switch p.Spec.DNSPolicy {
	case corev1.DNSDefault:
	case corev1.DNSNone:
		if p.Spec.DNSConfig != nil && len(p.Spec.DNSConfig.Searches) > 0 && strings.Contains(strings.Join(p.Spec.DNSConfig.Searches, " "), ".svc.") {
			return nil // the cluster's search domains: its resolver, set by hand
		}
	default:
		return nil
	}
	ev := "dnsPolicy is " + string(p.Spec.DNSPolicy) + ": the pod resolves names with the node's resolver, not the cluster's DNS, so cluster names (SERVICE.NAMESPACE.svc) may not resolve for the app, nor istiod's for the agent"
	if proxyReady(p) {
		ev += " (the proxy is ready: it got its configuration this time)"
	} else {
		ev += ": istio-proxy is not ready, and may get no configuration"
	}
	return []Finding{{Evidence: ev, Fix: specPatch(p, `{"dnsPolicy":"ClusterFirst"}`, "set dnsPolicy: ClusterFirst")}}
}

func proxyUID(in *Input) []Finding {
	p := in.Pod
	if p == nil || !in.injected() && (in.Injection == nil || !in.Injection.IsExpected()) {
		return nil
	}
	uid := istio.ProxyUID
	var hits []string
	podUID := ""
	if sc := p.Spec.SecurityContext; sc != nil && sc.RunAsUser != nil {
		podUID = strconv.FormatInt(*sc.RunAsUser, 10)
	}
	for _, c := range appContainers(p) {
		eff := podUID
		if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
			eff = strconv.FormatInt(*c.SecurityContext.RunAsUser, 10)
		}
		if eff == uid {
			hits = append(hits, c.Name)
		}
	}
	switch {
	case len(hits) > 0:
		ev := "container " + quoteList(hits) + " runs as uid " + uid + ", the proxy's"
		if podUID == uid {
			ev += " (the pod's securityContext.runAsUser, which it inherits)"
		}
		var cs []string
		for _, h := range hits {
			cs = append(cs, fmt.Sprintf(`{"name":%q,"securityContext":{"runAsUser":1000}}`, h))
		}
		return []Finding{{Evidence: ev + ": istio-iptables lets that uid's traffic through uncaptured, so its outbound traffic bypasses the proxy (no mTLS, no policy)",
			Mesh: "capture's exemption of the proxy's uid " + uid,
			Fix: specPatch(p, `{"containers":[`+strings.Join(cs, ",")+`]}`, "set securityContext.runAsUser of container "+quoteList(hits)+" to another uid") +
				"   # a choice: any uid the image runs as but 0 and the proxy's 1337"}}
	case podUID == uid:
		return []Finding{{Status: Info, Evidence: "the pod's securityContext.runAsUser is " + uid + ", the proxy's; every app container overrides it (istioctl analyze reports it all the same)",
			Fix: "set the pod's securityContext.runAsUser to another uid"}}
	}
	return nil
}

func interceptionNone(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil {
		return nil
	}
	if p.Annotations[istio.AnnotationInterceptionMode] == "NONE" {
		return []Finding{{Evidence: istio.AnnotationInterceptionMode + " is NONE: the pod has a sidecar but no rules capture its traffic",
			Fix: firstLineNote(annotationPatch(p, istio.AnnotationInterceptionMode, ""), "if capture was meant")}}
	}
	const excludeInterfaces = "traffic.sidecar.istio.io/excludeInterfaces"
	for _, nic := range strings.Split(p.Annotations[excludeInterfaces], ",") {
		if strings.TrimSpace(nic) == "eth0" {
			return []Finding{{Evidence: excludeInterfaces + " names eth0, the pod's own network interface: istio-init's first rules return its traffic, in and out, before any capture, so the sidecar sees none of it",
				Fix: firstLineNote(annotationPatch(p, excludeInterfaces, ""), "if capture was meant; excludeInterfaces is for extra interfaces (a CNI's second one), never eth0")}}
		}
	}
	return nil
}
