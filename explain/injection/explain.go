package injection

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Explain implements Mesh: every factor that decides Istio sidecar injection
// for w, in Istio's order of precedence, then one verdict and the fix.
func (m Istio) Explain(f *ClusterFacts, w *Workload) *InjectionReport {
	x := &explainer{f: f, w: w, r: &InjectionReport{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, Mesh: m.Name()}}
	for k, why := range f.Unknown {
		x.r.Incomplete = append(x.r.Incomplete, k+": "+why)
	}
	sort.Strings(x.r.Incomplete)
	if _, unread := f.Unknown[FactNodes]; !unread {
		x.r.Nodes = f.NodeAllocatable
	}
	x.namespaceAndWebhooks()
	x.callWebhooks()
	x.labelFactors()
	x.webhookFactors()
	x.injectorFactors()
	x.livePod()
	x.failedCreates()
	if w.Manifest {
		x.r.Template = &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: w.Labels, Annotations: w.Annotations}, Spec: w.Spec}
		x.r.UnverifiedAdmission, x.r.UnverifiedAdmissionUnknown = unverifiedAdmission(f, w, x.nsLabels)
	}
	return x.outcome()
}

// explainer is one Explain: the facts, the workload, the report it fills
// and what each step finds for the next.
type explainer struct {
	f *ClusterFacts
	w *Workload
	r *InjectionReport
	// The namespace's labels, where they come from, and whether they are
	// known.
	nsLabels map[string]string
	nsSource string
	nsKnown  bool
	// undecided are the facts the verdict cannot be decided without, when
	// they could not be read: an unknown fact never counts as "absent".
	undecided []string
	evals     []*webhookEval
	revs      map[string]*istioRevision
	matched   []*webhookEval
	calls     []webhookCall
	injecting *webhookCall
	// blocked says why the pod is refused ("" when it is not), blockedBy
	// by what kind of refusal, blocker the Istio webhook that refuses it
	// when one does.
	blocked, blockedBy string
	blocker            *webhookEval
	// badAnnotations are the annotations istiod would refuse; refused
	// those it refuses when a revision is about to inject.
	badAnnotations []annotationProblem
	refused        []annotationProblem
	st             istioStatus
	amb            ambientOutcome
	ambient        bool
	policy         *policyRefusal
}

func (x *explainer) add(factor, value, effect, source string) {
	x.r.Factors = append(x.r.Factors, Factor{Factor: factor, Value: value, Effect: effect, Source: source})
}

func (x *explainer) need(why string) {
	if !slices.Contains(x.undecided, why) {
		x.undecided = append(x.undecided, why)
	}
}

// namespaceAndWebhooks reads the namespace's labels as the apiserver will see them, the facts that
// could not be read, and the Istio webhooks that match the pod.
func (x *explainer) namespaceAndWebhooks() {
	f, w := x.f, x.w
	// The namespace's labels, as the apiserver will see them.
	x.nsLabels = map[string]string{}
	x.nsSource = "Namespace " + w.Namespace
	switch w.NamespaceSource {
	case NamespaceFromFile:
		for k, v := range w.NamespaceLabels {
			x.nsLabels[k] = v
		}
		x.nsSource += " (from the manifest: not in the cluster yet)"
	case NamespaceMissing:
		x.nsSource += " (does not exist: no labels)"
	default:
		if ns := f.Namespaces[w.Namespace]; ns != nil {
			for k, v := range ns.Labels {
				x.nsLabels[k] = v
			}
		}
	}
	if _, ok := x.nsLabels[istio.LabelMetadataName]; !ok {
		x.nsLabels[istio.LabelMetadataName] = w.Namespace
	}
	// The facts the verdict cannot be decided without, when they could not
	// be read: an unknown fact never counts as "absent".
	x.nsKnown = true
	if why, unknown := f.Unknown[FactNamespaces]; unknown && w.NamespaceSource == NamespaceFromCluster && f.Namespaces[w.Namespace] == nil {
		x.nsKnown = false
		x.add("namespace labels", "unknown", EffectUnknown, why)
	}
	if why, unknown := f.Unknown[FactWebhooks]; unknown {
		x.need(why)
	}

	x.evals = evaluateWebhooks(f, x.nsLabels, w.Labels, x.nsKnown)
	x.revs = istioModelOf(f).revisions
	for _, e := range x.evals {
		if e.matches() {
			x.matched = append(x.matched, e)
		}
		if e.mayMatch() {
			x.need(f.Unknown[FactNamespaces])
		}
		if e.matches() && e.conditions {
			// Its matchConditions (CEL) are not evaluated here: whether the
			// apiserver calls it is unknown, never a yes.
			x.need("webhook " + e.fullName() + " has matchConditions (CEL), which kubectl-mesh does not evaluate: use --verify")
		}
	}
}

