package injection

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Ambient mode: the istio-cni node agent, not a webhook, decides whether a
// pod is captured. It reads its ConfigMap (rendered by Istio's istio-cni
// chart: AMBIENT_ENABLED, AMBIENT_ENABLEMENT_SELECTOR, EXCLUDE_NAMESPACES),
// leaves out hostNetwork pods and pods with a sidecar (the
// sidecar.istio.io/status annotation), and enrolls a pod when any of its
// enablement selectors (a pod selector and a namespace selector, both to
// match) matches. Once it has written the pod's in-pod rules and ztunnel on
// the node has taken the pod, it annotates the pod
// ambient.istio.io/redirection=enabled; "pending" when the rules are written
// but ztunnel has not taken it. istio.io/use-waypoint is istiod's (which
// waypoint the pod's traffic goes through); it has no part in capture.
const (
	ambientEnabledKey   = "AMBIENT_ENABLED"
	ambientSelectorKey  = "AMBIENT_ENABLEMENT_SELECTOR"
	ambientExcludeKey   = "EXCLUDE_NAMESPACES"
	ambientVersionKey   = "CURRENT_AGENT_VERSION"
	istioUseWaypoint    = "istio.io/use-waypoint"
	ambientCNIAppLabel  = "k8s-app"
	ambientCNIAppValue  = "istio-cni-node"
	ambientZtunnelLabel = "app"
	ambientZtunnelValue = "ztunnel"
)

// Node agent pods, for the inspector: istio-cni's and ztunnel's.
const (
	AmbientCNISelector     = ambientCNIAppLabel + "=" + ambientCNIAppValue
	AmbientZtunnelSelector = ambientZtunnelLabel + "=" + ambientZtunnelValue
)

// AmbientCapture values: what became of a pod ambient mode enrolls.
const (
	// AmbientCaptured: istio-cni set it up and ztunnel took it.
	AmbientCaptured = "captured"
	// AmbientPending: its rules are written; ztunnel has not taken it.
	AmbientPending = "pending"
	// AmbientNotSetUp: enrolled, but istio-cni has not set it up.
	AmbientNotSetUp = "not set up"
	// AmbientWillCapture: a template whose pods ambient mode will enroll.
	AmbientWillCapture = "will be captured"
)

// ambientConfig is the istio-cni agent's ambient configuration.
type ambientConfig struct {
	source    string // "configmap <namespace>/<name>"
	enabled   bool
	selectors []ambientSelector
	// selectorsFrom, when set, says the selectors are not the ConfigMap's
	// but the agent's built-in rule (istio-cni before 1.27).
	selectorsFrom string
	exclude       []string
	err           string // the selectors could not be read: ambient unknown
}

// where names where the selectors come from, for the rows.
func (c *ambientConfig) where() string { return c.source + c.selectorsFrom }

// ambientBuiltIn is the rule istio-cni's agent had before its enablement
// selectors (1.27): the dataplane-mode label ambient on the pod, or on its
// namespace unless the pod's says none. It is the selectors' default.
const ambientBuiltIn = ambientSelectors

// ambientSelectors is the default of the istio-cni chart's
// ambient.enablementSelectors, as it renders them.
const ambientSelectors = `- podSelector:
    matchLabels:
      istio.io/dataplane-mode: ambient
- namespaceSelector:
    matchLabels:
      istio.io/dataplane-mode: ambient
  podSelector:
    matchExpressions:
    - key: istio.io/dataplane-mode
      operator: NotIn
      values:
      - none
`

type ambientSelector struct {
	pod, ns         labels.Selector
	podText, nsText string
}

// AmbientConfigMap is istio-cni's ConfigMap among the facts' ConfigMaps
// (the one with AMBIENT_ENABLED; of several, an enabled one first, then by
// "namespace/name"), and its key; nil when there is none.
func AmbientConfigMap(f *ClusterFacts) (*corev1.ConfigMap, string) {
	var keys []string
	for k, cm := range f.ConfigMaps {
		if IsAmbientConfig(cm) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		ei, ej := f.ConfigMaps[keys[i]].Data[ambientEnabledKey] == "true", f.ConfigMaps[keys[j]].Data[ambientEnabledKey] == "true"
		if ei != ej {
			return ei
		}
		return keys[i] < keys[j]
	})
	if len(keys) == 0 {
		return nil, ""
	}
	return f.ConfigMaps[keys[0]], keys[0]
}

// ambientConfigOf is istio-cni's configuration (parseAmbientConfig), read
// once per facts.
func ambientConfigOf(f *ClusterFacts) (*ambientConfig, string) {
	m := istioModelOf(f)
	return m.ambient, m.ambientUnknown
}

