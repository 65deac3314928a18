package injection

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Istio's labels and annotations that decide injection are named in
// internal/istio.

// istioIgnoredNamespaces are never injected, whatever the labels say (istiod's
// built-in list, the same from Istio 1.20 on).
var istioIgnoredNamespaces = istio.IgnoredNamespaces

// Istio is Istio's sidecar injection model: the apiserver's choice of webhook
// from Istio's selectors, then istiod's own checks.
type Istio struct{}

var _ Mesh = Istio{}

// Name implements Mesh.
func (Istio) Name() string { return "istio" }

// ProxyContainer implements Mesh.
func (Istio) ProxyContainer() string { return istio.ProxyContainer }

// Installed implements Mesh: any MutatingWebhookConfiguration with an Istio webhook.
func (Istio) Installed(f *ClusterFacts) bool {
	for _, c := range f.Webhooks {
		for _, w := range c.Webhooks {
			if isIstioWebhook(w.Name) {
				return true
			}
		}
	}
	return false
}

// isIstioWebhook tells Istio's injection webhooks (…sidecar-injector.istio.io).
func isIstioWebhook(name string) bool { return strings.HasSuffix(name, "sidecar-injector.istio.io") }

// istioRevision is one revision's injector, from its ConfigMap.
type istioRevision struct {
	name          string
	configMap     string // namespace/name
	config        istioInjectorConfig
	values        istioInjectorValues
	version       string
	versionSource string
	minor         int // Istio 1.<minor>; 0 when unknown
	err           error
	// policyGuessed: the config could not be read, its policy is assumed.
	policyGuessed bool
	// configUnknown, when set, says why the revision's configuration could
	// not be read at all (the user may not read its ConfigMap).
	configUnknown string
}

type istioInjectorConfig struct {
	Policy               string                 `json:"policy"`
	NeverInjectSelector  []metav1.LabelSelector `json:"neverInjectSelector"`
	AlwaysInjectSelector []metav1.LabelSelector `json:"alwaysInjectSelector"`
	DefaultTemplates     []string               `json:"defaultTemplates"`
	Templates            map[string]string      `json:"templates"`
	Aliases              map[string][]string    `json:"aliases"`
}

type istioInjectorValues struct {
	Revision string `json:"revision"`
	Global   struct {
		Hub   string `json:"hub"`
		Tag   any    `json:"tag"`
		Proxy struct {
			HoldApplicationUntilProxyStarts bool `json:"holdApplicationUntilProxyStarts"`
		} `json:"proxy"`
	} `json:"global"`
	Pilot struct {
		CNI struct {
			Enabled bool `json:"enabled"`
		} `json:"cni"`
		Env map[string]any `json:"env"`
	} `json:"pilot"`
	SidecarInjectorWebhook struct {
		EnableNamespacesByDefault bool `json:"enableNamespacesByDefault"`
	} `json:"sidecarInjectorWebhook"`
}

var istioMinorRE = regexp.MustCompile(`^v?1\.(\d+)(\.|$|-)`)

