package diagnose

import (
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Kinds of check: a static check reads the pod's spec, statuses, events
// and API objects, and runs in every sweep; a live check reads the pod's
// network namespace, and runs with --rules (--connections).
const (
	Static = "static"
	Live   = "live"
)

// Info is a finding that changes no check's status: worth knowing, not a
// fault (istioctl analyze's Info level).
const Info = "info"

// Fact is something a check reads, and what reading it takes.
type Fact struct {
	Name       string `json:"name"`
	Permission string `json:"permission"`
}

// The facts checks read.
var (
	FactPod       = Fact{"the pod: spec, status, labels, annotations", "get/list pods"}
	FactMesh      = Fact{"the injection model: namespace labels, Istio webhooks, injector ConfigMaps; the validating webhooks and policy bindings a refusal names, the other mutators that act on an injected pod", "get namespaces, list mutatingwebhookconfigurations, validatingwebhookconfigurations, validatingadmissionpolicybindings and mutatingadmissionpolicybindings (cluster), list configmaps (all namespaces: the injector ConfigMaps are found by their istio.io/rev label)"}
	FactBackends  = Fact{"the webhooks' Services and endpoints", "get services, list endpointslices (the control plane's namespace)"}
	FactOwner     = Fact{"the owner's FailedCreate events, its pod template and its own labels", "list events, get the owner (replicasets, deployments, jobs, cronjobs, …)"}
	FactEvents    = Fact{"the pod's events", "list events"}
	FactLogs      = Fact{"the log of a failed Istio container", "get pods/log"}
	FactServices  = Fact{"the Services of the pod's namespace", "list services"}
	FactPolicies  = Fact{"the NetworkPolicies of the pod's namespace", "list networkpolicies"}
	FactQuotas    = Fact{"the ResourceQuotas of the pod's namespace, and a dry-run create of the ConfigMap, when it cannot mount one the cluster writes (istio-ca-root-cert, kube-root-ca.crt)", "list resourcequotas, create configmaps (dry run), get validatingadmissionpolicybindings"}
	FactRules     = Fact{"the pod's iptables/nft rules (--rules)", "patch pods/ephemeralcontainers and get pods/log, or a node pod (create and delete pods, get pods/log)"}
	FactSockets   = Fact{"the pod's sockets, /proc/net/tcp* (--rules)", "as --rules"}
	FactConntrack = Fact{"the pod's connection-tracking table (--connections)", "as --rules"}
)

// Spec is one check of the catalogue: what it is, what it reads, its rule
// and its fix, and how it is planted on a test cluster. Run returns its
// findings about one pod (none: it passes, or does not apply).
type Spec struct {
	Code  string `json:"code"`
	Title string `json:"title"`
	Stage string `json:"stage"`
	Kind  string `json:"kind"`
	// Status is what it reports when it fires (fail, warning, unknown or info).
	Status string `json:"status"`
	// Istioctl are the istioctl analyze codes it corresponds to.
	Istioctl []string `json:"istioctl,omitempty"`
	Reads    []Fact   `json:"reads"`
	// Means says what the fault is; Detects how the check sees it; Fixes
	// what its fix does; Source where the fault is known from; Planted how
	// the e2e test plants it.
	Means   string `json:"means"`
	Detects string `json:"detects"`
	Fixes   string `json:"fixes"`
	Source  string `json:"source"`
	Planted string `json:"planted"`

	run func(in *Input) []Finding
}

// Finding is what a check found about one pod: never a pass.
type Finding struct {
	Code     string   `json:"code"`
	Title    string   `json:"title"`
	Stage    string   `json:"stage"`
	Status   string   `json:"status"`
	Evidence string   `json:"evidence"`
	Fix      string   `json:"fix,omitempty"`
	Needs    []string `json:"needs,omitempty"`
	// Mesh names what of the mesh caused a state the platform reports (an
	// annotation and its value, a container the injector added, capture
	// with no proxy), "" when the finding is not put down to the mesh.
	Mesh string `json:"mesh,omitempty"`
	// cause: it explains another finding of the pod (a symptom), and goes
	// before it.
	cause bool
	// predicted: found on the pod a dry run admitted for a manifest not
	// created yet (its stage row is otherwise not checked).
	predicted bool
	// edit is what to change in a manifest not created yet (-f), when the
	// check can say it for the pod's own fields ("" : the Spec's Fixes).
	edit string
	// container is the container a startup hazard is about.
	container string
	// explains are the codes of the symptoms this finding is the cause
	// of, when the pod has them (explainSymptoms).
	explains []string
}

var registry = map[string]*Spec{}

// register adds a check to the catalogue (from its file's init).
func register(s *Spec) {
	if _, dup := registry[s.Code]; dup {
		panic("diagnose: check " + s.Code + " registered twice")
	}
	registry[s.Code] = s
	sorted.list = nil
	sorted.once = sync.Once{}
}

// sorted is the catalogue in causal order, made once (the registry is
// complete once every file's init has run).
var sorted struct {
	once sync.Once
	list []*Spec
}

// Checks is the catalogue in causal order: by stage, then by code.
func Checks() []*Spec {
	sorted.once.Do(func() { sorted.list = sortChecks() })
	return sorted.list
}

func sortChecks() []*Spec {
	out := make([]*Spec, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := stageRank(out[i].Stage), stageRank(out[j].Stage); a != b {
			return a < b
		}
		return out[i].Code < out[j].Code
	})
	return out
}

// Lookup is the check with a code.
func Lookup(code string) (*Spec, bool) {
	s, ok := registry[code]
	return s, ok
}

func stageRank(stage string) int {
	for i, s := range Order {
		if s == stage {
			return i
		}
	}
	return len(Order)
}

