package injection

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	name      string
	configMap string // namespace/name
	config    istioInjectorConfig
	values    istioInjectorValues
	// version is the tag it runs, as read (values.global.tag, or the
	// istiod image's), and versionSource where.
	version       string
	versionSource string
	// ver is the Istio release read from version, or else from the
	// revision's name ("1-24-6"); verKnown says one was read, verFrom
	// where. release is ver's row of istio's table of defaults; modelled
	// says there is one, and unmodelled, when there is none, why.
	ver        istio.Version
	verKnown   bool
	verFrom    string
	release    istio.ReleaseDefaults
	modelled   bool
	unmodelled string
	err        error
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
		Hub     string `json:"hub"`
		Tag     any    `json:"tag"`
		Variant string `json:"variant"`
		Proxy   struct {
			HoldApplicationUntilProxyStarts bool   `json:"holdApplicationUntilProxyStarts"`
			Image                           string `json:"image"`
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
	for _, r := range revs {
		r.readRelease(f)
	}
	return revs
}

// missingRevision is a revision webhooks call that has no injector
// ConfigMap: its policy is taken as "enabled" (the caller says so), its
// version read from its istiod Deployment or its name.
func missingRevision(f *ClusterFacts, name string) *istioRevision {
	r := &istioRevision{name: name, configMap: "(not found)", config: istioInjectorConfig{Policy: "enabled"},
		configUnknown: f.Unknown[FactConfigMaps]}
	r.readRelease(f)
	return r
}

// readRelease reads the revision's Istio release from its version, or from
// its name, and finds the release's defaults; when it cannot, unmodelled
// says why.
func (r *istioRevision) readRelease(f *ClusterFacts) {
	// The istiod image is the better witness of the version: prefer it.
	for _, d := range f.ControlPlanes {
		if rev := d.Labels[istio.LabelRev]; rev != r.name && (rev != "" || r.name != "default") {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if _, ok := istio.ImageVersion(c.Image); ok {
				r.version = istio.ImageTag(c.Image)
				r.versionSource = "Deployment " + d.Namespace + "/" + d.Name + " image " + c.Image
			}
		}
	}
	if v, ok := istio.ParseVersion(r.version); ok {
		r.ver, r.verKnown, r.verFrom = v, true, r.version+" from "+r.versionSource
	} else if v, ok := istio.RevisionVersion(r.name); ok && r.name != "default" {
		r.ver, r.verKnown, r.verFrom = v, true, "from the revision's name "+quote(r.name)
	}
	if r.verKnown {
		if r.release, r.modelled = istio.Defaults(r.ver); !r.modelled {
			r.unmodelled = fmt.Sprintf("revision %s runs Istio %s (%s), a release kubectl-mesh does not model (it models %s)",
				quote(r.name), r.ver.MinorString(), r.verFrom, istio.ModelledRange())
		}
		return
	}
	var why []string
	if r.version != "" {
		why = append(why, r.versionSource+" is "+quote(r.version)+", not a release")
	} else if r.configMap != "(not found)" {
		why = append(why, "ConfigMap "+r.configMap+" has no values.global.tag")
	}
	if unread, unknown := f.Unknown[FactControlPlanes]; unknown {
		why = append(why, "the istiod Deployments could not be read ("+unread+")")
	} else {
		why = append(why, "no istiod Deployment of the revision has a versioned image")
	}
	why = append(why, "its name carries none")
	r.unmodelled = "the Istio version of revision " + quote(r.name) + " is unknown: " + strings.Join(why, ", ")
}