// parseAmbientConfig reads istio-cni's ConfigMap (AmbientConfigMap). It
// returns nil when there is none, and why when the ConfigMaps could not be
// read.
func parseAmbientConfig(f *ClusterFacts) (*ambientConfig, string) {
	cm, key := AmbientConfigMap(f)
	if cm == nil {
		if why, unknown := f.Unknown[FactConfigMaps]; unknown {
			return nil, why
		}
		return nil, ""
	}
	c := &ambientConfig{source: "configmap " + key, enabled: cm.Data[ambientEnabledKey] == "true"}
	for _, ns := range strings.Split(cm.Data[ambientExcludeKey], ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			c.exclude = append(c.exclude, ns)
		}
	}
	selectors, set := cm.Data[ambientSelectorKey]
	if !set {
		// No selectors: the agent's release decides what that means (its
		// chart renders the key from 1.27 on).
		v, known := istio.ParseVersion(cm.Data[ambientVersionKey])
		rel, modelled := istio.Defaults(v)
		release := "istio-cni " + quote(cm.Data[ambientVersionKey]) + " (its " + ambientVersionKey + ")"
		switch {
		case !known:
			c.err = "it has no " + ambientSelectorKey + ", and what that means depends on istio-cni's release (before 1.27 the dataplane-mode labels enroll pods; from 1.27 no selector enrolls none), which its " + ambientVersionKey + " " + quote(cm.Data[ambientVersionKey]) + " does not name"
			return c, ""
		case !modelled || rel.AmbientEnrollment == "":
			c.err = "it has no " + ambientSelectorKey + ", and " + release + " is a release whose ambient mode kubectl-mesh does not model"
			return c, ""
		case rel.AmbientEnrollment == istio.AmbientByLabels:
			selectors = ambientBuiltIn
			c.selectorsFrom = " (no " + ambientSelectorKey + ": " + release + " enrolls by the dataplane-mode labels)"
		default:
			c.selectorsFrom = " (no " + ambientSelectorKey + ": " + release + " enrolls no pod without selectors)"
		}
	}
	var raw []struct {
		PodSelector       *metav1.LabelSelector `json:"podSelector"`
		NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
	}
	if err := yaml.Unmarshal([]byte(selectors), &raw); err != nil {
		c.err = "its " + ambientSelectorKey + " cannot be read: " + err.Error()
		return c, ""
	}
	compile := func(s *metav1.LabelSelector) (labels.Selector, string, error) {
		if s == nil {
			return labels.Everything(), "any", nil // an absent selector matches everything
		}
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			return nil, "", err
		}
		if sel.Empty() {
			return sel, "any", nil
		}
		return sel, sel.String(), nil
	}
	for _, r := range raw {
		var s ambientSelector
		var err error
		if s.pod, s.podText, err = compile(r.PodSelector); err == nil {
			s.ns, s.nsText, err = compile(r.NamespaceSelector)
		}
		if err != nil {
			c.err = "its " + ambientSelectorKey + " has a selector that cannot be read: " + err.Error()
			return c, ""
		}
		c.selectors = append(c.selectors, s)
	}
	return c, ""
}

// ambientAgents are the istio-cni and ztunnel pods on a node.
type ambientAgents struct {
	cni, ztunnel *corev1.Pod
}