// Input is what every check reads about one pod: the facts, and the
// stages' own answers worked out once (the families of checks that report
// the subjects' findings read them).
type Input struct {
	Facts
	// Target is the pod as kubectl names it in a fix ("web-1 -n shop",
	// "deployment/web -n shop").
	Target string

	inj, init, start, capture, conns *stageAnswer
	// hasProxy: 0 not worked out yet, 1 the pod has istio-proxy, 2 not.
	hasProxy int8
	// notRunningMesh is what of the mesh keeps the pod from running, when
	// notRunning found it.
	notRunningMesh string
}

// stageAnswer is a stage's row and its findings, made once.
type stageAnswer struct {
	row      Check
	findings []Finding
}

// injected says the pod has an Istio sidecar (worked out once per pod).
func (in *Input) injected() bool {
	if in.hasProxy == 0 {
		in.hasProxy = 2
		if p := in.Pod; p != nil {
			for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
				for i := range cs {
					if cs[i].Name == istio.ProxyContainer {
						in.hasProxy = 1
					}
				}
			}
		}
	}
	return in.hasProxy == 1
}

// appContainers are the pod's containers but Istio's own.
func appContainers(p *corev1.Pod) []corev1.Container {
	var out []corev1.Container
	for _, c := range p.Spec.Containers {
		if !istio.IsIstioContainer(c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// only keeps the findings of one code.
func only(fs []Finding, code string) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Code == code {
			out = append(out, f)
		}
	}
	return out
}

// quoteList is "a, b and c".
func quoteList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// templateOwner names the object whose template makes the pod, as kubectl
// names it ("deployment/web", "statefulset/db"), "" for a pod no
// controller re-creates: fixes patch it.
func templateOwner(p *corev1.Pod) string {
	for _, ref := range p.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		switch ref.Kind {
		case "ReplicaSet":
			if h := p.Labels["pod-template-hash"]; h != "" && strings.HasSuffix(ref.Name, "-"+h) {
				return "deployment/" + strings.TrimSuffix(ref.Name, "-"+h)
			}
			return "replicaset/" + ref.Name
		case "StatefulSet", "DaemonSet", "Job":
			return strings.ToLower(ref.Kind) + "/" + ref.Name
		}
	}
	return ""
}

// jsonPointer escapes a key for a JSON patch path.
func jsonPointer(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}

// annotationPatch is the kubectl command that removes an annotation from the
// pod's template (or renames it, when to is set); without a controller, the
// pod's manifest is to be changed, and the fix says so.
func annotationPatch(p *corev1.Pod, key, to string) string {
	owner := templateOwner(p)
	if owner == "" {
		op := `{"op":"remove","path":"/metadata/annotations/` + jsonPointer(key) + `"}`
		if to != "" {
			op = `{"op":"move","from":"/metadata/annotations/` + jsonPointer(key) + `","path":"/metadata/annotations/` + jsonPointer(to) + `"}`
		}
		if cmd := recreateBarePod(p, key, "json", "["+op+"]"); cmd != "" {
			return cmd
		}
		if to != "" {
			return "in the pod's manifest, rename the annotation " + key + " to " + to + ", then re-create the pod"
		}
		return "remove the annotation " + key + " from the pod's manifest, then re-create the pod"
	}
	if job, ok := strings.CutPrefix(owner, "job/"); ok {
		change := map[string]*string{key: nil}
		if to != "" {
			v := p.Annotations[key]
			change[to] = &v
		}
		return injection.RecreateJob(job, p.Namespace, change, nil)
	}
	path := "/spec/template/metadata/annotations/"
	op := `{"op":"remove","path":"` + path + jsonPointer(key) + `"}`
	if to != "" {
		op = `{"op":"move","from":"` + path + jsonPointer(key) + `","path":"` + path + jsonPointer(to) + `"}`
	}
	return "kubectl patch " + owner + " -n " + p.Namespace + " --type=json -p '[" + op + "]'" + replacePod(p, owner)
}

// firstLineNote puts a comment on the first line of a fix (the change the
// comment is about; a pod deleted after it keeps its own), after the
// line's own comment when it has one: one "#" a line.
func firstLineNote(fix, note string) string {
	first, rest, more := strings.Cut(fix, "\n")
	sep := "   # "
	if strings.Contains(first, sep) {
		sep = "; " // the line's own comment goes on
	}
	if more {
		return first + sep + note + "\n" + rest
	}
	return first + sep + note
}

// replacePod is the line after a template patch of owner that deletes the
// pod when owner does not replace its pods itself (a ReplicaSet with no
// Deployment: its template is read only for the pods it creates next).
func replacePod(p *corev1.Pod, owner string) string {
	if !strings.HasPrefix(owner, "replicaset/") {
		return ""
	}
	return "\nkubectl delete pod " + p.Name + " -n " + p.Namespace + "   # " + owner + " does not replace its pods when its template changes; it creates this one again from the new template"
}

// specPatch is the kubectl command that merges patch into the pod
// template's spec, or what to change in the manifest of a pod with no
// controller.
func specPatch(p *corev1.Pod, patch, what string) string {
	owner := templateOwner(p)
	if owner == "" {
		if cmd := recreateBarePod(p, "", "merge", `{"spec":`+patch+`}`); cmd != "" {
			return cmd
		}
		return "in the pod's manifest, " + what + ", then re-create the pod"
	}
	return "kubectl patch " + owner + " -n " + p.Namespace + ` -p '{"spec":{"template":{"spec":` + patch + `}}}'` + replacePod(p, owner)
}

// injectorImage is the proxy image the injector sets for the pod (its
// revision's values and the pod's annotations), "" when not known.
func (in *Input) injectorImage() string {
	if in.Injection == nil {
		return ""
	}
	return in.Injection.InjectorImage
}
