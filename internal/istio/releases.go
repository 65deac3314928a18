package istio

import (
	"maps"
	"slices"
)

// ReleaseDefaults are the defaults of one Istio minor release that
// kubectl-mesh's answers depend on, as read from Istio's source at the tag
// named in ReadAt (docs/istio-versions.md has the table and each cell's
// source). A release outside the table is not modelled: an answer that
// depends on one of these defaults is then unknown.
type ReleaseDefaults struct {
	// Minor is "1.<minor>".
	Minor string
	// ReadAt is the tag (or branch@commit, for a release not tagged yet)
	// the defaults were read at; Unreleased marks a minor with no release
	// yet (a release candidate, or master).
	ReadAt     string
	Unreleased bool

	// NativeSidecars is istiod's ENABLE_NATIVE_SIDECARS when it is not set:
	// "false" or "auto".
	NativeSidecars string
	// NativeSidecarsAuto: istiod knows the value "auto" (it decides from the
	// nodes' kubelet versions). Before, the injection template compares the
	// value with "true": anything else, "auto" included, means classic.
	NativeSidecarsAuto bool
	// NativeMinKubelet is, for "auto", the kubelet minor (of 1.x) every node
	// that decides must run for a native sidecar; 0 without "auto".
	NativeMinKubelet int
	// NativeAnnotation is what istiod makes of the pod annotation
	// sidecar.istio.io/nativeSidecar (NativeAnnotation* constants).
	NativeAnnotation string

	// HoldApplicationUntilProxyStarts is the default of
	// meshConfig.defaultConfig.holdApplicationUntilProxyStarts and of the
	// deprecated values.global.proxy.holdApplicationUntilProxyStarts.
	HoldApplicationUntilProxyStarts bool
	// HoldIgnoredForNative: the injector adds no hold (no postStart
	// pilot-agent wait) to a native sidecar, whatever the setting says.
	HoldIgnoredForNative bool

	// CNIValues are the injector values that turn the Istio CNI plugin on
	// (any of them): the injector then adds ValidationContainer instead of
	// istio-init.
	CNIValues []string
	// ValidationContainer is the init container that checks the CNI
	// plugin's rules (istio-iptables --run-validation --skip-rule-apply),
	// and ValidationExitCode its exit code when they are missing.
	ValidationContainer string
	ValidationExitCode  int

	// DNSCapture is the default of ISTIO_META_DNS_CAPTURE (the agent's DNS
	// proxy and istio-init's DNS redirect) for a sidecar.
	DNSCapture bool
	// RewriteAppHTTPProbe is the default of
	// values.sidecarInjectorWebhook.rewriteAppHTTPProbe (the pod annotation
	// sidecar.istio.io/rewriteAppHTTPProbers overrides it).
	RewriteAppHTTPProbe bool

	// InitArgs are istio-init's arguments (istio-iptables …) for a pod
	// with no traffic annotation under the chart's default values;
	// ExcludedInboundPorts is their -d list. InitFlags are the flags the
	// template adds only when a value asks for them (none by default).
	InitArgs             []string
	ExcludedInboundPorts string
	InitFlags            []string

	// InjectValue is how istiod reads the pod's sidecar.istio.io/inject
	// label (or annotation) (InjectValue* constants).
	InjectValue string

	// AmbientEnrollment is how istio-cni's node agent of this release picks
	// the pods ambient mode captures (Ambient* constants; "" when this
	// release's ambient mode is not modelled).
	AmbientEnrollment string

	// Sources name, per column (Col* constants), the file of Istio's
	// repository each default was read from, at ReadAt.
	Sources map[string]string
}

// What istiod makes of the pod annotation sidecar.istio.io/nativeSidecar.
const (
	// NativeAnnotationIgnored: the injector does not read it; the mode
	// (ENABLE_NATIVE_SIDECARS) alone decides.
	NativeAnnotationIgnored = "ignored"
	// NativeAnnotationTrueOnly: set, it decides: "true" gives a native
	// sidecar, any other value (an empty one too) a classic one.
	NativeAnnotationTrueOnly = "true-only"
	// NativeAnnotationNotFalse: an absent or empty annotation leaves it to
	// the mode; "false" gives a classic sidecar, any other value a native
	// one.
	NativeAnnotationNotFalse = "not-false"
)