// callWebhooks asks each matching webhook's revision what it does with the pod, in
// order: the last one whose injector agrees wins; a webhook that cannot be
// called or an annotation istiod refuses blocks the pod.
func (x *explainer) callWebhooks() {
	f, w := x.f, x.w
	// Which webhook injects: every matching webhook is called, in order, and
	// each re-injects (istiod strips an earlier injection first), so the last
	// one whose injector agrees wins.
	// The annotations istiod would refuse (the pod's own: the same for every
	// revision), and those it refuses when a revision is about to inject.
	x.badAnnotations = invalidAnnotations(w.Annotations)
	for _, e := range x.matched {
		rev := x.revs[e.revision]
		if rev == nil {
			rev = missingRevision(f, e.revision)
		}
		c := webhookCall{e: e, rev: rev, d: injectRequired(rev, w)}
		if c.d.unknown != "" {
			x.need(c.d.unknown)
		}
		if e.backendUnknown != "" && (e.failClosed || c.d.inject || c.d.unknown != "") {
			// Whether istiod can be reached decides: a failing call blocks
			// the pod (failurePolicy Fail) or skips injection (Ignore).
			x.need(e.backendUnknown)
		}
		if e.backendIssue != "" && e.failClosed && x.blocked == "" {
			x.blocked, x.blockedBy = fmt.Sprintf("webhook %s cannot be called: %s, and its failurePolicy is Fail, so the apiserver rejects the pod", e.fullName(), e.backendIssue), BlockedWebhook
			x.blocker = e
		}
		if c.d.inject && e.backendIssue == "" {
			// istiod checks the annotations before it picks the templates.
			if len(x.badAnnotations) > 0 && x.blocked == "" {
				x.blocked, x.blockedBy = "istiod refuses the pod at admission: "+x.badAnnotations[0].String(), BlockedAnnotation
				x.refused = x.badAnnotations
			}
			if tf, ok := templatesProblem(rev, w); ok && tf.Effect == EffectBlocks && x.blocked == "" {
				x.blocked, x.blockedBy = "istiod rejects the pod: "+tf.Source, BlockedTemplate
			}
		}
		x.calls = append(x.calls, c)
		if c.d.inject && e.backendIssue == "" {
			x.injecting = &x.calls[len(x.calls)-1]
		}
	}
}

