package injection

import (
	"sort"

	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Memo explains live pods that share everything the answer depends on only
// once: a cluster's pods come from few templates, and a sweep of 100,000 pods
// asks the same question a few thousand times. A pod's report is the shared
// answer with its own name put in (the name appears in fixes only, never in
// a decision). The reports it returns share their slices and *bool values:
// they are read-only (set fields of the report itself, never write through
// them).
//
// Only live pods without events are memoized, and only by meshes that say
// what their answer depends on (Istio); anything else is explained directly.
type Memo struct {
	mesh    Mesh
	facts   *ClusterFacts
	compact bool
	answers map[string]*InjectionReport
	label   func(string) bool
	// byNode: answers depend on the pod's node (memoByNode).
	byNode bool
	// namespace is the namespace whose answers the memo holds.
	namespace string
	key       strings.Builder
	// failOpen: an Istio webhook fails open (failurePolicy Ignore), so a
	// pod without a sidecar is answered by when it was created (failedOpen):
	// each such pod is explained by itself.
	failOpen bool
	// Hits and Misses count the answers reused and computed.
	Hits, Misses int
}

// memoKeyer is a mesh whose answer for a live pod depends on nothing but
// what memoKey writes (and the names of the pod and its owner). memoLabels
// says which of the pod's labels the answer can depend on under facts (nil:
// any of them).
type memoKeyer interface {
	memoLabels(f *ClusterFacts) func(key string) bool
	memoKey(b *strings.Builder, w *Workload, label func(string) bool, byNode bool)
	memoByNode(f *ClusterFacts) bool
}

// NewMemo explains with mesh against facts, which must not change while it
// is used. With compact, reports keep only the factors that decided
// something (a sweep's rows).
func NewMemo(mesh Mesh, facts *ClusterFacts, compact bool) *Memo {
	m := &Memo{mesh: mesh, facts: facts, compact: compact, answers: map[string]*InjectionReport{}}
	if keyer, ok := mesh.(memoKeyer); ok {
		m.label = keyer.memoLabels(facts)
		m.byNode = keyer.memoByNode(facts)
	}
	if _, ok := mesh.(Istio); ok {
		for _, e := range istioModelOf(facts).webhooks {
			m.failOpen = m.failOpen || !e.failClosed
		}
	}
	return m
}

// memoName and memoOwner stand for the names of the pod and of its owner
// while its answer is worked out: no object can have them (they are not DNS
// names), and Explain passes names through unchanged.
const (
	memoName  = "\x00pod\x00"
	memoOwner = "\x00owner\x00"
	// MemoName and MemoOwner are the same, for whoever renders shared
	// answers (MemoAnswer) once and puts the names in afterwards.
	MemoName  = memoName
	MemoOwner = memoOwner
)

// Explain is Mesh.Explain, memoized.
func (m *Memo) Explain(w *Workload) *InjectionReport {
	keyer, ok := m.mesh.(memoKeyer)
	if !ok || w.Pod == nil || len(w.Events) > 0 || strings.Contains(w.Name, "\x00") || w.Owner != nil && strings.Contains(w.Owner.Name, "\x00") ||
		m.failOpen && w.Pod.Annotations[istio.AnnotationStatus] == "" {
		m.Misses++
		return m.finish(m.mesh.Explain(m.facts, w))
	}
	if w.Namespace != m.namespace {
		// Pods come namespace by namespace, and the namespace is part of
		// every key: the answers for the namespace before are not asked
		// for again (if they are, they are computed again).
		clear(m.answers)
		m.namespace = w.Namespace
	}
	m.key.Reset()
	keyer.memoKey(&m.key, w, m.label, m.byNode)
	shared, ok := m.answers[m.key.String()]
	if !ok {
		m.Misses++
		anon := *w
		anon.Name = memoName
		if w.Owner != nil {
			anon.Owner = &Owner{Kind: w.Owner.Kind, Name: memoOwner}
		}
		shared = m.finish(m.mesh.Explain(m.facts, &anon))
		m.answers[m.key.String()] = shared
	} else {
		m.Hits++
	}
	owner := ""
	if w.Owner != nil {
		owner = w.Owner.Name
	}
	return named(shared, w.Name, owner)
}

func (m *Memo) finish(r *InjectionReport) *InjectionReport {
	if m.compact {
		r.Factors = DecidingFactors(r.Factors)
	}
	return r
}

// DecidingFactors is fs without the factors that had no effect, in a slice
// of its own, no larger than they need: a sweep's reports keep only these.
func DecidingFactors(fs []Factor) []Factor {
	n := 0
	for _, f := range fs {
		if f.Effect != EffectNone {
			n++
		}
	}
	kept := make([]Factor, 0, n)
	for _, f := range fs {
		if f.Effect != EffectNone {
			kept = append(kept, f)
		}
	}
	return kept
}

// named is a copy of the shared report r for the pod called name, owned by
// the controller called owner.
func named(r *InjectionReport, name, owner string) *InjectionReport {
	out := *r
	out.memo, out.memoOwner = r, owner
	put := func(s string) string {
		if strings.Contains(s, "\x00") {
			return strings.ReplaceAll(strings.ReplaceAll(s, memoName, name), memoOwner, owner)
		}
		return s
	}
	putAll := func(ss []string) []string {
		for _, s := range ss {
			if strings.Contains(s, "\x00") {
				c := make([]string, len(ss))
				for j := range ss {
					c[j] = put(ss[j])
				}
				return c
			}
		}
		return ss
	}
	out.Name, out.Verdict, out.Reason, out.Fix = put(out.Name), put(out.Verdict), put(out.Reason), put(out.Fix)
	out.Revision, out.Webhook, out.NotVerified = put(out.Revision), put(out.Webhook), put(out.NotVerified)
	out.FailOpenFix = put(out.FailOpenFix)
	out.Warnings, out.Needs, out.Incomplete = putAll(out.Warnings), putAll(out.Needs), putAll(out.Incomplete)
	for _, f := range out.Factors {
		if strings.Contains(f.Value, "\x00") || strings.Contains(f.Source, "\x00") || strings.Contains(f.Factor, "\x00") {
			fs := make([]Factor, len(out.Factors))
			for j, g := range out.Factors {
				fs[j] = Factor{Factor: put(g.Factor), Value: put(g.Value), Effect: g.Effect, Source: put(g.Source)}
			}
			out.Factors = fs
			break
		}
	}
	return &out
}

// memoKey writes everything Istio's Explain reads from a live pod without
// events, except the names of the pod and its owner: its namespace (whose
// labels come from the facts), kind and whether it has an owner (and of
// what kind), its labels that label keeps (memoLabels), the annotations
// Istio reads (all of them have "istio.io" in their key: add any other
// here), hostNetwork, the node when the pod has no owner (native sidecars
// are decided by that node) or byNode (ambient mode's node agents), and the
// injected proxy as readIstioStatus sees it.
func (Istio) memoKey(b *strings.Builder, w *Workload, label func(string) bool, byNode bool) {
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	field(w.Kind)
	field(w.Namespace)
	field(w.NamespaceSource)
	sorted := func(m map[string]string, keep func(string) bool) {
		keys := make([]string, 0, len(m))
		for k := range m {
			if keep == nil || keep(k) {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		b.WriteString(strconv.Itoa(len(keys)))
		for _, k := range keys {
			field(k)
			field(m[k])
		}
	}
	sorted(w.NamespaceLabels, nil)
	if w.Owner != nil {
		field(w.Owner.Kind)
	} else {
		b.WriteString("-")
	}
	if w.Owner == nil || byNode {
		field(w.Spec.NodeName)
	}
	sorted(w.Labels, label)
	istioKey := func(k string) bool { return strings.Contains(k, "istio.io") }
	sorted(w.Annotations, istioKey)
	sorted(w.Pod.Annotations, istioKey)
	if w.Spec.HostNetwork {
		b.WriteString("H")
	}
	for _, c := range w.Pod.Spec.InitContainers {
		if c.Name == istio.ProxyContainer {
			b.WriteString("I")
			field(c.Image)
			if c.RestartPolicy != nil {
				field(string(*c.RestartPolicy))
			}
		}
	}
	for _, c := range w.Pod.Spec.Containers {
		if c.Name == istio.ProxyContainer {
			b.WriteString("C")
			field(c.Image)
		}
	}
}

// memoByNode: with ambient mode on, an enrolled pod's answer names the node
// agents on its node.
func (Istio) memoByNode(f *ClusterFacts) bool { return AmbientMayCapture(f) }

// memoLabels keeps the label keys that a webhook's objectSelector or an
// injector's neverInjectSelector/alwaysInjectSelector or an ambient
// enablement selector names, and those with
// "istio.io" in them (the labels Istio reads by name): no other label can
// change the answer. When the webhooks or an injector's configuration are
// not known, every label is kept.
func (Istio) memoLabels(f *ClusterFacts) func(string) bool {
	if _, unknown := f.Unknown[FactWebhooks]; unknown {
		return nil
	}
	if _, unknown := f.Unknown[FactConfigMaps]; unknown {
		return nil
	}
	keys := map[string]bool{}
	add := func(s *metav1.LabelSelector) {
		if s == nil {
			return
		}
		for k := range s.MatchLabels {
			keys[k] = true
		}
		for _, e := range s.MatchExpressions {
			keys[e.Key] = true
		}
	}
	for _, c := range f.Webhooks {
		for i := range c.Webhooks {
			add(c.Webhooks[i].ObjectSelector)
		}
	}
	for _, b := range f.MutatingPolicyBindings {
		if m := b.Spec.MatchResources; m != nil {
			add(m.ObjectSelector)
		}
	}
	if cfg, unknown := ambientConfigOf(f); unknown != "" || cfg != nil && cfg.err != "" {
		return nil
	} else if cfg != nil {
		for _, sel := range cfg.selectors {
			reqs, _ := sel.pod.Requirements()
			for _, r := range reqs {
				keys[r.Key()] = true
			}
		}
	}
	for _, rev := range istioModelOf(f).revisions {
		if rev.err != nil || rev.configUnknown != "" || rev.policyGuessed {
			return nil
		}
		for i := range rev.config.NeverInjectSelector {
			add(&rev.config.NeverInjectSelector[i])
		}
		for i := range rev.config.AlwaysInjectSelector {
			add(&rev.config.AlwaysInjectSelector[i])
		}
	}
	return func(k string) bool { return keys[k] || strings.Contains(k, "istio.io") }
}