// How istiod reads sidecar.istio.io/inject.
const (
	// InjectValueYAMLBool: y, yes, true or on (any case) inject; any other
	// non-empty value does not; empty means the injector's policy.
	InjectValueYAMLBool = "yaml-bool"
	// InjectValueTrueFalse: only "true" and "false" are read; any other
	// value means the injector's policy, as if unset.
	InjectValueTrueFalse = "true-false"
)

// How istio-cni's node agent picks the pods ambient mode captures.
const (
	// AmbientByLabels: built in: istio.io/dataplane-mode=ambient on the pod,
	// or on its namespace unless the pod's says none.
	AmbientByLabels = "labels"
	// AmbientBySelectors: the enablement selectors of its ConfigMap
	// (AMBIENT_ENABLEMENT_SELECTOR); none, none enrolled.
	AmbientBySelectors = "selectors"
)

// Columns of the table (the keys of Sources).
const (
	ColNativeSidecars   = "ENABLE_NATIVE_SIDECARS"
	ColNativeKubelet    = "auto: kubelet"
	ColNativeAnnotation = "nativeSidecar annotation"
	ColHold             = "holdApplicationUntilProxyStarts"
	ColHoldNative       = "hold with a native sidecar"
	ColCNI              = "CNI: init container"
	ColValidationExit   = "validation exit code"
	ColDNSCapture       = "ISTIO_META_DNS_CAPTURE"
	ColRewriteProbes    = "rewriteAppHTTPProbe"
	ColInitArgs         = "istio-init arguments"
	ColInitFlags        = "istio-init optional flags"
	ColInjectValue      = "sidecar.istio.io/inject values"
	ColAmbient          = "ambient enrollment"
)

// Columns lists the columns in the table's order.
var Columns = []string{ColNativeSidecars, ColNativeKubelet, ColNativeAnnotation, ColHold, ColHoldNative, ColCNI, ColValidationExit,
	ColDNSCapture, ColRewriteProbes, ColInitArgs, ColInitFlags, ColInjectValue, ColAmbient}

// Files of Istio's repository the defaults were read from.
const (
	srcTemplate     = "manifests/charts/istio-control/istio-discovery/files/injection-template.yaml"
	srcValues       = "manifests/charts/istio-control/istio-discovery/values.yaml"
	srcFeatures     = "pilot/pkg/features/pilot.go"
	srcExperimental = "pilot/pkg/features/experimental.go"
	srcWebhook      = "pkg/kube/inject/webhook.go"
	srcInject       = "pkg/kube/inject/inject.go"
	srcMesh         = "pkg/config/mesh/mesh.go"
	srcConstants    = "tools/istio-iptables/pkg/constants/constants.go"
	srcAgent        = "pilot/cmd/pilot-agent/options/options.go"
	srcPodUtil      = "cni/pkg/util/podutil.go"
	srcCNIValues    = "manifests/charts/istio-cni/values.yaml"
)