func pluralize(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func quote(s string) string { return strconv.Quote(s) }

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
//
// How istiod reads the pod's sidecar.istio.io/inject depends on its
// release (istio.ReleaseDefaults.InjectValue). For a revision whose
// release is not modelled (unknown, or outside the table) the value is read
// by each rule of the modelled releases: the decision stands when they
// agree, and is unknown when they do not.
func injectRequired(r *istioRevision, w *Workload) istioDecision {
	if r.modelled {
		rule := "Istio " + r.release.Minor + " rule: " + injectRuleText(r.release.InjectValue) + " (version " + r.verFrom + ")"
		return injectRequiredBy(r, w, r.release.InjectValue, rule)
	}
	value, present := w.Annotations[istio.KeyInject]
	from := "annotation"
	if v, ok := w.Labels[istio.KeyInject]; ok {
		value, present, from = v, true, "label"
	}
	if !present || value == "" || value == "true" || value == "false" {
		return injectRequiredBy(r, w, istio.InjectValueTrueFalse, "every modelled release reads this value the same ("+r.unmodelled+")")
	}
	newer := injectRequiredBy(r, w, istio.InjectValueTrueFalse, "Istio 1.27+ rule: "+injectRuleText(istio.InjectValueTrueFalse)+" ("+r.unmodelled+")")
	older := injectRequiredBy(r, w, istio.InjectValueYAMLBool, "")
	if newer.inject == older.inject && newer.unknown == older.unknown {
		newer.factors = replaceSource(newer.factors, "sidecar.istio.io/inject (injector)", func(f *Factor) {
			f.Source += "; Istio before 1.27 (" + injectRuleText(istio.InjectValueYAMLBool) + ") comes to the same decision here"
		})
		return newer
	}
	// The releases disagree: which one runs decides. A dry run through the
	// real admission chain settles it.
	d := newer
	d.inject, d.reason = false, ""
	d.unknown = r.releaseUnknown() + ", and how istiod reads sidecar.istio.io/inject=" + quote(value) + " depends on it: use --verify"
	d.factors = replaceSource(d.factors, "sidecar.istio.io/inject (injector)", func(f *Factor) {
		f.Effect = EffectUnknown
		f.Source = "pod " + from + "; " + r.unmodelled +
			"; the releases' rules disagree here (1.27+: " + injectRuleText(istio.InjectValueTrueFalse) + "; before 1.27: " + injectRuleText(istio.InjectValueYAMLBool) + ")"
	})
	return d
}

// releaseUnknown says in a few words why the revision's release is not
// modelled, for a verdict.
func (r *istioRevision) releaseUnknown() string {
	if r.verKnown {
		return "revision " + quote(r.name) + " runs Istio " + r.ver.MinorString() + ", a release kubectl-mesh does not model"
	}
	return "the Istio version of revision " + quote(r.name) + " is unknown"
}

// injectRuleText says how a release reads sidecar.istio.io/inject.
func injectRuleText(rule string) string {
	if rule == istio.InjectValueYAMLBool {
		return "y/yes/true/on inject, any other non-empty value means do not inject"
	}
	return "only \"true\" and \"false\"; anything else means the default policy"
}

// replaceSource applies change to the factors called name.
func replaceSource(fs []Factor, name string, change func(*Factor)) []Factor {
	for i := range fs {
		if fs[i].Factor == name {
			change(&fs[i])
		}
	}
	return fs
}

// readInjectValue reads the pod's sidecar.istio.io/inject value as istiod
// does: strictly "true" or "false", or (older releases) as a boolean word;
// useDefault when the value decides nothing (the policy and selectors do).
func readInjectValue(value string, strict bool) (useDefault, inject bool) {
	switch {
	case strict && value == "true":
		return false, true
	case strict && value == "false":
		return false, false
	case strict:
		return true, false
	}
	switch strings.ToLower(value) {
	case "y", "yes", "true", "on":
		return false, true
	case "":
		return true, false
	}
	return false, false
}

// injectRequiredBy is injectRequired with the pod's value read by rule
// (istio.InjectValue*), which ruleText describes for the factor row.
func injectRequiredBy(r *istioRevision, w *Workload, rule, ruleText string) (d istioDecision) {
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
	strict := rule == istio.InjectValueTrueFalse
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
		useDefault, inject = readInjectValue(value, strict)
		effect := EffectNone
		switch {
		case !useDefault && inject:
			effect = EffectInject
		case !useDefault:
			effect = EffectSkip
		}
		note := "read by istiod: " + ruleText
		if useDefault && value != "" {
			note = "invalid value, ignored: " + ruleText
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
	sidecar := false
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
			sidecar = sidecar || n == "sidecar"
		}
	}
	if !sidecar {
		// Only the sidecar template adds istio-init (or istio-validation).
		f.Effect = EffectWarning
		f.Source = "pod annotation; without the sidecar template no istio-init is added: the proxy gets no traffic unless the app speaks xDS itself (proxyless gRPC)"
	}
	return f, true
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
