package diagnose

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// The pod's outbound capture by address against the cluster's own ranges.
const CodeClusterRangesBypass = "KM-CAP-008"

// FactClusterRanges is the cluster's pod and Service address ranges.
var FactClusterRanges = Fact{"the cluster's pod and Service ranges: nodes' podCIDRs, ServiceCIDRs, the kubernetes Service",
	"list nodes, list servicecidrs.networking.k8s.io, get services (default)"}

func init() {
	register(&Spec{Code: CodeClusterRangesBypass, Title: "in-cluster traffic is not captured outbound", Stage: CheckCapture, Kind: Static, Status: Warning,
		Reads:   []Fact{FactPod, FactClusterRanges},
		Means:   "The pod's outbound capture by address (excludeOutboundIPRanges, or an includeOutboundIPRanges list, the pod's annotations or the mesh-wide values global.proxy.excludeIPRanges / includeIPRanges) leaves out a range of the cluster's own pods or Services: every connection to them bypasses the proxy, with no mTLS, no authorization policy and no telemetry.",
		Detects: "The capture arguments the pod's rules are written from (istio-init's, which carry the mesh-wide values, or the CNI plugin's from the annotations) against the cluster's ranges read from it: the nodes' podCIDRs, the ServiceCIDR objects (else the kubernetes Service's ClusterIP) and the pod's own IP; ranges that cannot be read make it unknown, with the permission named.",
		Fixes:   "Remove the annotation, or narrow it to exclude (or include) only what is meant: a kubectl patch of the pod template; for the mesh-wide values, the install's values.",
		Source:  "Istio docs, traffic redirection annotations and the security best practices (traffic not captured is not secured); Kubernetes docs, ServiceCIDR and node podCIDRs",
		Planted: "traffic.sidecar.istio.io/excludeOutboundIPRanges: 10.0.0.0/8 on the test cluster, whose pod and Service ranges are in it",
		run:     clusterRangesBypass})
}

// outboundCapture is a pod's outbound capture by address, as its rules are
// written from.
type outboundCapture struct {
	all              bool // includes "*"
	include, exclude []netip.Prefix
	// includeFrom and excludeFrom say where the lists come from: the pod's
	// annotation, or the mesh-wide values (istio-init's arguments without
	// the annotation).
	includeFrom, excludeFrom string
}

// outboundOf reads the pod's outbound capture by address; ok is false for a
// pod whose capture arguments cannot be told (no sidecar, capture off, a
// bad argument, which other checks report).
func outboundOf(p *corev1.Pod) (o outboundCapture, ok bool) {
	if p == nil || p.Annotations[istio.AnnotationInterceptionMode] == "NONE" {
		return o, false
	}
	args, env, _, ok := capture.CaptureArgsFromPod(p)
	if !ok {
		return o, false
	}
	if !mayNarrow(args, env) {
		return outboundCapture{all: true}, true // the common case, without parsing every flag
	}
	cfg, err := capture.ParseCaptureArgs(args, env)
	if err != nil {
		return o, false
	}
	given := false // -i given at all: without it, istio-iptables is not told to narrow anything
	for _, a := range args {
		if a == "-i" || strings.HasPrefix(a, "-i=") || strings.HasPrefix(a, "--istio-service-cidr") {
			given = true
		}
	}
	o.all = !given
	for _, f := range strings.Split(cfg.IncludeCIDRs, ",") {
		f = strings.TrimSpace(f)
		if f == "*" {
			o.all = true
		} else if pr, err := netip.ParsePrefix(f); err == nil {
			o.include = append(o.include, pr.Masked())
		}
	}
	for _, f := range cfg.ExcludeCIDRs {
		if pr, err := netip.ParsePrefix(f); err == nil {
			o.exclude = append(o.exclude, pr.Masked())
		}
	}
	from := func(key, values string) string {
		if _, ok := p.Annotations[key]; ok {
			return "annotation " + key
		}
		return "the mesh-wide values " + values + " (in the pod's capture arguments, no annotation)"
	}
	o.includeFrom = from(istio.AnnotationIncludeOutboundIPRanges, "global.proxy.includeIPRanges")
	o.excludeFrom = from(istio.AnnotationExcludeOutboundIPRanges, "global.proxy.excludeIPRanges")
	return o, true
}

// narrowed says the capture leaves some address out.
func (o outboundCapture) narrowed() bool { return !o.all || len(o.exclude) > 0 }

// NeedsClusterRanges says whether the pod's checks read the cluster's
// ranges: it has a sidecar whose outbound capture leaves addresses out.
func NeedsClusterRanges(p *corev1.Pod) bool {
	if p == nil || !(&Input{Facts: Facts{Pod: p}}).injected() {
		return false
	}
	o, ok := outboundOf(p)
	return ok && o.narrowed()
}

// single says the prefix is one address.
func single(p netip.Prefix) bool { return p.Bits() == p.Addr().BitLen() }

// contains says a holds all of b.
func contains(a, b netip.Prefix) bool {
	return a.Addr().Is4() == b.Addr().Is4() && a.Bits() <= b.Bits() && a.Contains(b.Addr())
}

// covered says the union of the prefixes holds all of r.
func covered(r netip.Prefix, by []netip.Prefix) bool {
	r = r.Masked()
	overlaps := false
	for _, b := range by {
		if contains(b, r) {
			return true
		}
		overlaps = overlaps || b.Overlaps(r)
	}
	if !overlaps || single(r) {
		return false
	}
	lo := netip.PrefixFrom(r.Addr(), r.Bits()+1)
	hiAddr := r.Addr().AsSlice()
	bit := r.Bits()
	hiAddr[bit/8] |= 0x80 >> (bit % 8)
	a, _ := netip.AddrFromSlice(hiAddr)
	hi := netip.PrefixFrom(a, r.Bits()+1)
	return covered(lo, by) && covered(hi, by)
}