func istioMinor(v string) int {
	m := istioMinorRE.FindStringSubmatch(v)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// istioRevisions reads every injector ConfigMap (istio-sidecar-injector and
// istio-sidecar-injector-<revision>) and the istiod Deployments' images.
func istioRevisions(f *ClusterFacts) map[string]*istioRevision {
	revs := map[string]*istioRevision{}
	keys := make([]string, 0, len(f.ConfigMaps))
	for k := range f.ConfigMaps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cm := f.ConfigMaps[k]
		if cm.Name != istio.InjectorConfigMap && !strings.HasPrefix(cm.Name, istio.InjectorConfigMap+"-") {
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(cm.Name, istio.InjectorConfigMap), "-")
		if name == "" {
			name = "default"
		}
		if _, dup := revs[name]; dup {
			continue
		}
		r := &istioRevision{name: name, configMap: k}
		if err := yaml.Unmarshal([]byte(cm.Data["config"]), &r.config); err != nil {
			r.err = fmt.Errorf("key config: %v", err)
		}
		if v := cm.Data["values"]; v != "" {
			if err := json.Unmarshal([]byte(v), &r.values); err != nil && r.err == nil {
				r.err = fmt.Errorf("key values: %v", err)
			}
		}
		// A config without a policy is not "enabled": istiod reads it as ""
		// and never injects (see injectRequired). One that cannot be read at
		// all says nothing about its policy: "enabled" is assumed, and the
		// policy row says it is a guess.
		if r.err != nil && r.config.Policy == "" {
			r.config.Policy, r.policyGuessed = "enabled", true
		}
		if r.values.Global.Tag != nil {
			r.version = fmt.Sprint(r.values.Global.Tag)
			r.versionSource = "ConfigMap " + k + " values.global.tag"
		}
		revs[name] = r
	}
	// The istiod image is the better witness of the version: prefer it.
	for _, d := range f.ControlPlanes {
		rev := d.Labels[istio.LabelRev]
		if rev == "" {
			rev = "default"
		}
		r := revs[rev]
		if r == nil {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if i := strings.LastIndex(c.Image, ":"); i > 0 && !strings.Contains(c.Image[i:], "/") && istioMinor(c.Image[i+1:]) > 0 {
				r.version = c.Image[i+1:]
				r.versionSource = "Deployment " + d.Namespace + "/" + d.Name + " image " + c.Image
			}
		}
	}
	for _, r := range revs {
		r.minor = istioMinor(r.version)
	}
	return revs
}

// webhookEval is one Istio webhook evaluated against a namespace and a pod.
type webhookEval struct {
	config, name string
	revision     string
	tag          string
	deactivated  bool
	rulesMatch   bool
	nsMatch      bool
	objMatch     bool
	nsSelector   string
	objSelector  string
	conditions   bool
	failClosed   bool
	backend      string // where it sends the pod
	backendIssue string // "" when the backend looks fine or cannot be checked
	backendNote  string
	// backendUnknown says why the backend's readiness could not be read.
	backendUnknown string
	// nsUnknown: the namespace's labels could not be read and the
	// namespaceSelector needs them, so nsMatch means nothing.
	nsUnknown bool
}

func (w *webhookEval) fullName() string { return w.config + "/" + w.name }
func (w *webhookEval) matches() bool {
	return !w.deactivated && w.rulesMatch && w.nsMatch && w.objMatch && !w.nsUnknown
}

// mayMatch: whether it matches depends on namespace labels that could not be read.
func (w *webhookEval) mayMatch() bool {
	return !w.deactivated && w.rulesMatch && w.objMatch && w.nsUnknown
}

func selectorString(s *metav1.LabelSelector) (labels.Selector, string) {
	if s == nil {
		return labels.Everything(), "(none: matches all)"
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return labels.Nothing(), "invalid: " + err.Error()
	}
	if sel.Empty() {
		return sel, "{} (matches all)"
	}
	return sel, sel.String()
}

func isDeactivated(s *metav1.LabelSelector) bool {
	return s != nil && s.MatchLabels[istio.LabelDeactivated] != ""
}

func rulesCoverPodCreate(rules []admissionregistrationv1.RuleWithOperations) bool {
	has := func(list []string, want ...string) bool {
		for _, v := range list {
			for _, w := range want {
				if v == w {
					return true
				}
			}
		}
		return false
	}
	for _, r := range rules {
		if has(stringsOf(r.Operations), "CREATE", "*") && has(r.APIGroups, "", "*") && has(r.APIVersions, "v1", "*") &&
			has(r.Resources, "pods", "*", "*/*") && (r.Scope == nil || *r.Scope != admissionregistrationv1.ClusterScope) {
			return true
		}
	}
	return false
}

func stringsOf(ops []admissionregistrationv1.OperationType) []string {
	out := make([]string, len(ops))
	for i, o := range ops {
		out[i] = string(o)
	}
	return out
}