func ambientAgentsOn(f *ClusterFacts, node string) ambientAgents {
	var a ambientAgents
	for i := range f.AmbientAgents {
		p := &f.AmbientAgents[i]
		if p.Spec.NodeName != node || node == "" {
			continue
		}
		switch {
		case p.Labels[ambientCNIAppLabel] == ambientCNIAppValue && (a.cni == nil || podReady(p)):
			a.cni = p
		case p.Labels[ambientZtunnelLabel] == ambientZtunnelValue && (a.ztunnel == nil || podReady(p)):
			a.ztunnel = p
		}
	}
	return a
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// agentState is "pod <namespace>/<name> ready" or "… not ready (<phase>)".
func agentState(p *corev1.Pod) string {
	if podReady(p) {
		return "pod " + p.Namespace + "/" + p.Name + " ready"
	}
	return "pod " + p.Namespace + "/" + p.Name + " not ready (" + string(p.Status.Phase) + ")"
}

// ambientOutcome is what ambient mode makes of a workload.
type ambientOutcome struct {
	// enrolled: istio-cni's selectors take the pod (and nothing leaves it out).
	enrolled bool
	// asked: the dataplane-mode labels ask for ambient (whether or not it is installed).
	asked bool
	// unknown names what could not be read that enrollment depends on;
	// why it could not be read, when a permission is why.
	unknown, unread string
	// excluded says what keeps a pod the labels ask for out.
	excluded string
	// capture is one of the Ambient* states for an enrolled workload.
	capture string
	// why explains capture; fix is what sets it right ("" when nothing or unknown).
	why, fix string
}

// explainAmbient adds the ambient factors of w in the node agent's order and
// says what ambient mode makes of it. sidecar is whether the pod has (a
// live pod) or would get (a template) a sidecar.
func explainAmbient(f *ClusterFacts, w *Workload, nsLabels map[string]string, sidecar bool, add func(factor, value, effect, source string)) ambientOutcome {
	var out ambientOutcome
	_, nsHas := nsLabels[istio.LabelDataplaneMode]
	podMode, podHas := w.Labels[istio.LabelDataplaneMode]
	out.asked = podMode == "ambient" || nsLabels[istio.LabelDataplaneMode] == "ambient" && podMode != "none"
	cfg, cfgUnknown := ambientConfigOf(f)
	if cfg == nil && cfgUnknown == "" && !nsHas && !podHas {
		return out // no ambient here, nor asked for
	}
	podSource := "pod label"
	if w.Pod == nil {
		podSource = "template label"
	}
	// The namespace's label is among the namespace's factors already.
	if podHas {
		add(podSource+" istio.io/dataplane-mode", quote(podMode), EffectInfoOnly, "overrides the namespace's")
	}
	if v, ok := w.Labels[istioUseWaypoint]; ok {
		add(podSource+" istio.io/use-waypoint", quote(v), EffectInfoOnly, "istiod sends its traffic through that waypoint; no part in capture")
	}
	switch {
	case cfgUnknown != "":
		if out.asked {
			out.unknown, out.unread = "istio-cni's ConfigMap ("+cfgUnknown+")", cfgUnknown
			add("istio-cni ambient configuration", "unknown", EffectUnknown, cfgUnknown)
		}
		return out
	case cfg == nil:
		if out.asked {
			out.excluded = "no istio-cni with ambient mode is installed (no ConfigMap with " + ambientEnabledKey + ")"
			add("istio-cni ambient configuration", "(none found)", EffectWarning, "no ConfigMap with "+ambientEnabledKey+": nothing captures the pod")
		}
		return out
	case !cfg.enabled:
		if out.asked {
			out.excluded = "istio-cni's ambient mode is off (" + ambientEnabledKey + "=" + quote(f.ConfigMaps[strings.TrimPrefix(cfg.source, "configmap ")].Data[ambientEnabledKey]) + " in " + cfg.source + ")"
			add(ambientEnabledKey, "false", EffectWarning, cfg.source+": nothing captures the pod")
		}
		return out
	case cfg.err != "":
		out.unknown = cfg.source + ": " + cfg.err
		add("ambient enablement selectors", "unknown", EffectUnknown, cfg.source+": "+cfg.err)
		return out
	}
	for _, ns := range cfg.exclude {
		if ns == w.Namespace {
			out.excluded = "istio-cni leaves namespace " + ns + " out (" + ambientExcludeKey + " in " + cfg.source + ")"
			add(ambientExcludeKey, strings.Join(cfg.exclude, ","), effectIf(out.asked, EffectBlocks), cfg.source)
			return out
		}
	}
	if w.Spec.HostNetwork {
		out.excluded = "a hostNetwork pod has no network namespace of its own to capture in"
		if out.asked {
			add("hostNetwork", "true", EffectBlocks, "istio-cni never captures a hostNetwork pod")
		}
		return out
	}
	if sidecar {
		out.excluded = "a pod with a sidecar is not captured by ztunnel"
		if out.asked {
			what := "would be injected with a sidecar"
			if w.Pod != nil {
				what = "has a sidecar (sidecar.istio.io/status)"
			}
			add("sidecar", what, EffectBlocks, "istio-cni leaves pods with a sidecar to it")
		}
		return out
	}
	var matched *ambientSelector
	for i := range cfg.selectors {
		s := &cfg.selectors[i]
		if s.pod.Matches(labels.Set(w.Labels)) && s.ns.Matches(labels.Set(nsLabels)) {
			matched = s
			break
		}
	}
	if matched == nil {
		if out.asked || len(cfg.selectors) > 0 && (nsHas || podHas) {
			texts := make([]string, 0, len(cfg.selectors))
			for _, s := range cfg.selectors {
				texts = append(texts, "pod "+s.podText+" in namespace "+s.nsText)
			}
			add("ambient enablement selectors", "no match", effectIf(out.asked, EffectBlocks), cfg.where()+": "+strings.Join(texts, "; "))
			if out.asked {
				out.excluded = "none of istio-cni's enablement selectors matches it (" + cfg.where() + ")"
			}
		}
		return out
	}
	out.enrolled = true
	add("ambient enablement selector", "pod "+matched.podText+" in namespace "+matched.nsText, EffectInject, cfg.where()+": istio-cni enrolls the pod")
	if w.Pod == nil {
		out.capture, out.why = AmbientWillCapture, "istio-cni enrolls its pods ("+cfg.source+")"
		return out
	}
	agents := ambientAgentsOn(f, w.Pod.Spec.NodeName)
	_, agentsUnknown := f.Unknown[FactAmbientAgents]
	agentFactor := func(name string, p *corev1.Pod, effect string) {
		switch {
		case agentsUnknown:
			add(name+" on node "+dash(w.Pod.Spec.NodeName), "unknown", EffectUnknown, f.Unknown[FactAmbientAgents])
		case w.Pod.Spec.NodeName == "":
			add(name+" on node", "(not scheduled)", EffectInfoOnly, "the pod is on no node yet")
		case p == nil:
			add(name+" on node "+w.Pod.Spec.NodeName, "(none)", effect, "no "+name+" pod runs there")
		case !podReady(p):
			add(name+" on node "+w.Pod.Spec.NodeName, agentState(p), effect, "pod status")
		default:
			add(name+" on node "+w.Pod.Spec.NodeName, agentState(p), EffectInfoOnly, "pod status")
		}
	}
	v, annotated := w.Pod.Annotations[istio.AnnotationRedirection]
	switch {
	case v == "enabled":
		out.capture = AmbientCaptured
		out.why = "istio-cni set it up and ztunnel took it (ambient.istio.io/redirection=enabled)"
		add(istio.AnnotationRedirection, quote(v), EffectInject, "pod annotation istio-cni writes once ztunnel has taken the pod")
		agentFactor("ztunnel", agents.ztunnel, EffectWarning)
		return out
	case v == "pending":
		out.capture = AmbientPending
		add(istio.AnnotationRedirection, quote(v), EffectWarning, "pod annotation: istio-cni wrote the pod's rules, ztunnel has not taken it")
		agentFactor("istio-cni", agents.cni, EffectInfoOnly)
		agentFactor("ztunnel", agents.ztunnel, EffectBlocks)
		out.why = "istio-cni wrote the pod's rules, but ztunnel on its node has not taken it (ambient.istio.io/redirection=pending)"
		if !agentsUnknown {
			out.notRunning("ztunnel", AmbientZtunnelSelector, agents.ztunnel, w.Pod.Spec.NodeName, "ztunnel must be ready to take the pod; istio-cni retries by itself")
		}
		return out
	}
	if annotated {
		add(istio.AnnotationRedirection, quote(v), EffectWarning, "pod annotation: a value istio-cni does not write")
	} else {
		add(istio.AnnotationRedirection, "(not set)", EffectWarning, "pod annotation istio-cni writes when it has set the pod up")
	}
	out.capture = AmbientNotSetUp
	agentFactor("istio-cni", agents.cni, EffectBlocks)
	agentFactor("ztunnel", agents.ztunnel, EffectWarning)
	out.why = "ambient mode enrolls it, but istio-cni has not set it up (no ambient.istio.io/redirection=enabled)"
	if !agentsUnknown && w.Pod.Spec.NodeName != "" &&
		!out.notRunning("istio-cni", AmbientCNISelector, agents.cni, w.Pod.Spec.NodeName, "once istio-cni is ready it sets the pod up by itself") {
		out.why += "; istio-cni on its node is ready, so setting it up failed (its logs say why: kubectl logs " + agents.cni.Name + " -n " + agents.cni.Namespace + ")"
		out.fix = restartCommand(w)
	}
	return out
}

// notRunning adds to the outcome why the node agent called name (its pods:
// selector) is missing or not ready on node, and the command that shows it
// (whose comment is then); false when it runs and is ready.
func (out *ambientOutcome) notRunning(name, selector string, p *corev1.Pod, node, then string) bool {
	switch {
	case p == nil:
		out.why += "; no " + name + " pod runs on node " + node
		out.fix = "kubectl get daemonset -A -l " + selector + "   # " + name + " must run on node " + node
	case !podReady(p):
		out.why += "; " + name + " " + agentState(p)
		out.fix = fmt.Sprintf("kubectl describe pod %s -n %s   # %s", p.Name, p.Namespace, then)
	default:
		return false
	}
	return true
}

func effectIf(cond bool, e string) string {
	if cond {
		return e
	}
	return EffectInfoOnly
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// AmbientMayCapture tells whether istio-cni's ambient mode is on, or its
// configuration unknown: then an enrolled pod's answer names the node
// agents on its node (AmbientAgents is needed, and answers depend on the
// pod's node).
func AmbientMayCapture(f *ClusterFacts) bool {
	// Not through the cached model: the inspector asks while it still
	// fills the facts.
	cfg, unknown := parseAmbientConfig(f)
	return unknown != "" || cfg != nil && cfg.enabled
}

// IsAmbientConfig tells whether cm is istio-cni's configuration (it has AMBIENT_ENABLED).
func IsAmbientConfig(cm *corev1.ConfigMap) bool {
	_, ok := cm.Data[ambientEnabledKey]
	return ok
}