// labelFactors are the namespace's and the pod's labels as the webhook selectors
// read them, and the annotation they cannot see.
func (x *explainer) labelFactors() {
	f, w, r := x.f, x.w, x.r
	// Namespace labels.
	hasSelector := func(want string, object bool) *webhookEval {
		for _, e := range x.matched {
			sel := e.nsSelector
			if object {
				sel = e.objSelector
			}
			if strings.Contains(sel, want) {
				return e
			}
		}
		return nil
	}
	// A webhook the namespace's labels select, whether or not the pod's
	// labels then meet its object selector (a pod label that opts out is
	// its own row): the namespace's label does its part.
	nsSelects := func(want string) (e *webhookEval, podOut bool) {
		if e := hasSelector(want, false); e != nil {
			return e, false
		}
		for _, e := range x.evals {
			if !e.deactivated && e.rulesMatch && e.nsMatch && !e.nsUnknown && !e.objMatch && strings.Contains(e.nsSelector, want) {
				return e, true
			}
		}
		return nil, false
	}
	podOut := func(out bool) string {
		if out {
			return ", whose object selector the pod's labels do not meet"
		}
		return ""
	}
	if x.nsKnown { // unknown labels get no rows: the "namespace labels" row says so
		if v, ok := x.nsLabels[istio.LabelInjection]; !ok {
			x.add("namespace label istio-injection", "(not set)", EffectNone, x.nsSource)
		} else if v == "enabled" {
			if e, out := nsSelects("istio-injection in (enabled)"); e != nil {
				x.add("namespace label istio-injection", quote(v), EffectInject, x.nsSource+"; selects webhook "+e.fullName()+podOut(out))
			} else {
				x.add("namespace label istio-injection", quote(v), EffectWarning, x.nsSource+"; no active Istio webhook selects it (default revision deactivated or not installed)")
			}
		} else {
			x.add("namespace label istio-injection", quote(v), EffectBlocks, x.nsSource+"; every Istio webhook needs it absent or \"enabled\"")
		}
		if v, ok := x.nsLabels[istio.LabelRev]; !ok {
			x.add("namespace label istio.io/rev", "(not set)", EffectNone, x.nsSource)
		} else if _, both := x.nsLabels[istio.LabelInjection]; both {
			x.add("namespace label istio.io/rev", quote(v), EffectNone, x.nsSource+"; istio-injection takes precedence over it")
			r.Warn(WarnConflictingLabels, fmt.Sprintf("namespace %s has both istio-injection and istio.io/rev; istio.io/rev is ignored", w.Namespace))
		} else if e, out := nsSelects("istio.io/rev in"); e != nil {
			via := "revision " + e.revision
			if e.tag != "" {
				via = "tag " + e.tag + " → revision " + e.revision
			}
			x.add("namespace label istio.io/rev", quote(v), EffectInject, x.nsSource+"; "+via+" (webhook "+e.fullName()+podOut(out)+")")
		} else {
			x.add("namespace label istio.io/rev", quote(v), EffectWarning, x.nsSource+"; no active Istio webhook serves revision or tag "+quote(v))
		}
		if v, ok := x.nsLabels[istio.LabelDataplaneMode]; ok {
			x.add("namespace label istio.io/dataplane-mode", quote(v), EffectInfoOnly, x.nsSource)
		}
	}

	// Pod labels the webhook selectors read; the annotation they cannot see.
	podSource := "pod label"
	if w.Pod == nil {
		podSource = w.Kind + " " + w.Name + " pod template label"
	}
	if v, ok := w.Labels[istio.KeyInject]; !ok {
		x.add("pod label sidecar.istio.io/inject", "(not set)", EffectNone, podSource)
	} else if v == "false" {
		x.add("pod label sidecar.istio.io/inject", quote(v), EffectSkip, podSource+"; every Istio webhook's objectSelector excludes it")
	} else if e := hasSelector(istio.KeyInject+" in (true)", true); e != nil {
		x.add("pod label sidecar.istio.io/inject", quote(v), EffectInject, podSource+"; selects webhook "+e.fullName())
	} else {
		x.add("pod label sidecar.istio.io/inject", quote(v), EffectNone, podSource+"; the namespace's labels decide which webhook is called")
	}
	if v, ok := w.Labels[istio.LabelRev]; ok {
		if e := hasSelector("istio.io/rev in", true); e != nil {
			x.add("pod label istio.io/rev", quote(v), EffectInject, podSource+"; selects webhook "+e.fullName())
		} else if _, nsRev := x.nsLabels[istio.LabelRev]; !nsRev && x.nsKnown && x.nsLabels[istio.LabelInjection] == "" && v != "" && !revisionActive(x.evals, v) {
			x.add("pod label istio.io/rev", quote(v), EffectWarning, podSource+"; matches no active revision or tag: no Istio webhook serves "+quote(v))
		} else {
			x.add("pod label istio.io/rev", quote(v), EffectNone, podSource+"; only used when the namespace has neither istio-injection nor istio.io/rev")
		}
	}
	if v, ok := w.Annotations[istio.KeyInject]; ok {
		if _, label := w.Labels[istio.KeyInject]; !label && len(x.matched) == 0 && v == "true" {
			x.add("pod annotation sidecar.istio.io/inject", quote(v), EffectWarning, "pod annotation; webhook selectors only see labels, so it cannot select a webhook (use the label)")
		} else {
			x.add("pod annotation sidecar.istio.io/inject", quote(v), EffectNone, "pod annotation; invisible to webhook selectors, read by istiod once a webhook is called (deprecated: use the label)")
		}
	}

	// Without the webhooks, what a label does to webhook selection is
	// unknown: the rows keep the label's value, not a guess at its effect.
	if why, unknown := f.Unknown[FactWebhooks]; unknown {
		for i := range r.Factors {
			fac := &r.Factors[i]
			switch fac.Factor {
			case "namespace label istio-injection", "namespace label istio.io/rev", "pod label sidecar.istio.io/inject", "pod label istio.io/rev":
				src := fac.Source
				if j := strings.Index(src, "; "); j >= 0 {
					src = src[:j]
				}
				fac.Effect, fac.Source = EffectUnknown, src+"; which Istio webhook it selects is unknown: "+why
			}
		}
	}
}