// releases is the table, one row per minor, oldest first. The columns that
// change between releases are written per row; the others were found the
// same in every release and are filled in by init.
var releases = []ReleaseDefaults{
	{Minor: "1.20", ReadAt: "1.20.8", NativeSidecars: "false", NativeAnnotation: NativeAnnotationIgnored,
		CNIValues: []string{"istio_cni.enabled"}, InjectValue: InjectValueYAMLBool},
	{Minor: "1.21", ReadAt: "1.21.6", NativeSidecars: "false", NativeAnnotation: NativeAnnotationIgnored, HoldIgnoredForNative: true,
		CNIValues: []string{"istio_cni.enabled"}, InjectValue: InjectValueYAMLBool},
	{Minor: "1.22", ReadAt: "1.22.8", NativeSidecars: "false", NativeAnnotation: NativeAnnotationIgnored, HoldIgnoredForNative: true,
		CNIValues: []string{"pilot.cni.enabled", "istio_cni.enabled"}, InjectValue: InjectValueYAMLBool},
	{Minor: "1.23", ReadAt: "1.23.6", NativeSidecars: "false", NativeAnnotation: NativeAnnotationIgnored, HoldIgnoredForNative: true,
		CNIValues: []string{"pilot.cni.enabled", "istio_cni.enabled"}, InjectValue: InjectValueYAMLBool, AmbientEnrollment: AmbientByLabels},
	{Minor: "1.24", ReadAt: "1.24.6", NativeSidecars: "false", NativeAnnotation: NativeAnnotationTrueOnly, HoldIgnoredForNative: true,
		CNIValues: []string{"pilot.cni.enabled"}, InitFlags: []string{"--force-apply"}, InjectValue: InjectValueYAMLBool, AmbientEnrollment: AmbientByLabels},
	{Minor: "1.25", ReadAt: "1.25.5", NativeSidecars: "false", NativeAnnotation: NativeAnnotationTrueOnly, HoldIgnoredForNative: true,
		CNIValues: []string{"pilot.cni.enabled"}, InitFlags: []string{"--force-apply"}, InjectValue: InjectValueYAMLBool, AmbientEnrollment: AmbientByLabels},
	{Minor: "1.26", ReadAt: "1.26.8", NativeSidecars: "false", NativeAnnotation: NativeAnnotationTrueOnly, HoldIgnoredForNative: true,
		CNIValues: []string{"pilot.cni.enabled"}, InitFlags: []string{"--force-apply"}, InjectValue: InjectValueYAMLBool, AmbientEnrollment: AmbientByLabels},
	{Minor: "1.27", ReadAt: "1.27.9", NativeSidecars: "auto", NativeSidecarsAuto: true, NativeMinKubelet: 33, NativeAnnotation: NativeAnnotationNotFalse, HoldIgnoredForNative: true,
		CNIValues: []string{"pilot.cni.enabled"}, InitFlags: []string{"--force-apply", "--native-nftables"}, InjectValue: InjectValueTrueFalse, AmbientEnrollment: AmbientBySelectors},
	{Minor: "1.28", ReadAt: "1.28.10", NativeSidecars: "auto", NativeSidecarsAuto: true, NativeMinKubelet: 33, NativeAnnotation: NativeAnnotationNotFalse, HoldIgnoredForNative: true,
		CNIValues: []string{"pilot.cni.enabled"}, InitFlags: []string{"--force-apply", "--native-nftables"}, InjectValue: InjectValueTrueFalse, AmbientEnrollment: AmbientBySelectors},
	{Minor: "1.29", ReadAt: "1.29.6", NativeSidecars: "auto", NativeSidecarsAuto: true, NativeMinKubelet: 33, NativeAnnotation: NativeAnnotationNotFalse, HoldIgnoredForNative: true,
		CNIValues: []string{"pilot.cni.enabled"}, InitFlags: []string{"--force-apply", "--native-nftables"}, InjectValue: InjectValueTrueFalse, AmbientEnrollment: AmbientBySelectors},
	{Minor: "1.30", ReadAt: "1.30.3", NativeSidecars: "auto", NativeSidecarsAuto: true, NativeMinKubelet: 33, NativeAnnotation: NativeAnnotationNotFalse, HoldIgnoredForNative: true,
		CNIValues: []string{"pilot.cni.enabled"}, InitFlags: []string{"--force-apply", "--native-nftables"}, InjectValue: InjectValueTrueFalse, AmbientEnrollment: AmbientBySelectors},
	// 1.31: its release candidate, which the test bed's build (a
	// release-1.31 commit, VERSION 1.31) matches in every column.
	{Minor: "1.31", ReadAt: "1.31.0-rc.0", Unreleased: true, NativeSidecars: "auto", NativeSidecarsAuto: true, NativeMinKubelet: 33, NativeAnnotation: NativeAnnotationNotFalse, HoldIgnoredForNative: true,
		CNIValues: []string{"pilot.cni.enabled"}, InitFlags: []string{"--force-apply", "--native-nftables"}, InjectValue: InjectValueTrueFalse, AmbientEnrollment: AmbientBySelectors},
	// 1.32: master (VERSION 1.32), not released.
	{Minor: "1.32", ReadAt: "master@86c9f01", Unreleased: true, NativeSidecars: "auto", NativeSidecarsAuto: true, NativeMinKubelet: 33, NativeAnnotation: NativeAnnotationNotFalse, HoldIgnoredForNative: true,
		CNIValues: []string{"pilot.cni.enabled"}, InitFlags: []string{"--force-apply", "--native-nftables"}, InjectValue: InjectValueTrueFalse, AmbientEnrollment: AmbientBySelectors},
}

