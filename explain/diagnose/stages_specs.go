package diagnose

// The catalogue entries of the init, start, capture and connections
// families (stages_startup.go, stages_live.go decide them).
func init() {
	initOf := func(code string) func(in *Input) []Finding {
		return func(in *Input) []Finding { return only(in.initAnswer().findings, code) }
	}
	startOf := func(code string) func(in *Input) []Finding {
		return func(in *Input) []Finding { return only(in.startAnswer().findings, code) }
	}
	captureOf := func(code string) func(in *Input) []Finding {
		return func(in *Input) []Finding { return only(in.captureAnswer().findings, code) }
	}
	connsOf := func(code string) func(in *Input) []Finding {
		return func(in *Input) []Finding { return only(in.connectionsAnswer().findings, code) }
	}
	startupReads := []Fact{FactPod, FactEvents, FactLogs}

	register(&Spec{Code: CodeInitNoNetAdmin, Title: "istio-init lacks NET_ADMIN/NET_RAW or root", Stage: CheckInit, Kind: Static, Status: Fail, Reads: startupReads,
		Means:   "istio-init cannot write the pod's rules: it lacks the NET_ADMIN and NET_RAW capabilities the injector gives it, or runs as a user other than root (the injector's runAsUser 0; added capabilities are not effective for a non-root process), changed by the pod's own istio-init or by an admission mutator called after the injector (a mutating webhook or MutatingAdmissionPolicy, istio/istio#49054). The pod never starts.",
		Detects: "istio-init's exit and its log or termination message: permission denied, operation not permitted; then its capabilities and user in the pod's spec, and the mutating webhooks and MutatingAdmissionPolicyBindings other than Istio's whose rules and selectors match the pod.",
		Fixes:   "Exempt the pod's namespace from the mutator that removed them or set the user (a patch of its namespaceSelector) and re-create the pod, or use a revision with Istio's CNI plugin; else show the capabilities istio-init has.",
		Source:  "Istio docs, application requirements (NET_ADMIN and NET_RAW capabilities)",
		Planted: "a sidecar pod written by hand whose istio-init (the real istio-iptables) drops ALL capabilities",
		run:     initOf(CodeInitNoNetAdmin)})
	register(&Spec{Code: CodeInitBadArgument, Title: "istio-init rejects a capture argument", Stage: CheckInit, Kind: Static, Status: Fail, Reads: startupReads,
		Means:   "istiod admits traffic.sidecar.istio.io/includeOutboundPorts without checking it; istio-init then fails on a value that is not a port list, and the pod never starts.",
		Detects: "istio-init's log (invalid port/service); for a template, the annotation itself, before any pod runs.",
		Fixes:   "A kubectl patch of the workload that corrects or removes the annotation.",
		Source:  "istio-iptables' own errors, read off the real binary",
		Planted: "a Deployment with traffic.sidecar.istio.io/includeOutboundPorts: \"80,http\"",
		run:     initOf(CodeInitBadArgument)})
	register(&Spec{Code: CodeInitFailed, Title: "istio-init failed", Stage: CheckInit, Kind: Static, Status: Fail, Reads: startupReads,
		Means:   "istio-init failed for another cause: the node's iptables backend (no nat table, legacy and nft mixed), its chains already there when it re-ran, an invalid mesh-wide CIDR, or one its log names.",
		Detects: "istio-init's exit and its log, matched against istio-iptables' known errors; the last log line otherwise.",
		Fixes:   "What the cause calls for (the finding names it); otherwise the log, then the kubelet retries istio-init by itself.",
		Source:  "istio/istio issues on istio-init (unable to initialize table 'nat', chain already exists, iptables-legacy tables present)",
		Planted: "a sidecar pod written by hand whose istio-init (the real istio-iptables) is given an argument it refuses",
		run:     initOf(CodeInitFailed)})
	register(&Spec{Code: CodeValidationFailed, Title: "istio-validation: no CNI redirect", Stage: CheckInit, Kind: Static, Status: Fail, Reads: startupReads,
		Means:   "With the Istio CNI plugin, istio-validation found no redirection: the plugin had not set up the pod's rules (the node's istio-cni agent was not ready when the pod was created). The pod never starts.",
		Detects: "istio-validation's exit (126) and its log.",
		Fixes:   "Check the node's istio-cni-node pod, then delete the pod once the agent is ready.",
		Source:  "Istio docs, troubleshooting the Istio CNI plugin (diagnose pod start-up failure)",
		Planted: "a pod injected by the cni revision (the plugin is not in the node's chain)",
		run:     initOf(CodeValidationFailed)})
	register(&Spec{Code: CodeStuckInInit, Title: "stuck in init", Stage: CheckInit, Kind: Static, Status: Fail, Reads: startupReads,
		Means:   "An init container has not completed for over a minute: the app and (with a classic sidecar) the proxy wait behind it.",
		Detects: "The init containers' states and the pod's age.",
		Fixes:   "kubectl describe and the init container's log.",
		Source:  "istio/istio issues on pods stuck in Init (init containers that need the network)",
		Planted: "a sidecar pod with a user init container that sleeps",
		run:     initOf(CodeStuckInInit)})
	register(&Spec{Code: CodeAmbientSetup, Title: "ambient: istio-cni did not set the pod up", Stage: CheckInit, Kind: Static, Status: Fail, Reads: startupReads,
		Means:   "In ambient mode, the node's istio-cni agent (or ztunnel) could not set the pod's network up: the kubelet cannot create its sandbox.",
		Detects: "FailedCreatePodSandBox events that name istio-cni.",
		Fixes:   "Check the node's istio-cni-node and ztunnel pods; the kubelet retries by itself.",
		Source:  "Istio docs, troubleshooting the Istio CNI plugin; istio/istio issues on CNI chaining races",
		Planted: "an ambient pod on a node whose istio-cni agent does not answer (TestAmbientCNIRace)",
		run:     initOf(CodeAmbientSetup)})
	register(&Spec{Code: CodeInitCaptured, Title: "init container runs captured, no proxy", Stage: CheckInit, Kind: Static, Status: Warning, Reads: startupReads,
		Means:   "A user init container runs after the capture rules are in place but before any proxy: its outbound connections go to a port nothing serves.",
		Detects: "The order of the init containers against istio-init (or istio-validation), and the uid each runs as.",
		Fixes:   "Run that init container as uid 1337, exclude what it reaches from capture, or use a native sidecar.",
		Source:  "Istio docs, Istio CNI (compatibility with application init containers); istio/istio issues on init containers without network",
		Planted: "a classic-sidecar Deployment with a user init container",
		run:     initOf(CodeInitCaptured)})

	register(&Spec{Code: CodeAppBeforeProxy, Title: "app started before the proxy was ready", Stage: CheckStart, Kind: Static, Status: Warning, Reads: startupReads,
		Means:   "With a classic sidecar and no holdApplicationUntilProxyStarts, the app started before the proxy was ready: its first connections fail.",
		Detects: "The containers' start times against the proxy's readiness.",
		Fixes:   "proxy.istio.io/config holdApplicationUntilProxyStarts: true, or a native sidecar.",
		Source:  "Istio docs, sidecar injection problems (pod or containers start with network issues); istio/istio issues on apps starting before Envoy",
		Planted: "a classic sidecar whose proxy gets ready late (the stand-in's ready delay)",
		run:     startOf(CodeAppBeforeProxy)})
	register(&Spec{Code: CodeProxyNotReady, Title: "istio-proxy running, not ready", Stage: CheckStart, Kind: Static, Status: Fail, Reads: startupReads,
		Means:   "istio-proxy runs but does not get ready: it has no configuration from istiod, or its readiness probe fails.",
		Detects: "istio-proxy's ready condition, how long it has run, its Unhealthy events.",
		Fixes:   "istio-proxy's log; istioctl proxy-status.",
		Source:  "istio/istio issues on proxies that never get ready",
		Planted: "a proxy that gets ready after ten minutes (the stand-in's ready delay)",
		run:     startOf(CodeProxyNotReady)})
	register(&Spec{Code: CodeProxyFailing, Title: "istio-proxy failing", Stage: CheckStart, Kind: Static, Status: Fail, Reads: startupReads,
		Means:   "istio-proxy crash-loops, is OOMKilled, or cannot start: every restart drops the pod's connections, and traffic is captured to a proxy that is not there.",
		Detects: "istio-proxy's state, last termination and restart count, through every phase of its crash loop; once it has run past the kubelet's 10-minute back-off reset, its restarts are a warning; running and ready in a Ready pod once its run has outlived a minute and its last run (before, it may be between two crashes), they are info: the restart count, the last exit and its log line.",
		Fixes:   "istio-proxy's previous log; size it with sidecar.istio.io/proxyMemory(Limit).",
		Source:  "istio/istio issues on sidecars OOMKilled or restarting",
		Planted: "a pod whose proxy image is replaced (sidecar.istio.io/proxyImage) by one that exits",
		run:     startOf(CodeProxyFailing)})
	register(&Spec{Code: CodeAppFailing, Title: "app container failing", Stage: CheckStart, Kind: Static, Status: Fail, Reads: startupReads,
		Means:   "An app container crash-loops or cannot start (image, configuration): in a meshed pod, often because it could not reach the network at start.",
		Detects: "The container's state, last termination and restart count, through every phase of its crash loop; once it has run past the kubelet's 10-minute back-off reset, its restarts are a warning; running and ready in a Ready pod once its run has outlived a minute and its last run (before, it may be between two crashes), they are info: the restart count, the last exit and its log line.",
		Fixes:   "The container's previous log, or the events for one that never started.",
		Source:  "kubectl's own statuses (CrashLoopBackOff, ImagePullBackOff)",
		Planted: "an app container that exits 1",
		run:     startOf(CodeAppFailing)})
	register(&Spec{Code: CodeJobClassicSidecar, Title: "Job pod with a classic sidecar", Stage: CheckStart, Kind: Static, Status: Fail, Reads: startupReads,
		Means:   "A run-once pod (a Job's, whether a CronJob or nobody made the Job, or any pod with restartPolicy Never or OnFailure) has istio-proxy as a regular container: when its own containers end the proxy keeps running, and the pod (and its Job) never completes.",
		Detects: "The owner (a Job) or the pod's restartPolicy (Never, OnFailure), and where istio-proxy is in the spec, while the pod has not ended (one that Succeeded or Failed was not kept alive).",
		Fixes:   "sidecar.istio.io/nativeSidecar: \"true\" in the Job's template (istiod reads it from Istio 1.24; before, native sidecars are mesh-wide: ENABLE_NATIVE_SIDECARS=true), or have the job call the agent's /quitquitquit when it ends.",
		Source:  "istio/istio issues on Jobs that never complete",
		Planted: "a Job with sidecar.istio.io/nativeSidecar: \"false\"",
		run:     startOf(CodeJobClassicSidecar)})
	register(&Spec{Code: CodeNotRunning, Title: "pod not running", Stage: CheckStart, Kind: Static, Status: Warning, Reads: startupReads,
		Means:   "The pod is not running: the scheduler has not placed it, or it is Pending or Failed.",
		Detects: "The pod's phase and node.",
		Fixes:   "kubectl describe pod: the events say why.",
		Source:  "kubectl's own statuses",
		Planted: "a pod whose nodeSelector matches no node",
		run:     startOf(CodeNotRunning)})
	register(&Spec{Code: CodeAmbientWaitZtunnel, Title: "ambient: ztunnel has not taken the pod", Stage: CheckStart, Kind: Static, Status: Fail, Reads: startupReads,
		Means:   "istio-cni enrolled the pod in ambient mode but ztunnel has not taken it (redirection pending): its traffic is not served.",
		Detects: "The ambient.istio.io/redirection annotation istio-cni writes.",
		Fixes:   "Check the node's ztunnel pod.",
		Source:  "Istio docs, ambient mode troubleshooting",
		Planted: "an ambient pod whose redirection stays pending (no ztunnel on the node)",
		run:     startOf(CodeAmbientWaitZtunnel)})

	register(&Spec{Code: CodeRulesDrift, Title: "capture rules differ from the annotations", Stage: CheckCapture, Kind: Live, Status: Fail,
		Reads:   []Fact{FactPod, FactRules},
		Means:   "The pod's iptables (or nft) rules are not those its istio-iptables arguments call for: rules missing, extra or reordered, or none at all.",
		Detects: "The rules read in the pod's network namespace against the rules the real istio-iptables writes for the pod's arguments.",
		Fixes:   "Delete the pod so that its rules are written again.",
		Source:  "istio/istio issues on rules missing after restarts, and CNI skipping pods",
		Planted: "a rule deleted from a running pod's nat table",
		run:     captureOf(CodeRulesDrift)})
	register(&Spec{Code: CodeAmbientNotCaptured, Title: "ambient pod not captured", Stage: CheckCapture, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactMesh},
		Means:   "The pod is enrolled in ambient mode but istio-cni has not set it up: no ambient.istio.io/redirection annotation (or a value istio-cni never writes), so no in-pod rules and no ztunnel: its traffic bypasses the mesh. (Redirection \"pending\" is another fault: istio-cni wrote the rules and ztunnel has not taken the pod, KM-START-013.)",
		Detects: "The ambient.istio.io/redirection annotation, absent or not a value istio-cni writes, on a pod enrolled in ambient mode.",
		Fixes:   "What why-injected says: the node's istio-cni and ztunnel, then re-create the pod.",
		Source:  "Istio docs, ambient mode troubleshooting",
		Planted: "an ambient pod never annotated with ambient.istio.io/redirection",
		run:     captureOf(CodeAmbientNotCaptured)})
	register(&Spec{Code: CodeBypassing, Title: "connections bypass the proxy", Stage: CheckConnections, Kind: Live, Status: Fail,
		Reads:   []Fact{FactPod, FactRules, FactConntrack},
		Means:   "Live connections of the pod go neither through the proxy nor from it: no mTLS, no policy, no telemetry for them.",
		Detects: "Each flow of the pod's connection-tracking table, traced through its rules.",
		Fixes:   "Take the port or range out of the exclude annotations, or restart a process whose connection predates the rules.",
		Source:  "istio/istio issues asking for a way to ensure traffic passed the proxy",
		Planted: "traffic.sidecar.istio.io/excludeOutboundPorts on a pod that keeps a connection open on that port",
		run:     connsOf(CodeBypassing)})
}