// webhookFactors are every Istio webhook, and the backends of those called.
func (x *explainer) webhookFactors() {
	f, r := x.f, x.r
	// Every Istio webhook.
	if why, unknown := f.Unknown[FactWebhooks]; unknown {
		x.add("mutating webhooks", "unknown", EffectUnknown, why+" (which webhooks the apiserver calls)")
	}
	for _, e := range x.evals {
		src := "MutatingWebhookConfiguration " + e.config + ", revision " + e.revision
		if e.tag != "" {
			src += " (tag " + e.tag + ")"
		}
		var value string
		switch {
		case e.nsUnknown && e.objMatch:
			value = "pod matches " + quote(e.objSelector) + "; the namespace's labels (unknown) decide: namespaceSelector " + quote(e.nsSelector)
		case e.nsUnknown:
			value = "pod does not match " + quote(e.objSelector)
		case e.nsMatch && e.objMatch:
			value = "namespace and pod match"
		case !e.nsMatch && !e.objMatch:
			value = "neither matches: namespaceSelector " + quote(e.nsSelector) + ", objectSelector " + quote(e.objSelector)
		case !e.nsMatch:
			value = "namespace does not match " + quote(e.nsSelector)
		default:
			value = "pod does not match " + quote(e.objSelector)
		}
		effect := EffectNone
		switch {
		case e.deactivated:
			value = "deactivated (istio.io/deactivated selector: never matches)"
		case !e.rulesMatch:
			value = "its rules do not cover pod CREATE"
		case e.mayMatch():
			effect = EffectUnknown
		case e.matches() && e.conditions:
			effect = EffectUnknown
			value += "; has matchConditions (CEL), not evaluated here"
		case e.matches():
			effect = EffectInject
		}
		x.add("webhook "+e.fullName(), value, effect, src)
	}
	for _, c := range x.calls {
		e := c.e
		switch {
		case e.backendIssue != "" && e.failClosed:
			x.add("webhook backend", e.backend, EffectBlocks, e.backendIssue+"; failurePolicy Fail: pod creation fails")
		case e.backendIssue != "":
			x.add("webhook backend", e.backend, EffectSkip, e.backendIssue+"; failurePolicy Ignore: pods are created without injection")
		default:
			x.add("webhook backend", e.backend, EffectNone, e.backendNote)
		}
	}
	if len(x.matched) > 1 {
		var names []string
		for _, e := range x.matched {
			names = append(names, e.fullName())
		}
		r.Warn(WarnOverlapping, "more than one Istio webhook matches ("+strings.Join(names, ", ")+"): each injects in turn; overlapping webhooks are a misconfiguration")
		r.OverlapExtra = x.overlapExtra()
	}
}

// overlapExtra are the configurations of the webhooks that match the pod
// but are not of the revision its labels (or its namespace's) select:
// istio.io/rev's revision or tag, else istio-injection's default
// revision. None when that revision is not known or none of its webhooks
// matches (then which one is extra is a choice).
func (x *explainer) overlapExtra() []string {
	want := x.w.Labels[istio.LabelRev]
	if want == "" {
		want = x.nsLabels[istio.LabelRev]
	}
	if want == "" && x.nsLabels[istio.LabelInjection] == "enabled" {
		want = "default"
	}
	if want == "" {
		return nil
	}
	var extra []string
	wanted := false
	for _, e := range x.matched {
		if e.revision == want || e.tag == want {
			wanted = true
		} else if !slices.Contains(extra, e.config) {
			extra = append(extra, e.config)
		}
	}
	if !wanted {
		return nil
	}
	return extra
}

