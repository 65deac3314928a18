package istio

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestAnnotations(t *testing.T) {
	tests := []struct {
		name       string
		istio      bool   // IsIstioAnnotation
		known      bool   // LookupAnnotation finds it
		closest    string // Closest
		onPod      bool   // AppliesTo Pod (when known)
		onService  bool   // AppliesTo Service (when known)
		deprecated bool
		status     string
	}{
		{name: "sidecar.istio.io/proxyCPU", istio: true, known: true, closest: "sidecar.istio.io/proxyCPU", onPod: true, status: "Alpha"},
		{name: "proxy.istio.io/config", istio: true, known: true, closest: "proxy.istio.io/config", onPod: true, status: "Beta"},
		{name: "traffic.sidecar.istio.io/excludeOutboundPort", istio: true, closest: "traffic.sidecar.istio.io/excludeOutboundPorts"},
		{name: "sidecar.istio.io/injcet", istio: true, closest: "sidecar.istio.io/inject"}, // a swap is one edit
		{name: "sidecar.istio.io/proxyCPULimt", istio: true, closest: "sidecar.istio.io/proxyCPULimit"},
		{name: "sidecar.istio.io/no-such-thing", istio: true},
		{name: "example.com/owner", istio: false},
		{name: "kubectl.kubernetes.io/last-applied-configuration", istio: false},
		{name: "kubernetes.io/ingress.class", istio: true, known: true, closest: "kubernetes.io/ingress.class", status: "Stable"},
		{name: "myistio.io/x", istio: true}, // istioctl's test is a plain suffix
		{name: "istio.io", istio: true},
		{name: "istio.io.example.com/x", istio: false},
		{name: "networking.istio.io/exportTo", istio: true, known: true, closest: "networking.istio.io/exportTo", onService: true, status: "Alpha"},
		{name: "sidecar.istio.io/inject", istio: true, known: true, closest: "sidecar.istio.io/inject", onPod: true, deprecated: true, status: "Beta"},
		{name: "galley.istio.io/analyze-suppress", istio: true, known: true, closest: "galley.istio.io/analyze-suppress", onPod: true, onService: true, status: "Alpha"},
		{name: "", istio: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsIstioAnnotation(tt.name); got != tt.istio {
				t.Errorf("IsIstioAnnotation = %v, want %v", got, tt.istio)
			}
			if got := Closest(tt.name); got != tt.closest {
				t.Errorf("Closest = %q, want %q", got, tt.closest)
			}
			a, ok := LookupAnnotation(tt.name)
			if ok != tt.known {
				t.Fatalf("LookupAnnotation found = %v, want %v", ok, tt.known)
			}
			if !ok {
				return
			}
			if a.Name != tt.name {
				t.Errorf("LookupAnnotation returned %q", a.Name)
			}
			if got := AppliesTo(a, "Pod"); got != tt.onPod {
				t.Errorf("AppliesTo(Pod) = %v, want %v (resources %v)", got, tt.onPod, a.Resources)
			}
			if got := AppliesTo(a, "Service"); got != tt.onService {
				t.Errorf("AppliesTo(Service) = %v, want %v (resources %v)", got, tt.onService, a.Resources)
			}
			if a.Deprecated != tt.deprecated {
				t.Errorf("Deprecated = %v, want %v", a.Deprecated, tt.deprecated)
			}
			if a.FeatureStatus != tt.status {
				t.Errorf("FeatureStatus = %q, want %q", a.FeatureStatus, tt.status)
			}
		})
	}
}

// TestLookupAnnotationCopies: the caller cannot change the table.
func TestLookupAnnotationCopies(t *testing.T) {
	a, _ := LookupAnnotation("sidecar.istio.io/proxyCPU")
	a.Resources[0] = "Service"
	if b, _ := LookupAnnotation("sidecar.istio.io/proxyCPU"); !AppliesTo(b, "Pod") {
		t.Fatal("a change to a returned Annotation reached the table")
	}
}

// TestAnnotationTable: the table is what the lookups assume, and the names
// this package declares as constants are in it.
func TestAnnotationTable(t *testing.T) {
	if len(annotations) < 50 {
		t.Fatalf("only %d annotations", len(annotations))
	}
	onPod := 0
	for i, a := range annotations {
		if i > 0 && annotations[i-1].Name >= a.Name {
			t.Errorf("not sorted or not unique: %q before %q", annotations[i-1].Name, a.Name)
		}
		if !IsIstioAnnotation(a.Name) {
			t.Errorf("%q: not Istio's by IsIstioAnnotation", a.Name)
		}
		if len(a.Resources) == 0 || !slices.IsSorted(a.Resources) {
			t.Errorf("%q: resources %v", a.Name, a.Resources)
		}
		switch a.FeatureStatus {
		case "Alpha", "Beta", "Stable":
		default:
			t.Errorf("%q: feature status %q", a.Name, a.FeatureStatus)
		}
		if AppliesTo(a, "Pod") {
			onPod++
		}
	}
	t.Logf("%d annotations, %d apply to Pod", len(annotations), onPod)
	for _, name := range []string{AnnotationStatus, AnnotationTemplates, AnnotationRedirection,
		AnnotationInterceptionMode, AnnotationNativeSidecar, AnnotationIncludeOutboundPorts,
		AnnotationExcludeInboundPorts, KeyInject, LabelRev} {
		if a, ok := LookupAnnotation(name); !ok || !AppliesTo(a, "Pod") {
			t.Errorf("%s: known %v, on Pod %v", name, ok, ok && AppliesTo(a, "Pod"))
		}
	}
	for name := range exempt {
		if _, ok := LookupAnnotation(name); !ok {
			t.Errorf("exempt %s is not a known annotation", name)
		}
		if !IsExemptAnnotation(name) {
			t.Errorf("IsExemptAnnotation(%s) = false", name)
		}
	}
	if IsExemptAnnotation("sidecar.istio.io/proxyCPU") {
		t.Error("IsExemptAnnotation(sidecar.istio.io/proxyCPU) = true")
	}
}

