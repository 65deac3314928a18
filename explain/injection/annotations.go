package injection

import (
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// istiod checks a pod's annotations when it is about to inject it, before it
// renders the template, and refuses the pod (the webhook denies the
// admission request) when any of these has a value it cannot use. The checks
// are istiod's: lists are split on commas; CIDRs are parsed strictly (no
// spaces around entries); ports are trimmed and must fit 16 bits; interface
// names are trimmed, 1–15 characters, a letter first. An annotation not named
// here is not checked at admission.
var annotationChecks = map[string]func(string) error{
	istio.AnnotationInterceptionMode:                        checkInterceptionMode,
	"status.sidecar.istio.io/port":                          checkPort,
	"readiness.status.sidecar.istio.io/initialDelaySeconds": checkUint32,
	"readiness.status.sidecar.istio.io/periodSeconds":       checkUint32,
	"readiness.status.sidecar.istio.io/failureThreshold":    checkUint32,
	"traffic.sidecar.istio.io/includeOutboundIPRanges":      checkCIDRsOrStar,
	"traffic.sidecar.istio.io/excludeOutboundIPRanges":      checkCIDRs,
	"traffic.sidecar.istio.io/includeInboundPorts":          checkPortsOrStar,
	"traffic.sidecar.istio.io/excludeInboundPorts":          checkPorts,
	"traffic.sidecar.istio.io/excludeOutboundPorts":         checkPorts,
	"traffic.sidecar.istio.io/excludeInterfaces":            checkInterfaces,
	"traffic.sidecar.istio.io/kubevirtInterfaces":           checkInterfaces,
	"istio.io/reroute-virtual-interfaces":                   checkInterfaces,
	"prometheus.istio.io/merge-metrics":                     checkBool,
	istio.AnnotationProxyCPU:                                checkQuantity,
	istio.AnnotationProxyMemory:                             checkQuantity,
	istio.AnnotationProxyCPULimit:                           checkQuantity,
	istio.AnnotationProxyMemoryLimit:                        checkQuantity,
}

// UncheckedOutboundPorts is the annotation of the port list istiod passes to istio-iptables
// without checking it at admission: a value that is not a list of ports
// makes iptables-restore refuse the rules, and istio-init fails (seen with
// Istio's own binaries: TestStartupOnRealKubelet's bad-init).
const UncheckedOutboundPorts = istio.AnnotationIncludeOutboundPorts

// initBreakingAnnotation says how istio-init will fail on an annotation
// istiod admits, "" when none will make it.
func initBreakingAnnotation(annotations map[string]string) string {
	v, ok := annotations[UncheckedOutboundPorts]
	if !ok || strings.TrimSpace(v) == "" {
		return ""
	}
	if err := checkPorts(v); err != nil {
		return fmt.Sprintf("istiod admits %s=%s (it does not check that annotation), but istio-init will fail on it: %v", UncheckedOutboundPorts, quote(v), err)
	}
	return ""
}

// proxyConfigAnno is checked by istiod too (as a whole ProxyConfig), which
// kubectl-mesh does not repeat: its factor says so.
const proxyConfigAnno = "proxy.istio.io/config"

// annotationProblem is one annotation istiod refuses.
type annotationProblem struct {
	name, value string
	err         error
}

func (p annotationProblem) String() string {
	return fmt.Sprintf("invalid value %s for annotation %s: %v", quote(p.value), p.name, p.err)
}

// invalidAnnotations returns the annotations istiod would refuse, by name.
func invalidAnnotations(annotations map[string]string) []annotationProblem {
	var out []annotationProblem
	for name, value := range annotations {
		if check, ok := annotationChecks[name]; ok {
			if err := check(value); err != nil {
				out = append(out, annotationProblem{name: name, value: value, err: err})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// annotationFactors are the factor rows of the admission check: one per
// refused annotation (blocks), or one saying the checked ones are valid.
func annotationFactors(w *Workload, problems []annotationProblem) []Factor {
	var fs []Factor
	for _, p := range problems {
		fs = append(fs, Factor{Factor: p.name, Value: quote(p.value), Effect: EffectBlocks,
			Source: "pod annotation; istiod refuses the pod at admission: " + p.err.Error()})
	}
	checked := 0
	for name := range w.Annotations {
		if _, ok := annotationChecks[name]; ok {
			checked++
		}
	}
	if len(problems) == 0 && checked > 0 {
		fs = append(fs, Factor{Factor: "annotation values", Value: fmt.Sprintf("%d checked, all valid", checked), Effect: EffectNone,
			Source: "pod annotations istiod checks before injecting"})
	}
	if v, ok := w.Annotations[proxyConfigAnno]; ok {
		fs = append(fs, Factor{Factor: proxyConfigAnno, Value: quote(truncate(v, 80)), Effect: EffectInfoOnly,
			Source: "pod annotation; istiod refuses the pod if it is not a valid ProxyConfig: not checked by kubectl-mesh"})
	}
	return fs
}

// annotationFix says how to correct the refused annotations.
func annotationFix(w *Workload, problems []annotationProblem) string {
	var names []string
	for _, p := range problems {
		names = append(names, p.name)
	}
	why := problems[0].name + ": " + problems[0].err.Error()
	if fix := removeTemplateAnnotations(w, names, "istiod refuses "+why+"; or set a value it accepts"); fix != "" {
		return fix
	}
	return "correct or remove the pod's annotation " + strings.Join(names, ", ") + " in its manifest (" + problems[0].err.Error() + "), then re-create the pod"
}

func checkInterceptionMode(v string) error {
	switch v {
	case "REDIRECT", "TPROXY", "NONE":
		return nil
	}
	return fmt.Errorf("not REDIRECT, TPROXY or NONE")
}

func checkPort(v string) error {
	if _, err := strconv.ParseUint(strings.TrimSpace(v), 10, 16); err != nil {
		return fmt.Errorf("%q is not a port number", v)
	}
	return nil
}

func checkPorts(v string) error {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	for _, p := range strings.Split(v, ",") {
		if err := checkPort(p); err != nil {
			return err
		}
	}
	return nil
}

func checkPortsOrStar(v string) error {
	if v == "*" {
		return nil
	}
	return checkPorts(v)
}

func checkCIDRs(v string) error {
	if v == "" {
		return nil
	}
	for _, c := range strings.Split(v, ",") {
		if _, err := netip.ParsePrefix(c); err != nil {
			return fmt.Errorf("%q is not an address/prefix-length CIDR", c)
		}
	}
	return nil
}

func checkCIDRsOrStar(v string) error {
	if v == "*" {
		return nil
	}
	return checkCIDRs(v)
}

var interfaceName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_.\-]*$`)

func checkInterfaces(v string) error {
	if v == "" {
		return nil
	}
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
			return fmt.Errorf("empty interface name")
		case len(name) > 15:
			return fmt.Errorf("interface name %q longer than 15 characters", name)
		case !interfaceName.MatchString(name):
			return fmt.Errorf("interface name %q has characters an interface name cannot have", name)
		}
	}
	return nil
}

func checkUint32(v string) error {
	if _, err := strconv.ParseUint(v, 10, 32); err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	return nil
}

func checkBool(v string) error {
	if _, err := strconv.ParseBool(v); err != nil {
		return fmt.Errorf("%q is not true or false", v)
	}
	return nil
}

func checkQuantity(v string) error {
	for _, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("the value has control characters")
		}
	}
	if _, err := resource.ParseQuantity(v); err != nil {
		return fmt.Errorf("%q is not a resource quantity", v)
	}
	return nil
}