// injectorFactors are what each revision's injector decides, and the sidecar's kind.
func (x *explainer) injectorFactors() {
	f, w, r := x.f, x.w, x.r
	// Inside the injector, for each revision called.
	seen := map[string]bool{}
	for _, c := range x.calls {
		if seen[c.rev.name] {
			continue
		}
		seen[c.rev.name] = true
		prefix := ""
		if len(x.calls) > 1 {
			prefix = "[" + c.rev.name + "] "
		}
		if c.rev.configMap == "(not found)" {
			effect := EffectWarning
			if why, unknown := f.Unknown[FactConfigMaps]; unknown {
				effect = EffectUnknown
				x.add(prefix+"injector ConfigMap", "unknown", effect, why)
			} else {
				x.add(prefix+"injector ConfigMap", "none for revision "+quote(c.rev.name), effect, "istio-sidecar-injector[-<revision>]: policy assumed \"enabled\"")
			}
		} else if c.rev.err != nil {
			x.add(prefix+"injector ConfigMap", c.rev.configMap, EffectWarning, "unreadable: "+c.rev.err.Error())
		}
		for _, fac := range c.d.factors {
			fac.Factor = prefix + fac.Factor
			r.Factors = append(r.Factors, fac)
		}
		if tf, ok := templatesProblem(c.rev, w); ok {
			tf.Factor = prefix + tf.Factor
			r.Factors = append(r.Factors, tf)
		}
		if c.d.inject && c.e.backendIssue == "" {
			for _, af := range annotationFactors(w, x.badAnnotations) {
				af.Factor = prefix + af.Factor
				r.Factors = append(r.Factors, af)
			}
		}
	}
	if x.injecting != nil {
		if v := w.Annotations[istio.AnnotationInterceptionMode]; v == "NONE" {
			x.add(istio.AnnotationInterceptionMode, `"NONE"`, EffectInfoOnly, "pod annotation: the proxy is injected without istio-init, so no traffic is captured")
		}
		k := nativeSidecar(f, x.injecting.rev, w)
		r.Sidecar = k.kind
		if k.nodes != "" {
			x.add("node versions", k.nodes, EffectInfoOnly, "Node status.nodeInfo.kubeletVersion")
		}
		if istio.OmitsSidecarTemplate(w.Annotations) {
			// A gateway's or an agent's template adds istio-proxy as a
			// container of its own, never a sidecar of either kind.
			r.Sidecar = ""
			x.add("sidecar kind", "none", EffectInfoOnly, fmt.Sprintf("pod annotation %s=%q: the proxy these templates add is a regular container, not the sidecar template's", istio.AnnotationTemplates, w.Annotations[istio.AnnotationTemplates]))
		} else if k.kind == "" {
			x.add("sidecar kind", "unknown", EffectUnknown, k.why)
		} else {
			x.add("sidecar kind", k.kind, EffectInfoOnly, k.why)
		}
	}
}

// livePod reads what happened to a live pod, then ambient mode, once what the
// pod has is known.
func (x *explainer) livePod() {
	f, w, r := x.f, x.w, x.r
	// What happened to a live pod.
	if w.Pod != nil {
		x.st = readIstioStatus(w.Pod)
		injected := x.st.injected
		r.Injected = &injected
		r.InjectedRevision = x.st.revision
		if x.st.injected {
			kind := "container"
			if x.st.native {
				kind = "native sidecar (init container, restartPolicy Always)"
			}
			x.add(istio.AnnotationStatus, x.st.evidence, EffectInfoOnly, "pod (written by the injector)")
			x.add(istio.ProxyContainer, kind+", image "+x.st.image, EffectInfoOnly, "pod spec")
			if has := kindOf(x.st.native); r.Sidecar != "" && r.Sidecar != has {
				x.add("sidecar kind now", has+" → "+r.Sidecar, EffectWarning, "the pod has a "+has+" sidecar; created now it would get a "+r.Sidecar+" one (see sidecar kind)")
			}
			if want := x.revs[x.st.revision]; want != nil && want.version != "" && istio.ImageTag(x.st.image) != want.version {
				x.add("proxy version", x.st.image, EffectWarning, "revision "+x.st.revision+" now injects "+want.version+" ("+want.versionSource+"): restart to upgrade the proxy")
			}
			r.InjectorImage = injectorImage(x.revs[x.st.revision], w.Pod.Annotations)
		} else {
			x.add(istio.AnnotationStatus, "(not set)", EffectInfoOnly, "pod: not injected")
		}
	}
	// What else rewrites the pod at admission: what the pod's containers
	// and labels (a template's refused pods) are read against.
	r.OtherMutators, r.OtherMutatorsUnknown = otherMutators(f, w, x.nsLabels)

	// Ambient, once what the pod has is known: istio-cni leaves pods with a
	// sidecar out.
	sidecar := x.injecting != nil
	if w.Pod != nil {
		sidecar = x.st.injected
	}
	x.amb = explainAmbient(f, w, x.nsLabels, sidecar, x.add)
	x.ambient = x.amb.enrolled
	r.AmbientCapture = x.amb.capture
	if x.amb.unknown != "" {
		x.ambient = x.amb.asked && !sidecar
		r.AmbientCapture = EffectUnknown
	}
}