// TestClosestDeterministic: of known names equally near, the first in byte
// order, on every call.
func TestClosestDeterministic(t *testing.T) {
	// One substitution from both excludeOutboundPorts and includeOutboundPorts.
	const tie = "traffic.sidecar.istio.io/ixcludeOutboundPorts"
	const want = "traffic.sidecar.istio.io/excludeOutboundPorts"
	for range 3 {
		if got := Closest(tie); got != want {
			t.Fatalf("Closest(%q) = %q, want %q", tie, got, want)
		}
	}
	// A nearer name wins over an earlier one: proxyCPULimit is 1 away,
	// proxyCPU (earlier in byte order) 4.
	if got := Closest("sidecar.istio.io/proxyCPULimi"); got != "sidecar.istio.io/proxyCPULimit" {
		t.Errorf("Closest = %q, want sidecar.istio.io/proxyCPULimit", got)
	}
	// Three edits from statsInclusionPrefixes and from statsInclusionSuffixes: none.
	if got := Closest("sidecar.istio.io/statsInclusionXxxfixes"); got != "" {
		t.Errorf("Closest = %q, want none", got)
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "abc", 0},
		{"abc", "ab", 1},
		{"ab", "abc", 1},
		{"abc", "axc", 1},
		{"abc", "acb", 1}, // a swap
		{"abcd", "badc", 2},
		{"kitten", "sitting", 3},
		{"", "abc", 3},
		{"ca", "abc", 3}, // optimal string alignment: not 2
	}
	for _, tt := range tests {
		if got := editDistance([]rune(tt.a), []rune(tt.b), 10); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := editDistance([]rune(tt.a), []rune(tt.b), 1); got != min(tt.want, 2) {
			t.Errorf("editDistance(%q, %q, limit 1) = %d, want %d", tt.a, tt.b, got, min(tt.want, 2))
		}
	}
}

// TestAnnotationsGenerated: annotations_gen.go is what the generator in the
// Istio tools module prints from the istio.io/api version that module pins.
// Skipped only when go cannot build that module offline (no go command, or
// istio.io/api not in the module cache); a generator that fails to build or
// run, or prints something else, fails the test.
func TestAnnotationsGenerated(t *testing.T) {
	tools, err := filepath.Abs(filepath.Join("..", "..", "hack", "tools", "istio"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tools, "annotations", "main.go")); err != nil {
		t.Fatalf("the generator: %v", err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the tools module: %v", err)
	}
	env := append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly -buildvcs=false", "GOWORK=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0")
	run := func(name string, args ...string) ([]byte, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir = tools
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, &cmdError{args: strings.Join(append([]string{name}, args...), " "), err: err, stderr: stderr.String()}
		}
		return out, nil
	}

	// Offline, is istio.io/api in the module cache (GOMODCACHE)?
	out, err := run(goBin, "list", "-m", "-json", "istio.io/api")
	if err != nil {
		t.Skipf("the tools module's graph cannot be loaded offline: %v", err)
	}
	var mod struct{ Path, Version, Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatalf("go list -m istio.io/api: %v", err)
	}
	if mod.Dir == "" {
		cache, _ := run(goBin, "env", "GOMODCACHE")
		t.Skipf("%s@%s is not in the module cache %s", mod.Path, mod.Version, strings.TrimSpace(string(cache)))
	}
	if _, err := os.Stat(filepath.Join(mod.Dir, "annotation")); err != nil {
		t.Skipf("%s@%s in the module cache has no annotation package: %v", mod.Path, mod.Version, err)
	}

	bin := filepath.Join(t.TempDir(), "annotations")
	if _, err := run(goBin, "build", "-o", bin, "./annotations"); err != nil {
		t.Fatalf("building the generator: %v", err)
	}
	want, err := run(bin)
	if err != nil {
		t.Fatalf("running the generator: %v", err)
	}
	got, err := os.ReadFile("annotations_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("annotations_gen.go is stale (istio.io/api@%s): run hack/tools/istio/gen-annotations.sh", mod.Version)
	}
}

type cmdError struct {
	args   string
	err    error
	stderr string
}

func (e *cmdError) Error() string {
	return e.args + ": " + e.err.Error() + ": " + strings.TrimSpace(e.stderr)
}
