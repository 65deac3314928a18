package injection

import (
	"sort"
	"strconv"
	"strings"
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
	key     strings.Builder
	// Hits and Misses count the answers reused and computed.
	Hits, Misses int
}

// memoKeyer is a mesh whose answer for a live pod depends on nothing but
// what memoKey writes (and the pod's name).
type memoKeyer interface {
	memoKey(b *strings.Builder, w *Workload)
}

// NewMemo explains with mesh against facts, which must not change while it
// is used. With compact, reports keep only the factors that decided
// something (a sweep's rows).
func NewMemo(mesh Mesh, facts *ClusterFacts, compact bool) *Memo {
	return &Memo{mesh: mesh, facts: facts, compact: compact, answers: map[string]*InjectionReport{}}
}

// memoName stands for the pod's name while its answer is worked out: no
// pod can have it (it is not a DNS name), and Explain passes names through
// unchanged.
const memoName = "\x00pod\x00"

// Explain is Mesh.Explain, memoized.
func (m *Memo) Explain(w *Workload) *InjectionReport {
	keyer, ok := m.mesh.(memoKeyer)
	if !ok || w.Pod == nil || len(w.Events) > 0 || strings.Contains(w.Name, memoName) {
		m.Misses++
		return m.finish(m.mesh.Explain(m.facts, w))
	}
	m.key.Reset()
	keyer.memoKey(&m.key, w)
	shared, ok := m.answers[m.key.String()]
	if !ok {
		m.Misses++
		anon := *w
		anon.Name = memoName
		shared = m.finish(m.mesh.Explain(m.facts, &anon))
		m.answers[m.key.String()] = shared
	} else {
		m.Hits++
	}
	return named(shared, w.Name)
}

func (m *Memo) finish(r *InjectionReport) *InjectionReport {
	if m.compact {
		kept := make([]Factor, 0, len(r.Factors))
		for _, f := range r.Factors {
			if f.Effect != EffectNone {
				kept = append(kept, f)
			}
		}
		r.Factors = kept
	}
	return r
}

// named is a copy of the shared report r for the pod called name.
func named(r *InjectionReport, name string) *InjectionReport {
	out := *r
	put := func(s string) string {
		if strings.Contains(s, memoName) {
			return strings.ReplaceAll(s, memoName, name)
		}
		return s
	}
	putAll := func(ss []string) []string {
		for _, s := range ss {
			if strings.Contains(s, memoName) {
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
	out.Warnings, out.Needs, out.Incomplete = putAll(out.Warnings), putAll(out.Needs), putAll(out.Incomplete)
	for _, f := range out.Factors {
		if strings.Contains(f.Value, memoName) || strings.Contains(f.Source, memoName) || strings.Contains(f.Factor, memoName) {
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
// events, except its name: its namespace (whose labels come from the facts),
// kind and owner, every label (a webhook's objectSelector or the injector's
// selectors may read any), the annotations Istio reads (all of them have
// "istio.io" in their key: add any other here), hostNetwork, the node when
// the pod has no owner (native sidecars are decided by that node), and the
// injected proxy as readIstioStatus sees it.
func (Istio) memoKey(b *strings.Builder, w *Workload) {
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
		field(w.Owner.Name)
	} else {
		b.WriteString("-")
		field(w.Spec.NodeName)
	}
	sorted(w.Labels, nil)
	istioKey := func(k string) bool { return strings.Contains(k, "istio.io") }
	sorted(w.Annotations, istioKey)
	sorted(w.Pod.Annotations, istioKey)
	if w.Spec.HostNetwork {
		b.WriteString("H")
	}
	for _, c := range w.Pod.Spec.InitContainers {
		if c.Name == istioProxyName {
			b.WriteString("I")
			field(c.Image)
			if c.RestartPolicy != nil {
				field(string(*c.RestartPolicy))
			}
		}
	}
	for _, c := range w.Pod.Spec.Containers {
		if c.Name == istioProxyName {
			b.WriteString("C")
			field(c.Image)
		}
	}
}