// failedCreates reads the owner's FailedCreate events: pods that could not be created.
func (x *explainer) failedCreates() {
	f, w, r := x.f, x.w, x.r
	// Pods that could not be created: the owner's FailedCreate events.
	for _, ev := range w.Events {
		kind := RefusalOf(ev.Message)
		if pr, ok := refusalBy(f, w, x.nsLabels, ev.Message); ok && kind == "" && (pr.what == "" || x.injecting == nil) && r.RefusedBy == nil {
			// The platform's own refusal: named, not the mesh's.
			r.RefusedBy = &Refusal{By: pr.by, Fix: platformFix(pr, w), Message: ev.Message, Condition: pr.condition}
			if r.RefusedBy.Fix != "" {
				r.RefusedBy.Fix += retryNow(w)
			}
			if optOut := optOutRefused(w, ev.Message); optOut != "" {
				// The policy refuses the template's own opt-out of the
				// mesh: the opt-out goes, the policy stays.
				r.RefusedBy.Fix = optOut + retryNow(w) + "\n# or, keeping the opt-out: " + strings.ReplaceAll(r.RefusedBy.Fix, "\n", "\n# ")
			}
		}
		if r.RefusedBy != nil && r.RefusedBy.OwnerKind == "" {
			r.RefusedBy.OwnerKind, r.RefusedBy.OwnerName = templateOwnerOf(w)
		}
		if by := builtInRefusal(f, w.Namespace, ev.Message); by != "" && kind == "" && x.injecting != nil && r.RefusedBy == nil {
			// The apiserver's own validation, or a LimitRange: whether it
			// is what the injector adds that it refuses, the same template
			// without the sidecar says (ProveWithoutSidecar).
			r.RefusedBy = &Refusal{By: by, Message: ev.Message}
			r.RefusedBy.OwnerKind, r.RefusedBy.OwnerName = templateOwnerOf(w)
		}
		if pr, ok := thirdPartyRefusal(f, w, x.nsLabels, ev.Message); ok && (kind == "" || kind == BlockedWebhook) && x.injecting != nil {
			// Another webhook or a policy refuses what the injector added.
			kind = BlockedPolicy
			if x.blocked == "" {
				x.policy = &pr
			}
		}
		if kind == BlockedQuota && x.injecting == nil {
			continue // a quota refusing pods with no sidecar is not the mesh's
		}
		if kind != "" {
			x.add("event FailedCreate", truncate(ev.Message, 300), EffectBlocks, ev.InvolvedObject.Kind+" "+ev.InvolvedObject.Name+fmt.Sprintf(" (%d times, last %s)", max(ev.Count, 1), ev.LastTimestamp.UTC().Format("2006-01-02T15:04:05Z")))
			if x.blocked == "" {
				x.blocked, x.blockedBy = "the apiserver rejected pod creation: "+truncate(strings.Join(strings.Fields(ev.Message), " "), 300), kind
				if x.policy != nil {
					x.blocked += "; refused by " + x.policy.by + ", which rejects " + x.policy.what
				} else if ref, ok := parseWebhookRefusal(ev.Message); ok {
					// Which webhook: the one whose selectors match this
					// pod and whose URL the message quotes.
					acted := actedOn(x.matched, ref)
					switch {
					case len(acted) > 0:
						x.blocked += "; from " + describeActed(acted)
						if !ref.denied {
							x.blocker = acted[0]
						}
					default:
						x.blocked += fmt.Sprintf("; no webhook %q whose selectors match this pod posts to that URL now: the refusal is older than a change to the webhooks, or came from outside the mesh's", ref.webhook)
					}
				}
			}
		}
	}
}

