package diagnose

// IstioctlElsewhere are the istioctl analyze messages about a pod, its
// namespace, its Services' ports or the injection webhooks that no check
// reports, and why (docs/checks.md lists them). Every other such message
// has a check that names it (Spec.Istioctl).
var IstioctlElsewhere = []struct{ Code, Name, Why string }{
	{"IST0102", "NamespaceNotInjected", "information, not a fault: why-injected's factors say which label would enable injection, and KM-INJ-010 warns when injection is asked for and not done"},
	{"IST0110", "ConflictingSidecarWorkloadSelectors", "two Sidecar resources select the pod: routing configuration, not the pod's setup; run istioctl analyze for it"},
	{"IST0111", "MultipleSidecarsWithoutWorkloadSelectors", "as IST0110: routing configuration of the namespace"},
	{"IST0135", "DeprecatedAnnotation", "information: the annotation still works; KM-INJ-008 reports annotations that have no effect"},
	{"IST0136", "AlphaAnnotation", "information: most of Istio's pod annotations are Alpha, so it would be on almost every tuned pod"},
	{"IST0148", "NamespaceInjectionEnabledByDefault", "information: why-injected names the webhook that injects every namespace"},
	{"IST0159", "ConflictingTelemetryWorkloadSelectors", "telemetry configuration, not the pod's setup"},
	{"IST0160", "MultipleTelemetriesWithoutWorkloadSelectors", "telemetry configuration, not the pod's setup"},
	{"IST0162", "GatewayPortNotDefinedOnService", "gateways: their Deployments have no capture and no init stage"},
	{"IST0163", "InvalidExternalControlPlaneConfig", "the webhook's URL is not resolved here; a call that fails is KM-INJ-004, from the FailedCreate it causes"},
	{"IST0164", "ExternalControlPlaneAddressIsNotAHostname", "information about how the webhook is addressed, not a fault of the pod"},
}
