package istio

import (
	"slices"
	"sort"
	"strings"
)

//go:generate ../../hack/tools/istio/gen-annotations.sh

// Annotation is one annotation Istio's API declares (the table is in
// annotations_gen.go, generated from istio.io/api by
// hack/tools/istio/gen-annotations.sh).
type Annotation struct {
	Name string
	// Resources are the kinds of resource the annotation belongs on:
	// "Pod", "Service", "Namespace", "Gateway", "GatewayClass", "Ingress",
	// "ServiceEntry", "WorkloadEntry", "AuthorizationPolicy", or "Any" for
	// every kind. Sorted.
	Resources []string
	// Deprecated is Istio's own mark. (istioctl does not report the
	// sidecar.istio.io/inject annotation as deprecated on a resource that
	// also has the label of that name: the caller has the labels.)
	Deprecated bool
	// FeatureStatus is "Alpha", "Beta" or "Stable".
	FeatureStatus string
}

// AnyResource in an Annotation's Resources means every kind of resource.
const AnyResource = "Any"

// ingressClass is the one annotation outside Istio's domain that istioctl's
// annotation analyzer checks: Istio declares and documents it.
const ingressClass = "kubernetes.io/ingress.class"

// IsIstioAnnotation tells whether istioctl's annotation analyzer
// (istio.io/istio pkg/config/analysis/analyzers/annotations) takes name for
// one of Istio's: its prefix (the part before the first "/", or the whole
// name when it has none) ends in "istio.io", or it is
// kubernetes.io/ingress.class. The test is a plain suffix, as istioctl's:
// "sidecar.istio.io/x" and "istio.io/x" are Istio's, and so is
// "myistio.io/x". Only these are reported unknown (IST0108) when
// LookupAnnotation does not know them.
func IsIstioAnnotation(name string) bool {
	if name == ingressClass {
		return true
	}
	prefix, _, _ := strings.Cut(name, "/")
	return strings.HasSuffix(prefix, "istio.io")
}

// exempt are the annotations istioctl's analyzers pass over whatever the
// resource: Istio sets them itself (the injector's status, the gateway
// controller's version, the revision).
var exempt = map[string]bool{
	AnnotationStatus:                      true,
	"gateway.istio.io/controller-version": true,
	LabelRev:                              true,
}

// IsExemptAnnotation tells whether istioctl's annotation analyzers skip
// name altogether (no unknown, misplaced, deprecated or alpha report):
// annotations Istio writes itself.
func IsExemptAnnotation(name string) bool { return exempt[name] }

// LookupAnnotation returns Istio's declaration of the annotation name,
// matched exactly (annotation keys are case-sensitive).
func LookupAnnotation(name string) (Annotation, bool) {
	i := sort.Search(len(annotations), func(i int) bool { return annotations[i].Name >= name })
	if i == len(annotations) || annotations[i].Name != name {
		return Annotation{}, false
	}
	a := annotations[i]
	a.Resources = slices.Clone(a.Resources)
	return a, true
}

// AppliesTo tells whether a belongs on a resource of the given kind ("Pod",
// "Service", …): kind is among its Resources, or they include "Any". The
// comparison is exact, as istioctl's; a kind no annotation names, such as
// "Deployment", gets only the "Any" ones.
func AppliesTo(a Annotation, kind string) bool {
	return slices.Contains(a.Resources, kind) || slices.Contains(a.Resources, AnyResource)
}

// maxSuggestDistance is how far a name may be from a known annotation for
// Closest to suggest it.
const maxSuggestDistance = 2

// Closest returns the known annotation nearest to name, counting edits of
// one character (insertion, deletion, substitution, or the swap of two
// adjacent characters), when it is at most 2 edits away, else "". Of
// several equally near, it returns the first in byte order, so the answer
// never depends on anything but name. A known name is its own closest.
func Closest(name string) string {
	src := []rune(name)
	best, bestDist := "", maxSuggestDistance+1
	for _, a := range annotations { // sorted: the first of a tie wins
		cand := []rune(a.Name)
		if abs(len(cand)-len(src)) >= bestDist {
			continue
		}
		if d := editDistance(src, cand, bestDist-1); d < bestDist {
			best, bestDist = a.Name, d
			if d == 0 {
				break
			}
		}
	}
	return best
}

// editDistance is the optimal-string-alignment distance between a and b
// (Levenshtein's, with a swap of two adjacent characters counted as one
// edit), or limit+1 once it is known to exceed limit.
func editDistance(a, b []rune, limit int) int {
	// Three rows of the table: two back (for swaps), one back, current.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d = min(d, prev2[j-2]+1)
			}
			cur[j] = d
			rowMin = min(rowMin, d)
		}
		if rowMin > limit {
			return limit + 1
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return min(prev[len(b)], limit+1)
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