// outcome decides the verdict and its fix: a known block decides whatever
// else is unknown.
func (x *explainer) outcome() *InjectionReport {
	f, w, r := x.f, x.w, x.r
	// Outcome. A known block decides whatever else is unknown.
	if x.blocked != "" {
		r.CreationBlocked, r.BlockedBy = true, x.blockedBy
	}
	if x.blocked == "" && len(x.undecided) > 0 {
		r.Ambient = x.ambient && !x.st.injected
		if x.st.injected {
			r.Revision = x.st.revision
		}
		unknownVerdict(r, w, x.st, x.undecided)
		return r
	}
	r.Expected = boolp(x.injecting != nil && x.blocked == "")
	r.Mismatch = boolp(false)
	if x.injecting != nil {
		r.Revision = x.injecting.rev.name
		r.Webhook = x.injecting.e.fullName()
	} else if x.st.injected {
		r.Revision = x.st.revision
	}
	if (x.ambient || x.amb.asked) && r.IsExpected() {
		r.Warn(WarnAmbientAndSidecar, "the pod is also selected for ambient mode; a pod with a sidecar is not captured by ztunnel")
		x.ambient = false
	} else if x.amb.asked && x.amb.excluded != "" && !x.st.injected {
		r.Warn(WarnAmbientExcluded, "istio.io/dataplane-mode asks for ambient mode, but "+x.amb.excluded)
	}
	if x.st.injected {
		x.ambient = false
	}
	r.Ambient = x.ambient
	if !x.ambient {
		r.AmbientCapture = ""
	} else if r.AmbientCapture == EffectUnknown && strings.HasPrefix(x.amb.unread, "forbidden") {
		// Decided but for how ambient mode captures it: name what settles it.
		r.Needs = append(r.Needs, permissionOf(x.amb.unread))
	}
	istioVerdict(r, w, x.st, x.evals, x.calls, x.blocked, x.blocker, x.nsLabels, x.amb)
	x.namespaceAnnotated(r)
	if _, both := x.nsLabels[istio.LabelRev]; both && x.nsKnown && x.nsLabels[istio.LabelInjection] != "" && r.Fix == "" && !r.CreationBlocked {
		// istio-injection overrules istio.io/rev: which one is meant is a
		// choice; the pods change at their next creation.
		r.Fix = "kubectl label namespace " + w.Namespace + " " + istio.LabelInjection + "-   # a choice: istio.io/rev=" + x.nsLabels[istio.LabelRev] + " then selects the revision; or remove istio.io/rev to keep " + istio.LabelInjection
		if w.Pod != nil {
			r.Fix += "\n" + restartCommand(w)
		}
	}
	if x.policy != nil && r.BlockedBy == BlockedPolicy {
		r.Reason = "pod creation rejected by " + x.policy.by + " (it refuses what the injector adds)"
		r.Fix = policyFix(*x.policy, w) + retryNow(w)
		if r.RefusedBy == nil && !x.policy.down {
			// For the dry runs that prove which of the injection's parts
			// it refuses, and the mesh's knob it admits (the engine's).
			r.RefusedBy = &Refusal{By: x.policy.by, Fix: r.Fix, Message: x.blocked}
			r.RefusedBy.OwnerKind, r.RefusedBy.OwnerName = templateOwnerOf(w)
		}
	}
	if x.injecting != nil && !x.injecting.e.failClosed && x.blocked == "" {
		r.FailOpenWebhook, r.FailOpenFix = x.injecting.e.fullName(), webhookDownFix(w, x.nsLabels, x.evals, x.injecting.e)
		if w.Pod != nil && !x.st.injected && r.IsMismatch() {
			if when, ok := failedOpen(f, w, x.injecting.e, x.nsLabels); ok {
				failOpenVerdict(r, w, x.injecting.e, when)
			}
		}
	}
	if len(x.refused) > 0 {
		r.Reason = "refused at admission: invalid annotation " + x.refused[0].name
		r.Fix = annotationFix(w, x.refused)
	} else if keys := deniedByTemplate(x.blocked, w); len(keys) > 0 && r.BlockedBy == BlockedWebhook {
		// istiod's templates failed on an annotation's value: its refusal,
		// not a webhook that cannot be called.
		r.BlockedBy = BlockedAnnotation
		r.Reason = "refused at admission: istiod's injection template fails on the annotation " + strings.Join(keys, " or ")
		r.Fix = removeTemplateAnnotations(w, keys, "istiod's injection template cannot read the value (it expects JSON); or correct it")
		if r.Fix == "" {
			r.Fix = "remove or correct the annotation " + strings.Join(keys, " and ") + " in the pod's manifest (istiod's injection template cannot read its value), then re-create the pod"
		}
	} else if reason, fix, ok := templateFailure(x.blocked, w); ok && r.BlockedBy == BlockedWebhook {
		// istiod's templates failed on a setting the message does not name.
		r.BlockedBy, r.Reason, r.Fix = BlockedAnnotation, reason, fix
	} else if m := deniedAnnotation.FindStringSubmatch(x.blocked); m != nil && (r.BlockedBy == BlockedAnnotation || r.BlockedBy == BlockedWebhook && strings.Contains(x.blocked, "denied the request")) {
		// istiod's own refusal, read off the controller's events: the
		// webhook was called, and refused the annotation's value.
		r.BlockedBy = BlockedAnnotation
		r.Reason = "refused at admission: invalid annotation " + m[2]
		r.Fix = removeTemplateAnnotations(w, []string{m[2]}, "istiod refuses its value "+truncate(m[1], 80)+"; or correct it")
		if r.Fix == "" {
			r.Fix = "remove the annotation " + m[2] + " from the pod's manifest (istiod refuses its value " + truncate(m[1], 80) + "; or correct it), then re-create the pod"
		}
	}
	if r.CreationBlocked && w.Kind == "CronJob" && strings.HasPrefix(r.Fix, "kubectl patch cronjob/") {
		r.Fix += staleJobs(w)
	}
	if !r.CreationBlocked && w.Pod == nil && r.IsExpected() {
		// A template's pods will fail in istio-init; a live pod's failure is
		// its own (startup reads it).
		if why := initBreakingAnnotation(w.Annotations); why != "" {
			r.InitFailure = why
			r.Warn(WarnInitFailure, why)
		}
	}
	return r
}

