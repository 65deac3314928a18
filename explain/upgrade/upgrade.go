// Package upgrade compares a workload's pod now with the pod a target
// revision's injector makes of its template, and decides whether that pod
// will start: pure logic over pods the engine read or was given.
package upgrade

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Side is what a pod's mesh parts are: the fields an upgrade changes.
type Side struct {
	// Injected: the pod has Istio's sidecar.
	Injected bool `json:"injected"`
	// Revision is the revision that injected it (sidecar.istio.io/status).
	Revision string `json:"revision,omitempty"`
	// Image is istio-proxy's image, Release its Istio release (from the tag).
	Image   string `json:"image,omitempty"`
	Release string `json:"release,omitempty"`
	// Sidecar is "native" (an init container that keeps running) or "classic".
	Sidecar string `json:"sidecar,omitempty"`
	// Hold: a classic istio-proxy that starts before the app and holds it
	// until ready (holdApplicationUntilProxyStarts).
	Hold bool `json:"hold"`
	// InitContainers are the init containers in their order.
	InitContainers []string `json:"initContainers"`
	// InitArgs are istio-init's arguments (none with Istio's CNI plugin).
	InitArgs []string `json:"initArgs,omitempty"`
	// DNSCapture: istio-proxy's ISTIO_META_DNS_CAPTURE ("" when not set).
	DNSCapture string `json:"dnsCapture,omitempty"`
	// Resources are istio-proxy's requests and limits ("requests cpu=100m
	// memory=128Mi; limits cpu=2 memory=1Gi").
	Resources string `json:"resources,omitempty"`
	// ProbeRewrite: istiod rewrote the app's HTTP probes to the agent
	// (ISTIO_KUBE_APP_PROBERS set).
	ProbeRewrite bool `json:"probeRewrite"`
}

// SideOf reads a pod's mesh parts.
func SideOf(p *corev1.Pod) *Side {
	s := &Side{}
	for _, c := range p.Spec.InitContainers {
		s.InitContainers = append(s.InitContainers, c.Name)
	}
	status := p.Annotations[istio.AnnotationStatus]
	var st struct {
		Revision string `json:"revision"`
	}
	if status != "" {
		_ = json.Unmarshal([]byte(status), &st)
		s.Revision = st.Revision
	}
	var proxy *corev1.Container
	for i, c := range p.Spec.InitContainers {
		if c.Name == istio.ProxyContainer && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			proxy, s.Sidecar = &p.Spec.InitContainers[i], "native"
		}
		if c.Name == istio.InitContainer {
			s.InitArgs = c.Args
		}
	}
	for i, c := range p.Spec.Containers {
		if c.Name == istio.ProxyContainer && proxy == nil {
			proxy, s.Sidecar = &p.Spec.Containers[i], "classic"
			s.Hold = i == 0 && c.Lifecycle != nil && c.Lifecycle.PostStart != nil
		}
	}
	if proxy == nil || status == "" {
		return s
	}
	s.Injected = true
	s.Image = proxy.Image
	if v, ok := istio.ImageVersion(proxy.Image); ok {
		s.Release = v.MinorString()
	}
	for _, e := range proxy.Env {
		switch e.Name {
		case "ISTIO_META_DNS_CAPTURE":
			s.DNSCapture = e.Value
		case "ISTIO_KUBE_APP_PROBERS":
			s.ProbeRewrite = e.Value != ""
		}
	}
	s.Resources = resources(proxy.Resources)
	return s
}