// istioModel is what Explain derives from the cluster facts once, not once
// per pod: the injector revisions and the Istio webhooks with their
// selectors compiled, in the order the apiserver calls them.
type istioModel struct {
	revisions map[string]*istioRevision
	webhooks  []compiledWebhook
	// ambient is istio-cni's configuration (nil: none; ambientUnknown: why
	// it could not be read).
	ambient        *ambientConfig
	ambientUnknown string
}

type compiledWebhook struct {
	webhookEval
	nsSel, objSel labels.Selector
}

func istioModelOf(f *ClusterFacts) *istioModel {
	if f.istio != nil {
		return f.istio
	}
	m := &istioModel{revisions: istioRevisions(f)}
	m.ambient, m.ambientUnknown = parseAmbientConfig(f)
	configs := append([]admissionregistrationv1.MutatingWebhookConfiguration(nil), f.Webhooks...)
	sort.Slice(configs, func(i, j int) bool { return configs[i].Name < configs[j].Name })
	for _, c := range configs {
		for _, w := range c.Webhooks {
			if !isIstioWebhook(w.Name) {
				continue
			}
			e := compiledWebhook{webhookEval: webhookEval{config: c.Name, name: w.Name, tag: c.Labels[istio.LabelTag]}}
			e.revision = c.Labels[istio.LabelRev]
			if e.revision == "" && w.ClientConfig.Service != nil {
				e.revision = strings.TrimPrefix(strings.TrimPrefix(w.ClientConfig.Service.Name, "istiod"), "-")
			}
			if e.revision == "" {
				e.revision = "default"
			}
			e.deactivated = isDeactivated(w.NamespaceSelector) || isDeactivated(w.ObjectSelector)
			e.rulesMatch = rulesCoverPodCreate(w.Rules)
			e.nsSel, e.nsSelector = selectorString(w.NamespaceSelector)
			e.objSel, e.objSelector = selectorString(w.ObjectSelector)
			e.conditions = len(w.MatchConditions) > 0
			e.failClosed = w.FailurePolicy == nil || *w.FailurePolicy == admissionregistrationv1.Fail
			checkBackend(f, &e.webhookEval, w.ClientConfig)
			m.webhooks = append(m.webhooks, e)
		}
	}
	f.istio = m
	return m
}

// evaluateWebhooks evaluates every Istio webhook against a namespace's and a
// pod's labels, in the order the apiserver calls them (configurations by
// name, webhooks in order). nsKnown false: the namespace's labels could not be
// read, and a webhook whose namespaceSelector needs them matches or not
// depending on them.
func evaluateWebhooks(f *ClusterFacts, nsLabels, podLabels map[string]string, nsKnown bool) []*webhookEval {
	m := istioModelOf(f)
	out := make([]*webhookEval, len(m.webhooks))
	for i := range m.webhooks {
		e := m.webhooks[i].webhookEval
		e.nsMatch = m.webhooks[i].nsSel.Matches(labels.Set(nsLabels))
		e.nsUnknown = !nsKnown && !m.webhooks[i].nsSel.Empty()
		e.objMatch = m.webhooks[i].objSel.Matches(labels.Set(podLabels))
		out[i] = &e
	}
	return out
}

func checkBackend(f *ClusterFacts, e *webhookEval, cc admissionregistrationv1.WebhookClientConfig) {
	if cc.URL != nil {
		e.backend = "url " + *cc.URL
		e.backendNote = "called by the apiserver directly; not checked from here"
		return
	}
	if cc.Service == nil {
		e.backendIssue = "the webhook names neither a service nor a URL"
		return
	}
	key := cc.Service.Namespace + "/" + cc.Service.Name
	e.backend = "service " + key
	if why, unknown := f.Unknown[FactServices]; unknown {
		e.backendNote, e.backendUnknown = "unknown: "+why, why
		return
	}
	if f.Services[key] == nil {
		e.backendIssue = "service " + key + " does not exist"
		return
	}
	if why, unknown := f.Unknown[FactEndpointSlices]; unknown {
		e.backendNote, e.backendUnknown = "unknown: "+why, why
		return
	}
	ready := 0
	for _, s := range f.EndpointSlices[key] {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready += len(ep.Addresses)
			}
		}
	}
	if ready == 0 {
		e.backendIssue = "service " + key + " has no ready endpoints"
		return
	}
	e.backendNote = pluralize(ready, "ready endpoint", "ready endpoints")
}