// webhookCall is one matching webhook, the revision it calls, and what that
// revision's injector decides.
type webhookCall struct {
	e   *webhookEval
	rev *istioRevision
	d   istioDecision
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// deniedAnnotation is istiod's refusal of an annotation's value: the
// value, the annotation.
var deniedAnnotation = regexp.MustCompile(`(?s)invalid value '(.*?)' for annotation '([^']+)'`)

// RefusalOf tells a FailedCreate event's message that concerns the mesh: an
// Istio webhook's failure or refusal, PodSecurity refusing an Istio
// container, or a quota or LimitRange refusing the pod (which counts only
// when the pod gets a sidecar); "" for any other.
func RefusalOf(msg string) string {
	switch {
	case strings.Contains(msg, "denied the request") && strings.Contains(msg, "istio.io") && deniedAnnotation.MatchString(msg):
		// istiod was called and refused an annotation's value.
		return BlockedAnnotation
	case strings.Contains(msg, "webhook") && strings.Contains(msg, "istio.io"):
		return BlockedWebhook
	case strings.Contains(msg, "violates PodSecurity") && (strings.Contains(msg, `"`+istio.InitContainer+`"`) ||
		strings.Contains(msg, `"`+istio.ProxyContainer+`"`) || strings.Contains(msg, `"`+istio.ValidationContainer+`"`)):
		return BlockedPodSecurity
	case strings.Contains(msg, "exceeded quota") || strings.Contains(msg, "must specify limits") || strings.Contains(msg, "must specify requests"):
		return BlockedQuota
	}
	return ""
}

// builtInRefusal names what in the apiserver refused a pod when it is not
// a webhook, a policy or a quota: its validation of the pod ("is
// invalid"), a LimitRange; "" otherwise.
func builtInRefusal(f *ClusterFacts, ns, msg string) string {
	switch {
	case strings.Contains(msg, "is invalid"):
		return "the apiserver's validation of the pod"
	case CitesLimitRange(msg):
		return limitRangeBy(f, ns, msg)
	}
	return ""
}

// deniedByTemplate are the annotations of w that istiod's refusal names
// when its injection template fails on one ("failed to run injection
// template … at <`sidecar.istio.io/userVolume`>…", the key possibly cut
// short, when every key it may be is given): none when the refusal is not
// that, or names none of w's annotations.
func deniedByTemplate(msg string, w *Workload) []string {
	if !strings.Contains(msg, "denied the request") || !strings.Contains(msg, "injection template") {
		return nil
	}
	var out []string
	for k := range w.Annotations {
		if istio.IsIstioAnnotation(k) && strings.Contains(msg, "`"+k+"`") {
			out = append(out, k) // quoted whole
		}
	}
	if len(out) > 0 {
		// With it, the others whose value looks like JSON and is not
		// (YAML's flow style): the template reads them next.
		for k, v := range w.Annotations {
			if v = strings.TrimSpace(v); istio.IsIstioAnnotation(k) && !slices.Contains(out, k) && (strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[")) && !json.Valid([]byte(v)) {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	for k := range w.Annotations {
		if !istio.IsIstioAnnotation(k) {
			continue
		}
		// A prefix of the key the message quotes, past its domain.
		for n := len(k); n > strings.IndexByte(k, '/')+3; n-- {
			if strings.Contains(msg, "`"+k[:n]) {
				out = append(out, k)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}
