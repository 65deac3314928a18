package injection

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Explain implements Mesh: every factor that decides Istio sidecar injection
// for w, in Istio's order of precedence, then one verdict and the fix.
func (m Istio) Explain(f *ClusterFacts, w *Workload) *InjectionReport {
	r := &InjectionReport{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, Mesh: m.Name()}
	add := func(factor, value, effect, source string) {
		r.Factors = append(r.Factors, Factor{Factor: factor, Value: value, Effect: effect, Source: source})
	}
	for k, why := range f.Unknown {
		r.Incomplete = append(r.Incomplete, k+": "+why)
	}
	sort.Strings(r.Incomplete)

	// The namespace's labels, as the apiserver will see them.
	nsLabels := map[string]string{}
	nsSource := "Namespace " + w.Namespace
	switch w.NamespaceSource {
	case NamespaceFromFile:
		for k, v := range w.NamespaceLabels {
			nsLabels[k] = v
		}
		nsSource += " (from the manifest: not in the cluster yet)"
	case NamespaceMissing:
		nsSource += " (does not exist: no labels)"
	default:
		if ns := f.Namespaces[w.Namespace]; ns != nil {
			for k, v := range ns.Labels {
				nsLabels[k] = v
			}
		}
	}
	if _, ok := nsLabels[istio.LabelMetadataName]; !ok {
		nsLabels[istio.LabelMetadataName] = w.Namespace
	}
	// The facts the verdict cannot be decided without, when they could not
	// be read: an unknown fact never counts as "absent".
	var undecided []string
	need := func(why string) {
		for _, u := range undecided {
			if u == why {
				return
			}
		}
		undecided = append(undecided, why)
	}
	nsKnown := true
	if why, unknown := f.Unknown[FactNamespaces]; unknown && w.NamespaceSource == NamespaceFromCluster && f.Namespaces[w.Namespace] == nil {
		nsKnown = false
		add("namespace labels", "unknown", EffectUnknown, why)
	}
	if why, unknown := f.Unknown[FactWebhooks]; unknown {
		need(why)
	}

	evals := evaluateWebhooks(f, nsLabels, w.Labels, nsKnown)
	revs := istioModelOf(f).revisions
	var matched []*webhookEval
	for _, e := range evals {
		if e.matches() {
			matched = append(matched, e)
		}
		if e.mayMatch() {
			need(f.Unknown[FactNamespaces])
		}
		if e.matches() && e.conditions {
			// Its matchConditions (CEL) are not evaluated here: whether the
			// apiserver calls it is unknown, never a yes.
			need("webhook " + e.fullName() + " has matchConditions (CEL), which kubectl-mesh does not evaluate: use --verify")
		}
	}

	// Which webhook injects: every matching webhook is called, in order, and
	// each re-injects (istiod strips an earlier injection first), so the last
	// one whose injector agrees wins.
	var calls []webhookCall
	var injecting *webhookCall
	blocked, blockedBy := "", ""
	var blocker *webhookEval // the Istio webhook that refuses the pod, when one does
	// The annotations istiod would refuse (the pod's own: the same for every
	// revision), and those it refuses when a revision is about to inject.
	badAnnotations := invalidAnnotations(w.Annotations)
	var refused []annotationProblem
	for _, e := range matched {
		rev := revs[e.revision]
		if rev == nil {
			rev = missingRevision(f, e.revision)
		}
		c := webhookCall{e: e, rev: rev, d: injectRequired(rev, w)}
		if c.d.unknown != "" {
			need(c.d.unknown)
		}
		if e.backendUnknown != "" && (e.failClosed || c.d.inject || c.d.unknown != "") {
			// Whether istiod can be reached decides: a failing call blocks
			// the pod (failurePolicy Fail) or skips injection (Ignore).
			need(e.backendUnknown)
		}
		if e.backendIssue != "" && e.failClosed && blocked == "" {
			blocked, blockedBy = fmt.Sprintf("webhook %s cannot be called: %s, and its failurePolicy is Fail, so the apiserver rejects the pod", e.fullName(), e.backendIssue), BlockedWebhook
			blocker = e
		}
		if c.d.inject && e.backendIssue == "" {
			// istiod checks the annotations before it picks the templates.
			if len(badAnnotations) > 0 && blocked == "" {
				blocked, blockedBy = "istiod refuses the pod at admission: "+badAnnotations[0].String(), BlockedAnnotation
				refused = badAnnotations
			}
			if tf, ok := templatesProblem(rev, w); ok && tf.Effect == EffectBlocks && blocked == "" {
				blocked, blockedBy = "istiod rejects the pod: "+tf.Source, BlockedTemplate
			}
		}
		calls = append(calls, c)
		if c.d.inject && e.backendIssue == "" {
			injecting = &calls[len(calls)-1]
		}
	}

	// Namespace labels.
	hasSelector := func(want string, object bool) *webhookEval {
		for _, e := range matched {
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
	if nsKnown { // unknown labels get no rows: the "namespace labels" row says so
		if v, ok := nsLabels[istio.LabelInjection]; !ok {
			add("namespace label istio-injection", "(not set)", EffectNone, nsSource)
		} else if v == "enabled" {
			if e := hasSelector("istio-injection in (enabled)", false); e != nil {
				add("namespace label istio-injection", quote(v), EffectInject, nsSource+"; selects webhook "+e.fullName())
			} else {
				add("namespace label istio-injection", quote(v), EffectWarning, nsSource+"; no active Istio webhook selects it (default revision deactivated or not installed)")
			}
		} else {
			add("namespace label istio-injection", quote(v), EffectBlocks, nsSource+"; every Istio webhook needs it absent or \"enabled\"")
		}
		if v, ok := nsLabels[istio.LabelRev]; !ok {
			add("namespace label istio.io/rev", "(not set)", EffectNone, nsSource)
		} else if _, both := nsLabels[istio.LabelInjection]; both {
			add("namespace label istio.io/rev", quote(v), EffectNone, nsSource+"; istio-injection takes precedence over it")
			r.Warn(WarnConflictingLabels, fmt.Sprintf("namespace %s has both istio-injection and istio.io/rev; istio.io/rev is ignored", w.Namespace))
		} else if e := hasSelector("istio.io/rev in", false); e != nil {
			via := "revision " + e.revision
			if e.tag != "" {
				via = "tag " + e.tag + " → revision " + e.revision
			}
			add("namespace label istio.io/rev", quote(v), EffectInject, nsSource+"; "+via+" (webhook "+e.fullName()+")")
		} else {
			add("namespace label istio.io/rev", quote(v), EffectWarning, nsSource+"; no active Istio webhook serves revision or tag "+quote(v))
		}
		if v, ok := nsLabels[istio.LabelDataplaneMode]; ok {
			add("namespace label istio.io/dataplane-mode", quote(v), EffectInfoOnly, nsSource)
		}
	}

	// Pod labels the webhook selectors read; the annotation they cannot see.
	podSource := "pod label"
	if w.Pod == nil {
		podSource = w.Kind + " " + w.Name + " pod template label"
	}
	if v, ok := w.Labels[istio.KeyInject]; !ok {
		add("pod label sidecar.istio.io/inject", "(not set)", EffectNone, podSource)
	} else if v == "false" {
		add("pod label sidecar.istio.io/inject", quote(v), EffectSkip, podSource+"; every Istio webhook's objectSelector excludes it")
	} else if e := hasSelector(istio.KeyInject+" in (true)", true); e != nil {
		add("pod label sidecar.istio.io/inject", quote(v), EffectInject, podSource+"; selects webhook "+e.fullName())
	} else {
		add("pod label sidecar.istio.io/inject", quote(v), EffectNone, podSource+"; the namespace's labels decide which webhook is called")
	}
	if v, ok := w.Labels[istio.LabelRev]; ok {
		if e := hasSelector("istio.io/rev in", true); e != nil {
			add("pod label istio.io/rev", quote(v), EffectInject, podSource+"; selects webhook "+e.fullName())
		} else if _, nsRev := nsLabels[istio.LabelRev]; !nsRev && nsKnown && nsLabels[istio.LabelInjection] == "" && v != "" && !revisionActive(evals, v) {
			add("pod label istio.io/rev", quote(v), EffectWarning, podSource+"; matches no active revision or tag: no Istio webhook serves "+quote(v))
		} else {
			add("pod label istio.io/rev", quote(v), EffectNone, podSource+"; only used when the namespace has neither istio-injection nor istio.io/rev")
		}
	}
	if v, ok := w.Annotations[istio.KeyInject]; ok {
		if _, label := w.Labels[istio.KeyInject]; !label && len(matched) == 0 && v == "true" {
			add("pod annotation sidecar.istio.io/inject", quote(v), EffectWarning, "pod annotation; webhook selectors only see labels, so it cannot select a webhook (use the label)")
		} else {
			add("pod annotation sidecar.istio.io/inject", quote(v), EffectNone, "pod annotation; invisible to webhook selectors, read by istiod once a webhook is called (deprecated: use the label)")
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

	// Every Istio webhook.
	if why, unknown := f.Unknown[FactWebhooks]; unknown {
		add("mutating webhooks", "unknown", EffectUnknown, why+" (which webhooks the apiserver calls)")
	}
	for _, e := range evals {
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
		add("webhook "+e.fullName(), value, effect, src)
	}
	for _, c := range calls {
		e := c.e
		switch {
		case e.backendIssue != "" && e.failClosed:
			add("webhook backend", e.backend, EffectBlocks, e.backendIssue+"; failurePolicy Fail: pod creation fails")
		case e.backendIssue != "":
			add("webhook backend", e.backend, EffectSkip, e.backendIssue+"; failurePolicy Ignore: pods are created without injection")
		default:
			add("webhook backend", e.backend, EffectNone, e.backendNote)
		}
	}
	if len(matched) > 1 {
		var names []string
		for _, e := range matched {
			names = append(names, e.fullName())
		}
		r.Warn(WarnOverlapping, "more than one Istio webhook matches ("+strings.Join(names, ", ")+"): each injects in turn; overlapping webhooks are a misconfiguration")
	}

	// Inside the injector, for each revision called.
	seen := map[string]bool{}
	for _, c := range calls {
		if seen[c.rev.name] {
			continue
		}
		seen[c.rev.name] = true
		prefix := ""
		if len(calls) > 1 {
			prefix = "[" + c.rev.name + "] "
		}
		if c.rev.configMap == "(not found)" {
			effect := EffectWarning
			if why, unknown := f.Unknown[FactConfigMaps]; unknown {
				effect = EffectUnknown
				add(prefix+"injector ConfigMap", "unknown", effect, why)
			} else {
				add(prefix+"injector ConfigMap", "none for revision "+quote(c.rev.name), effect, "istio-sidecar-injector[-<revision>]: policy assumed \"enabled\"")
			}
		} else if c.rev.err != nil {
			add(prefix+"injector ConfigMap", c.rev.configMap, EffectWarning, "unreadable: "+c.rev.err.Error())
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
			for _, af := range annotationFactors(w, badAnnotations) {
				af.Factor = prefix + af.Factor
				r.Factors = append(r.Factors, af)
			}
		}
	}
	if injecting != nil {
		if v := w.Annotations[istio.AnnotationInterceptionMode]; v == "NONE" {
			add(istio.AnnotationInterceptionMode, `"NONE"`, EffectInfoOnly, "pod annotation: the proxy is injected without istio-init, so no traffic is captured")
		}
		k := nativeSidecar(f, injecting.rev, w)
		r.Sidecar = k.kind
		if k.nodes != "" {
			add("node versions", k.nodes, EffectInfoOnly, "Node status.nodeInfo.kubeletVersion")
		}
		if k.kind == "" {
			add("sidecar kind", "unknown", EffectUnknown, k.why)
		} else {
			add("sidecar kind", k.kind, EffectInfoOnly, k.why)
		}
	}

	// What happened to a live pod.
	var st istioStatus
	if w.Pod != nil {
		st = readIstioStatus(w.Pod)
		injected := st.injected
		r.Injected = &injected
		r.InjectedRevision = st.revision
		if st.injected {
			kind := "container"
			if st.native {
				kind = "native sidecar (init container, restartPolicy Always)"
			}
			add(istio.AnnotationStatus, st.evidence, EffectInfoOnly, "pod (written by the injector)")
			add(istio.ProxyContainer, kind+", image "+st.image, EffectInfoOnly, "pod spec")
			if has := kindOf(st.native); r.Sidecar != "" && r.Sidecar != has {
				add("sidecar kind now", has+" → "+r.Sidecar, EffectWarning, "the pod has a "+has+" sidecar; created now it would get a "+r.Sidecar+" one (see sidecar kind)")
			}
			if want := revs[st.revision]; want != nil && want.version != "" && istio.ImageTag(st.image) != want.version {
				add("proxy version", st.image, EffectWarning, "revision "+st.revision+" now injects "+want.version+" ("+want.versionSource+"): restart to upgrade the proxy")
			}
			// What else rewrites the pod at admission, and what the
			// injector put in it: what the pod's containers are read against.
			r.OtherMutators, r.OtherMutatorsUnknown = otherMutators(f, w, nsLabels)
			r.InjectorImage = injectorImage(revs[st.revision], w.Pod.Annotations)
		} else {
			add(istio.AnnotationStatus, "(not set)", EffectInfoOnly, "pod: not injected")
		}
	}

	// Ambient, once what the pod has is known: istio-cni leaves pods with a
	// sidecar out.
	sidecar := injecting != nil
	if w.Pod != nil {
		sidecar = st.injected
	}
	amb := explainAmbient(f, w, nsLabels, sidecar, add)
	ambient := amb.enrolled
	r.AmbientCapture = amb.capture
	if amb.unknown != "" {
		ambient = amb.asked && !sidecar
		r.AmbientCapture = EffectUnknown
	}

	// Pods that could not be created: the owner's FailedCreate events.
	var policy *policyRefusal
	for _, ev := range w.Events {
		kind := RefusalOf(ev.Message)
		if pr, ok := refusalBy(f, w, nsLabels, ev.Message); ok && kind == "" && (pr.what == "" || injecting == nil) && r.RefusedBy == nil {
			// The platform's own refusal: named, not the mesh's.
			r.RefusedBy = &Refusal{By: pr.by, Fix: platformFix(pr, w)}
			if r.RefusedBy.Fix != "" {
				r.RefusedBy.Fix += retryNow(w)
			}
		}
		if pr, ok := thirdPartyRefusal(f, w, nsLabels, ev.Message); ok && (kind == "" || kind == BlockedWebhook) && injecting != nil {
			// Another webhook or a policy refuses what the injector added.
			kind = BlockedPolicy
			if blocked == "" {
				policy = &pr
			}
		}
		if kind == BlockedQuota && injecting == nil {
			continue // a quota refusing pods with no sidecar is not the mesh's
		}
		if kind != "" {
			add("event FailedCreate", truncate(ev.Message, 300), EffectBlocks, ev.InvolvedObject.Kind+" "+ev.InvolvedObject.Name+fmt.Sprintf(" (%d times, last %s)", max(ev.Count, 1), ev.LastTimestamp.UTC().Format("2006-01-02T15:04:05Z")))
			if blocked == "" {
				blocked, blockedBy = "the apiserver rejected pod creation: "+truncate(strings.Join(strings.Fields(ev.Message), " "), 300), kind
				if policy != nil {
					blocked += "; refused by " + policy.by + ", which rejects " + policy.what
				} else if ref, ok := parseWebhookRefusal(ev.Message); ok {
					// Which webhook: the one whose selectors match this
					// pod and whose URL the message quotes.
					acted := actedOn(matched, ref)
					switch {
					case len(acted) > 0:
						blocked += "; from " + describeActed(acted)
						if !ref.denied {
							blocker = acted[0]
						}
					default:
						blocked += fmt.Sprintf("; no webhook %q whose selectors match this pod posts to that URL now: the refusal is older than a change to the webhooks, or came from outside the mesh's", ref.webhook)
					}
				}
			}
		}
	}

	// Outcome. A known block decides whatever else is unknown.
	if blocked != "" {
		r.CreationBlocked, r.BlockedBy = true, blockedBy
	}
	if blocked == "" && len(undecided) > 0 {
		r.Ambient = ambient && !st.injected
		if st.injected {
			r.Revision = st.revision
		}
		unknownVerdict(r, w, st, undecided)
		return r
	}
	r.Expected = boolp(injecting != nil && blocked == "")
	r.Mismatch = boolp(false)
	if injecting != nil {
		r.Revision = injecting.rev.name
		r.Webhook = injecting.e.fullName()
	} else if st.injected {
		r.Revision = st.revision
	}
	if (ambient || amb.asked) && r.IsExpected() {
		r.Warn(WarnAmbientAndSidecar, "the pod is also selected for ambient mode; a pod with a sidecar is not captured by ztunnel")
		ambient = false
	} else if amb.asked && amb.excluded != "" && !st.injected {
		r.Warn(WarnAmbientExcluded, "istio.io/dataplane-mode asks for ambient mode, but "+amb.excluded)
	}
	if st.injected {
		ambient = false
	}
	r.Ambient = ambient
	if !ambient {
		r.AmbientCapture = ""
	} else if r.AmbientCapture == EffectUnknown && strings.HasPrefix(amb.unread, "forbidden") {
		// Decided but for how ambient mode captures it: name what settles it.
		r.Needs = append(r.Needs, permissionOf(amb.unread))
	}
	istioVerdict(r, w, st, evals, calls, blocked, blocker, nsLabels, amb)
	if policy != nil && r.BlockedBy == BlockedPolicy {
		r.Reason = "pod creation rejected by " + policy.by + " (it refuses what the injector adds)"
		r.Fix = policyFix(*policy, w) + retryNow(w)
	}
	if injecting != nil && !injecting.e.failClosed && blocked == "" {
		r.FailOpenWebhook, r.FailOpenFix = injecting.e.fullName(), webhookDownFix(w, nsLabels, evals, injecting.e)
		if w.Pod != nil && !st.injected && r.IsMismatch() {
			if when, ok := failedOpen(f, w, injecting.e, nsLabels); ok {
				failOpenVerdict(r, w, injecting.e, when)
			}
		}
	}
	if len(refused) > 0 {
		r.Reason = "refused at admission: invalid annotation " + refused[0].name
		r.Fix = annotationFix(w, refused)
	} else if keys := deniedByTemplate(blocked, w); len(keys) > 0 && r.BlockedBy == BlockedWebhook {
		// istiod's templates failed on an annotation's value: its refusal,
		// not a webhook that cannot be called.
		r.BlockedBy = BlockedAnnotation
		r.Reason = "refused at admission: istiod's injection template fails on the annotation " + strings.Join(keys, " or ")
		r.Fix = removeTemplateAnnotations(w, keys, "istiod's injection template cannot read the value (it expects JSON); or correct it")
		if r.Fix == "" {
			r.Fix = "remove or correct the annotation " + strings.Join(keys, " and ") + " in the pod's manifest (istiod's injection template cannot read its value), then re-create the pod"
		}
	} else if m := deniedAnnotation.FindStringSubmatch(blocked); m != nil && (r.BlockedBy == BlockedAnnotation || r.BlockedBy == BlockedWebhook && strings.Contains(blocked, "denied the request")) {
		// istiod's own refusal, read off the controller's events: the
		// webhook was called, and refused the annotation's value.
		r.BlockedBy = BlockedAnnotation
		r.Reason = "refused at admission: invalid annotation " + m[2]
		r.Fix = removeTemplateAnnotations(w, []string{m[2]}, "istiod refuses its value "+truncate(m[1], 80)+"; or correct it")
		if r.Fix == "" {
			r.Fix = "remove the annotation " + m[2] + " from the pod's manifest (istiod refuses its value " + truncate(m[1], 80) + "; or correct it), then re-create the pod"
		}
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

func matchWord(ok bool) string {
	if ok {
		return "matches"
	}
	return "does not match"
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