// defaultInitArgs are istio-init's arguments under the chart's defaults in
// every modelled release: capture to 15001 and 15006, the proxy's uid
// exempt, REDIRECT, every outbound address and inbound port, the proxy's
// own inbound ports (Prometheus, health, the agent's status port) left
// out, the agent's log level.
var defaultInitArgs = []string{"istio-iptables", "-p", "15001", "-z", "15006", "-u", ProxyUID, "-m", "REDIRECT", "-i", "*", "-x", "",
	"-b", "*", "-d", "15090,15021,15020", "--log_output_level=default:info"}

func init() {
	for i := range releases {
		r := &releases[i]
		r.ValidationContainer, r.ValidationExitCode = ValidationContainer, 126
		r.DNSCapture, r.RewriteAppHTTPProbe, r.HoldApplicationUntilProxyStarts = false, true, false
		r.InitArgs, r.ExcludedInboundPorts = defaultInitArgs, "15090,15021,15020"
		native, kubelet := srcFeatures, srcTemplate
		if v, _ := ParseVersion(r.Minor); v.Minor >= 21 && v.Minor <= 26 {
			native = srcExperimental
		}
		if r.NativeSidecarsAuto {
			kubelet = srcWebhook
		}
		ambient := ""
		switch r.AmbientEnrollment {
		case AmbientByLabels:
			ambient = srcPodUtil
		case AmbientBySelectors:
			ambient = srcCNIValues
		}
		r.Sources = map[string]string{
			ColNativeSidecars: native, ColNativeKubelet: kubelet, ColNativeAnnotation: srcTemplate,
			ColHold: srcMesh, ColHoldNative: srcTemplate, ColCNI: srcTemplate, ColValidationExit: srcConstants,
			ColDNSCapture: srcAgent, ColRewriteProbes: srcValues, ColInitArgs: srcTemplate, ColInitFlags: srcTemplate,
			ColInjectValue: srcInject, ColAmbient: ambient,
		}
	}
}

// DefaultsFor is the table's row for minor ("1.24"); false when the
// release is not modelled (its answers are then unknown).
func DefaultsFor(minor string) (ReleaseDefaults, bool) {
	for _, r := range releases {
		if r.Minor == minor {
			return r.clone(), true
		}
	}
	return ReleaseDefaults{}, false
}

// clone copies a row, its lists and sources too: callers cannot change
// the table.
func (r ReleaseDefaults) clone() ReleaseDefaults {
	r.CNIValues, r.InitArgs, r.InitFlags = slices.Clone(r.CNIValues), slices.Clone(r.InitArgs), slices.Clone(r.InitFlags)
	r.Sources = maps.Clone(r.Sources)
	return r
}

// Defaults is DefaultsFor the version's minor.
func Defaults(v Version) (ReleaseDefaults, bool) { return DefaultsFor(v.MinorString()) }

// Releases are the modelled releases, oldest first.
func Releases() []ReleaseDefaults {
	out := make([]ReleaseDefaults, len(releases))
	for i, r := range releases {
		out[i] = r.clone()
	}
	return out
}

// ModelledRange names the modelled releases ("1.20–1.32").
func ModelledRange() string { return releases[0].Minor + "–" + releases[len(releases)-1].Minor }