func resources(r corev1.ResourceRequirements) string {
	list := func(l corev1.ResourceList) string {
		var parts []string
		for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := l[n]; ok {
				parts = append(parts, string(n)+"="+q.String())
			}
		}
		return strings.Join(parts, " ")
	}
	var out []string
	if s := list(r.Requests); s != "" {
		out = append(out, "requests "+s)
	}
	if s := list(r.Limits); s != "" {
		out = append(out, "limits "+s)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// Change is one field that differs between now and after.
type Change struct {
	Field string `json:"field"`
	Now   string `json:"now"`
	After string `json:"after"`
	// Means says what the change does to the pod, when it does more than
	// the words show.
	Means string `json:"means,omitempty"`
}

// Compare lists what differs between now and after, field by field, and
// counts the fields compared.
func Compare(now, after *Side) (changes []Change, compared int) {
	add := func(field, a, b, means string) {
		compared++
		if a != b {
			changes = append(changes, Change{Field: field, Now: a, After: b, Means: means})
		}
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	add("sidecar", yes(now.Injected), yes(after.Injected), "")
	add("revision", dash(now.Revision), dash(after.Revision), "")
	add("release", dash(now.Release), dash(after.Release), "")
	add("image", dash(now.Image), dash(after.Image), "")
	kindMeans := ""
	switch {
	case now.Sidecar == "classic" && after.Sidecar == "native":
		kindMeans = "istio-proxy becomes an init container that keeps running: it starts before the app and stops after it; a Job's pod completes"
	case now.Sidecar == "native" && after.Sidecar == "classic":
		kindMeans = "istio-proxy becomes an ordinary container: a Job's pod no longer completes on its own, and the app may start before the proxy unless held"
	}
	add("sidecar kind", dash(now.Sidecar), dash(after.Sidecar), kindMeans)
	holdMeans := ""
	if now.Hold != after.Hold {
		holdMeans = "the app waits for the proxy to be ready"
		if !after.Hold {
			holdMeans = "the app no longer waits for the proxy"
			if after.Sidecar == "native" {
				holdMeans = "a native sidecar is always ready before the app starts: holding is not needed"
			}
		}
	}
	add("hold", yes(now.Hold), yes(after.Hold), holdMeans)
	add("init containers", dash(strings.Join(now.InitContainers, ",")), dash(strings.Join(after.InitContainers, ",")), "")
	gone, added := argsDiff(now.InitArgs, after.InitArgs)
	compared++
	if len(gone)+len(added) > 0 {
		changes = append(changes, Change{Field: "istio-init arguments", Now: dash(strings.Join(gone, " ")), After: dash(strings.Join(added, " ")),
			Means: "capture rules change: " + argsMeaning(gone, added)})
	}
	add("DNS capture", dash(now.DNSCapture), dash(after.DNSCapture), "")
	add("proxy resources", dash(now.Resources), dash(after.Resources), "")
	add("probe rewrite", yes(now.ProbeRewrite), yes(after.ProbeRewrite), "")
	return changes, compared
}

// argsDiff is istio-init's flags (with their values) that only now has,
// and those that only after has.
func argsDiff(now, after []string) (gone, added []string) {
	pairs := func(args []string) []string {
		var out []string
		for i := 0; i < len(args); i++ {
			a := args[i]
			if strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				a += " " + args[i+1]
				i++
			} else if strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && i+1 < len(args) && args[i+1] == "" {
				a += ` ""`
				i++
			}
			out = append(out, a)
		}
		return out
	}
	n, a := pairs(now), pairs(after)
	for _, x := range n {
		if !slices.Contains(a, x) {
			gone = append(gone, x)
		}
	}
	for _, x := range a {
		if !slices.Contains(n, x) {
			added = append(added, x)
		}
	}
	sort.Strings(gone)
	sort.Strings(added)
	return gone, added
}

// argFlags names istio-iptables' flags in words.
var argFlags = map[string]string{
	"-p": "outbound redirect port", "-z": "inbound redirect port", "-u": "proxy uid", "-g": "proxy gid", "-m": "interception mode",
	"-i": "captured outbound ranges", "-x": "excluded outbound ranges", "-b": "captured inbound ports", "-d": "excluded inbound ports",
	"-o": "excluded outbound ports", "-q": "captured outbound ports", "-k": "excluded interfaces", "-c": "excluded outbound ranges (kube-virt)",
	"--redirect-dns": "DNS redirect", "--capture-all-dns": "DNS capture", "--run-validation": "validation instead of rules",
}

func argsMeaning(gone, added []string) string {
	seen := map[string]bool{}
	var words []string
	for _, a := range append(append([]string(nil), gone...), added...) {
		flag, _, _ := strings.Cut(a, " ")
		flag, _, _ = strings.Cut(flag, "=")
		w, ok := argFlags[flag]
		if !ok {
			w = flag
		}
		if !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	return strings.Join(words, ", ")
}

// Summary is a change list in a few words, for a table cell.
func Summary(changes []Change) string {
	if len(changes) == 0 {
		return "none"
	}
	var parts []string
	for _, c := range changes {
		switch c.Field {
		case "init containers":
			if appInits(c.Now + "," + c.After) {
				// The app's own init containers move against istio-init:
				// whether they run captured, with a proxy, changes.
				parts = append(parts, "init order "+c.Now+"→"+c.After)
			}
			continue // else said by the sidecar kind
		case "image":
			continue // said by release and sidecar kind
		case "sidecar", "sidecar kind", "hold", "revision", "release":
			parts = append(parts, fmt.Sprintf("%s %s→%s", c.Field, c.Now, c.After))
		default:
			parts = append(parts, c.Field)
		}
	}
	if len(parts) == 0 {
		return "image"
	}
	return strings.Join(parts, ", ")
}

// appInits says a list of init container names ("a, b") has one that is
// not Istio's.
func appInits(names string) bool {
	for _, n := range strings.FieldsFunc(names, func(r rune) bool { return r == ',' || r == ' ' || r == '[' || r == ']' }) {
		switch n {
		case "istio-init", "istio-proxy", "istio-validation", "-", "(none)":
		default:
			return true
		}
	}
	return false
}