// rangeList names ranges, a few at most ("10.244.0.0/24 (node a's
// podCIDRs), … and 3 more").
func rangeList(rs []ClusterRange) string {
	var parts []string
	for i, r := range rs {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("%d more", len(rs)-3))
			break
		}
		kind := "Service range"
		if r.Pods {
			kind = "pod range"
		}
		if single(r.Prefix) {
			kind = "address"
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", kind, r.Prefix, r.From))
	}
	return quoteList(parts)
}

func clusterRangesBypass(in *Input) []Finding {
	p := sidecarPod(in)
	if p == nil {
		return nil
	}
	o, ok := outboundOf(p)
	if !ok || !o.narrowed() {
		return nil
	}
	ranges := append([]ClusterRange(nil), in.ClusterRanges...)
	podRanges := false
	for _, r := range ranges {
		podRanges = podRanges || r.Pods && !single(r.Prefix)
	}
	if !podRanges {
		// No pod range published: the pod's own addresses are of one.
		for _, ip := range p.Status.PodIPs {
			if a, err := netip.ParseAddr(ip.IP); err == nil {
				ranges = append(ranges, ClusterRange{Prefix: netip.PrefixFrom(a, a.BitLen()), Pods: true, From: "the pod's own IP"})
			}
		}
	}
	var hits, fixes []string
	for _, e := range o.exclude {
		var covers []ClusterRange
		for _, r := range ranges {
			// One address excluded (the API server's, say) is a choice;
			// a range that holds a whole cluster range is not.
			if contains(e, r.Prefix) && !(single(r.Prefix) && single(e)) {
				covers = append(covers, r)
			}
		}
		if len(covers) > 0 {
			hits = append(hits, fmt.Sprintf("%s excludes %s, which covers the cluster's %s", o.excludeFrom, e, rangeList(covers)))
			fixes = append(fixes, rangesFix(p, o.excludeFrom, istio.AnnotationExcludeOutboundIPRanges, "global.proxy.excludeIPRanges",
				"or narrow it to exclude only what is meant to bypass the proxy, none of "+prefixes(covers)))
		}
	}
	if !o.all {
		var left []ClusterRange
		for _, r := range ranges {
			if !covered(r.Prefix, o.include) {
				left = append(left, r)
			}
		}
		if len(left) > 0 {
			incl := "nothing"
			if len(o.include) > 0 {
				incl = prefixes(nil, o.include...)
			}
			hits = append(hits, fmt.Sprintf("%s includes only %s, which leaves out the cluster's %s", o.includeFrom, incl, rangeList(left)))
			fixes = append(fixes, rangesFix(p, o.includeFrom, istio.AnnotationIncludeOutboundIPRanges, "global.proxy.includeIPRanges",
				"or add to it "+prefixes(left)))
		}
	}
	if len(hits) > 0 {
		return []Finding{{Evidence: strings.Join(hits, "; ") + ": connections to them bypass the proxy (no mTLS, no authorization policy, no telemetry)",
			Fix: strings.Join(fixes, "\n")}}
	}
	if in.ClusterRangesUnknown != "" || len(in.ClusterRanges) == 0 {
		why := in.ClusterRangesUnknown
		if why == "" {
			why = "they were not read"
		}
		return []Finding{{Status: Unknown, Evidence: "the pod's outbound capture leaves addresses out, and the cluster's pod and Service ranges it may cover could not be read: " + why,
			Needs: in.ClusterRangesNeeds}}
	}
	return nil
}

// prefixes lists the ranges' prefixes, then more ("10.244.0.0/16, 10.96.0.0/12").
func prefixes(rs []ClusterRange, more ...netip.Prefix) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Prefix.String())
	}
	for _, p := range more {
		out = append(out, p.String())
	}
	return strings.Join(out, ", ")
}

// rangesFix is the fix of an address list that leaves cluster ranges out:
// the annotation removed from the pod template, or the mesh-wide value to
// change.
func rangesFix(p *corev1.Pod, from, key, value, or string) string {
	if strings.HasPrefix(from, "annotation ") {
		return annotationPatch(p, key, "") + "   # " + or
	}
	return "the mesh-wide values " + value + " give it (no annotation on the pod): change them in the install (istioctl install --set values." + value + "=…, or the Helm values), " + or + "; then re-create the pods"
}

// mayNarrow says whether capture arguments may leave an address out of
// outbound capture: an include list other than "*", an exclude list that
// is not empty, or an environment variable that sets either. It is the
// quick test before the full parse (a flag set per pod is most of a
// sweep's time otherwise).
func mayNarrow(args []string, env map[string]string) bool {
	for k := range env {
		if strings.Contains(strings.ToUpper(k), "CIDR") || strings.Contains(strings.ToUpper(k), "IP_RANGES") {
			return true
		}
	}
	for i, a := range args {
		name, val, inline := strings.Cut(a, "=")
		if !inline {
			val = ""
			if i+1 < len(args) {
				val = args[i+1]
			}
		}
		switch name {
		case "-i", "--istio-service-cidr":
			if val != "*" {
				return true
			}
		case "-x", "--istio-service-exclude-cidr":
			if strings.TrimSpace(val) != "" && !strings.HasPrefix(val, "-") {
				return true
			}
		default:
			if strings.HasPrefix(name, "-") && strings.Contains(name, "cidr") {
				return true
			}
		}
	}
	return false
}