func pluralize(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func quote(s string) string { return strconv.Quote(s) }

func valueOrUnset(m map[string]string, k string) string {
	if v, ok := m[k]; ok {
		return quote(v)
	}
	return "(not set)"
}

// injectionLabels renders the namespace labels that matter for injection.
func injectionLabels(l map[string]string) string {
	var parts []string
	for _, k := range []string{istio.LabelInjection, istio.LabelRev, istio.LabelDataplaneMode} {
		if v, ok := l[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

// istioDecision is injectRequired's outcome for one revision.
type istioDecision struct {
	inject  bool
	reason  string
	factors []Factor
	// unknown, when set, says why the decision could not be made: the
	// configuration it depends on could not be read.
	unknown string
}

// injectRequired replays istiod's own checks (pkg/kube/inject injectRequired)
// for revision r, in its order: hostNetwork, ignored namespaces, the pod's
// sidecar.istio.io/inject (label over annotation, parsed per version), the
// never/always selectors, the policy.
func injectRequired(r *istioRevision, w *Workload) (d istioDecision) {
	src := "ConfigMap " + r.configMap
	add := func(factor, value, effect, source string) {
		d.factors = append(d.factors, Factor{Factor: factor, Value: value, Effect: effect, Source: source})
	}
	if w.Spec.HostNetwork {
		add("hostNetwork", "true", EffectBlocks, "pod spec.hostNetwork (istiod never injects host-network pods)")
		d.reason = "hostNetwork pod: istiod never injects those"
		return d
	}
	add("hostNetwork", "false", EffectNone, "pod spec.hostNetwork")
	for _, ns := range istioIgnoredNamespaces {
		if w.Namespace == ns {
			add("ignored namespace", quote(ns), EffectBlocks, "istiod built-in list: "+strings.Join(istioIgnoredNamespaces, ", "))
			d.reason = "namespace " + ns + " is one istiod never injects"
			return d
		}
	}

	value, from, present := "", "", false
	if v, ok := w.Annotations[istio.KeyInject]; ok {
		value, from, present = v, "annotation", true
	}
	if v, ok := w.Labels[istio.KeyInject]; ok {
		if present && v != value {
			add("sidecar.istio.io/inject annotation", quote(value), EffectNone, "pod annotation (the label wins over it)")
		}
		value, from, present = v, "label", true
	}
	strict := r.minor == 0 || r.minor >= 27
	rule := "Istio 1.27+ rule: only \"true\" and \"false\"; anything else means the default policy"
	if !strict {
		rule = fmt.Sprintf("Istio 1.%d rule: y/yes/true/on inject, any other non-empty value means do not inject", r.minor)
	}
	if r.minor == 0 {
		rule += " (Istio version unknown: assumed 1.27+)"
	} else {
		rule += " (version " + r.version + " from " + r.versionSource + ")"
	}
	useDefault, inject := true, false
	defer func() {
		// Only an explicit "no" from the pod is decided without the
		// configuration: everything else reads the policy or the selectors.
		if r.configUnknown != "" && (useDefault || inject) {
			d.inject, d.reason, d.unknown = false, "", r.configUnknown
			kept := d.factors[:0]
			for _, f := range d.factors {
				switch f.Factor {
				case "policy", "neverInjectSelector", "alwaysInjectSelector":
				default:
					kept = append(kept, f)
				}
			}
			d.factors = append(kept, Factor{Factor: "injector configuration", Value: "unknown", Effect: EffectUnknown,
				Source: "policy, neverInjectSelector and alwaysInjectSelector of revision " + quote(r.name) + ": " + r.configUnknown})
		}
	}()
	if present {
		switch {
		case strict && value == "true":
			useDefault, inject = false, true
		case strict && value == "false":
			useDefault = false
		case strict:
		default:
			switch strings.ToLower(value) {
			case "y", "yes", "true", "on":
				useDefault, inject = false, true
			case "":
			default:
				useDefault = false
			}
		}
		effect := EffectNone
		switch {
		case !useDefault && inject:
			effect = EffectInject
		case !useDefault:
			effect = EffectSkip
		}
		note := "read by istiod: " + rule
		if useDefault && value != "" {
			note = "invalid value, ignored: " + rule
			effect = EffectWarning
		}
		add("sidecar.istio.io/inject (injector)", from+" "+quote(value), effect, "pod "+from+"; "+note)
		if !useDefault {
			if inject {
				d.inject, d.reason = true, fmt.Sprintf("pod %s sidecar.istio.io/inject=%q", from, value)
			} else {
				d.reason = fmt.Sprintf("pod %s sidecar.istio.io/inject=%q", from, value)
			}
		}
	}

	podLabels := labels.Set(w.Labels)
	matchAny := func(sels []metav1.LabelSelector) string {
		for _, s := range sels {
			sel, err := metav1.LabelSelectorAsSelector(&s)
			if err == nil && !sel.Empty() && sel.Matches(podLabels) {
				return sel.String()
			}
		}
		return ""
	}
	never, always := matchAny(r.config.NeverInjectSelector), matchAny(r.config.AlwaysInjectSelector)
	selRow := func(name, matched string, n int, effect string) {
		switch {
		case n == 0:
			add(name, "(none configured)", EffectNone, src+" config."+name)
		case matched == "":
			add(name, fmt.Sprintf("%d configured, none matches", n), EffectNone, src+" config."+name)
		default:
			add(name, quote(matched)+" matches the pod", effect, src+" config."+name)
		}
	}
	if r.policyGuessed {
		src += " (unreadable: policy unknown, \"enabled\" assumed)"
	}
	if r.config.Policy != "enabled" && r.config.Policy != "disabled" {
		// istiod looks at the policy last, but any value other than these two
		// (a missing one included) turns injection off for every pod, whatever
		// the pod asks for and whatever the selectors say.
		selRow("neverInjectSelector", never, len(r.config.NeverInjectSelector), EffectNone)
		selRow("alwaysInjectSelector", always, len(r.config.AlwaysInjectSelector), EffectNone)
		shown := quote(r.config.Policy)
		if r.config.Policy == "" {
			shown = "(not set)"
		}
		add("policy", shown, EffectBlocks, src+" config.policy (not \"enabled\" or \"disabled\": istiod never injects, even a pod that asks for it)")
		d.inject, d.reason = false, "injector policy "+shown+" is neither enabled nor disabled: istiod never injects"
		return d
	}
	if !useDefault {
		selRow("neverInjectSelector", never, len(r.config.NeverInjectSelector), EffectNone)
		selRow("alwaysInjectSelector", always, len(r.config.AlwaysInjectSelector), EffectNone)
		add("policy", quote(r.config.Policy), EffectNone, src+" config.policy (the pod's explicit value decides)")
		return d
	}
	if never != "" {
		selRow("neverInjectSelector", never, len(r.config.NeverInjectSelector), EffectSkip)
		selRow("alwaysInjectSelector", always, len(r.config.AlwaysInjectSelector), EffectNone)
		add("policy", quote(r.config.Policy), EffectNone, src+" config.policy")
		d.reason = "the injector's neverInjectSelector " + never + " matches the pod"
		return d
	}
	selRow("neverInjectSelector", never, len(r.config.NeverInjectSelector), EffectNone)
	if always != "" {
		selRow("alwaysInjectSelector", always, len(r.config.AlwaysInjectSelector), EffectInject)
		add("policy", quote(r.config.Policy), EffectNone, src+" config.policy")
		d.inject, d.reason = true, "the injector's alwaysInjectSelector "+always+" matches the pod"
		return d
	}
	selRow("alwaysInjectSelector", always, len(r.config.AlwaysInjectSelector), EffectNone)
	switch r.config.Policy {
	case "enabled":
		add("policy", `"enabled"`, EffectInject, src+" config.policy")
		d.inject, d.reason = true, "injector policy enabled"
	case "disabled":
		add("policy", `"disabled"`, EffectSkip, src+" config.policy (only pods that ask for it are injected)")
		d.reason = "injector policy disabled and the pod does not ask for injection"
	}
	return d
}

// templatesProblem checks inject.istio.io/templates against the revision's templates.
func templatesProblem(r *istioRevision, w *Workload) (Factor, bool) {
	v, ok := w.Annotations[istio.AnnotationTemplates]
	if !ok {
		return Factor{}, false
	}
	f := Factor{Factor: istio.AnnotationTemplates, Value: quote(v), Effect: EffectNone, Source: "pod annotation"}
	if len(r.config.Templates) == 0 {
		f.Source += "; the injector ConfigMap lists no templates to check against"
		return f, true
	}
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		names := []string{name}
		if alias, ok := r.config.Aliases[name]; ok {
			names = alias
		}
		for _, n := range names {
			if _, ok := r.config.Templates[n]; !ok {
				f.Effect = EffectBlocks
				f.Source = fmt.Sprintf("pod annotation; template %q is not in ConfigMap %s: istiod rejects the pod", n, r.configMap)
				return f, true
			}
		}
	}
	return f, true
}

// sidecarKind is how a revision adds the proxy, and what decided it.
type sidecarKind struct {
	// kind is "native", "classic", or "" when a fact it depends on is unknown.
	kind string
	// why is the deciding setting, for the "sidecar kind" row.
	why string
	// nodes, when node versions decided it: the node(s) that did, with their
	// kubelet versions, for the "node versions" row.
	nodes string
}

// kindOf names a sidecar kind: "native" or "classic".
func kindOf(native bool) string {
	if native {
		return "native"
	}
	return "classic"
}

// minNativeKubelet is the kubelet minor from which Istio's
// ENABLE_NATIVE_SIDECARS=auto adds a native sidecar (native sidecars are GA in
// Kubernetes 1.33).
const minNativeKubelet = 33

// nativeSidecar predicts whether revision r adds the proxy as a native sidecar.
// In auto mode istiod looks at Node objects: the pod's node when it is bound to
// one that exists, else every node, each of whose kubelet must be 1.33 or newer
// (a version it cannot parse counts as older; no node at all means classic).
func nativeSidecar(f *ClusterFacts, r *istioRevision, w *Workload) sidecarKind {
	if v, ok := w.Annotations[istio.AnnotationNativeSidecar]; ok {
		return sidecarKind{kind: kindOf(v == "true"), why: "pod annotation " + istio.AnnotationNativeSidecar + "=" + quote(v)}
	}
	mode, modeFrom := "", ""
	if v, ok := r.values.Pilot.Env["ENABLE_NATIVE_SIDECARS"]; ok {
		mode = strings.ToLower(fmt.Sprint(v))
	}
	if mode == "" {
		// Istio's default: auto from 1.27, off before. An Istio version that
		// cannot be read is taken as the newest behaviour, and said.
		switch {
		case r.minor == 0:
			mode, modeFrom = "auto", " (the default; Istio version unknown: assumed 1.27+)"
		case r.minor >= 27:
			mode, modeFrom = "auto", " (the default of Istio 1."+strconv.Itoa(r.minor)+")"
		default:
			mode, modeFrom = "false", " (the default of Istio 1."+strconv.Itoa(r.minor)+")"
		}
	}
	if mode != "auto" {
		return sidecarKind{kind: kindOf(mode == "true"), why: "ENABLE_NATIVE_SIDECARS=" + mode + modeFrom}
	}
	if why, unknown := f.Unknown[FactNodes]; unknown {
		return sidecarKind{why: "ENABLE_NATIVE_SIDECARS=auto" + modeFrom + " decides from the nodes' kubelet versions, which could not be read (" + why + ")"}
	}
	names := make([]string, 0, len(f.KubeletVersions))
	for n := range f.KubeletVersions {
		names = append(names, n)
	}
	sort.Strings(names)
	// A pod bound to a node when it is created is decided by that node. A live
	// pod that a controller re-creates was placed by the scheduler after
	// admission: its replacement arrives unbound, and every node decides.
	nodeName := w.Spec.NodeName
	if w.Pod != nil && w.Owner != nil {
		nodeName = ""
	}
	if _, bound := f.KubeletVersions[nodeName]; bound && nodeName != "" {
		names = []string{nodeName}
	}
	if len(names) == 0 {
		return sidecarKind{kind: "classic", why: "ENABLE_NATIVE_SIDECARS=auto" + modeFrom + " and the cluster has no node: istiod adds a classic sidecar", nodes: "no node"}
	}
	var old []string
	for _, n := range names {
		v := f.KubeletVersions[n]
		if pv, err := version.ParseGeneric(v); err != nil {
			old = append(old, n+" "+quoteIfOdd(v)+" (not a version: counts as below 1.33)")
		} else if pv.Major() == 1 && pv.Minor() < minNativeKubelet {
			old = append(old, n+" "+v+" (below 1.33)")
		}
	}
	scope := "every node"
	if len(names) == 1 && nodeName != "" {
		scope = "the pod's node"
	}
	if len(old) > 0 {
		nodes := listSome(old, 3)
		return sidecarKind{kind: "classic", why: "ENABLE_NATIVE_SIDECARS=auto" + modeFrom + ": " + scope + " must run kubelet 1.33 or newer: " + nodes, nodes: nodes}
	}
	var all []string
	for _, n := range names {
		all = append(all, n+" "+f.KubeletVersions[n])
	}
	return sidecarKind{kind: "native", why: "ENABLE_NATIVE_SIDECARS=auto" + modeFrom + ": " + scope + " runs kubelet 1.33 or newer",
		nodes: listSome(all, 3) + ": 1.33 or newer"}
}

// quoteIfOdd quotes a version string that is empty or not printable as is.
func quoteIfOdd(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\n\"") {
		return strconv.Quote(v)
	}
	return v
}

// listSome joins up to n items and says how many more there are.
func listSome(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:n], ", ") + fmt.Sprintf(" and %d more", len(items)-n)
}

// istioStatus reads a live pod's injection state.
type istioStatus struct {
	injected bool
	revision string
	native   bool
	image    string
	evidence string
}

func readIstioStatus(p *corev1.Pod) istioStatus {
	s := istioStatus{}
	raw, hasStatus := p.Annotations[istio.AnnotationStatus]
	for _, c := range p.Spec.InitContainers {
		if c.Name == istio.ProxyContainer {
			s.injected, s.image = true, c.Image
			s.native = c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	for _, c := range p.Spec.Containers {
		if c.Name == istio.ProxyContainer {
			s.injected, s.image = true, c.Image
		}
	}
	if hasStatus {
		var st struct {
			Revision string `json:"revision"`
		}
		_ = json.Unmarshal([]byte(raw), &st)
		s.revision = st.Revision
		s.evidence = istio.AnnotationStatus + " " + raw
		s.injected = s.injected || raw != ""
	} else if s.injected {
		s.evidence = "container istio-proxy (no " + istio.AnnotationStatus + ": injected by hand or by istioctl kube-inject?)"
	}
	if s.revision == "" && s.injected {
		s.revision = p.Annotations[istio.LabelRev]
	}
	return s
}
