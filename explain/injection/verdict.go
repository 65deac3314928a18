package injection

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// istioVerdict fills r's verdict, short reason, fix and mismatch from what
// was found.
func istioVerdict(r *InjectionReport, w *Workload, st istioStatus, evals []*webhookEval, calls []webhookCall, blocked string, blocker *webhookEval, nsLabels map[string]string, amb ambientOutcome) {
	sidecar := ""
	if r.Sidecar != "" {
		sidecar = ", as a " + r.Sidecar + " sidecar"
	}
	by := fmt.Sprintf("revision %s (webhook %s)%s", r.Revision, r.Webhook, sidecar)
	if tag := tagOf(evals, r.Webhook); tag != "" {
		by = fmt.Sprintf("revision %s through tag %s (webhook %s)%s", r.Revision, tag, r.Webhook, sidecar)
	}
	whyNot, enable := istioWhyNot(w, evals, calls, nsLabels)

	switch {
	case blocked != "":
		r.Verdict = "Pods cannot be created: " + blocked + "."
		r.Reason = "pod creation rejected by a webhook"
		if blocker != nil {
			r.Fix = webhookDownFix(w, nsLabels, evals, blocker) + retryNow(w)
			if fix := wrongPathFix(blocked, evals, blocker); fix != "" {
				r.Fix = fix + retryNow(w)
			}
		}
		switch r.BlockedBy {
		case BlockedQuota:
			r.Reason = "pod creation rejected by a quota (with the sidecar's resources)"
			if fix := quotaFix(w, blocked); fix != "" {
				r.Fix = fix
				if strings.HasPrefix(fix, "kubectl patch resourcequota") {
					r.Fix += retryNow(w) // a quota raised starts no new try of its own
				}
			} else if kind, _ := templateOwnerOf(w); kind == "Pod" {
				r.Fix = "kubectl describe resourcequota -n " + w.Namespace + "   # then set sidecar.istio.io/proxyCPU, proxyMemory (and their …Limit) in the pod's manifest within what it leaves, or raise the quota, and re-create the pod"
			} else {
				r.Fix = "kubectl describe resourcequota -n " + w.Namespace + "   # then size the sidecar (sidecar.istio.io/proxyCPU, proxyMemory and their …Limit annotations on the pod template) within what it leaves, or raise the quota"
			}
		case BlockedTemplate:
			if fix := removeTemplateAnnotations(w, []string{istio.AnnotationTemplates}, "istiod has no such template: its own (sidecar) is used then; or name one its injector ConfigMap has"); fix != "" {
				r.Fix = fix
			}
		case BlockedPodSecurity:
			r.Reason = "pod creation rejected by PodSecurity (istio-init's capabilities)"
			r.Fix = podSecurityFix(w, blocked)
		}
		r.Mismatch = boolp(w.Pod != nil)
		return
	case r.Ambient && !r.IsExpected():
		ambientVerdict(r, amb)
		return
	}

	expected := r.IsExpected()
	skips := ""
	switch {
	case w.Spec.HostNetwork:
		skips = "it uses the node's network (hostNetwork)"
	case slices.Contains(istioIgnoredNamespaces, w.Namespace):
		skips = "its namespace " + w.Namespace + " is one istiod never injects"
	}
	if !expected && !st.injected && skips != "" && asksForSidecar(w, nsLabels) {
		r.Warn(WarnInjectorSkips, "a sidecar is asked for, but istiod never injects this pod: "+skips)
	} else if !expected && !st.injected && len(calls) == 0 && askedForInjection(w, nsLabels) {
		msg := "a mistake to fix, not a choice"
		switch {
		case strings.HasPrefix(whyNot, revisionGone):
			msg = whyNot // which revisions and tags exist
		case podAsksWithNamespaceKey(w):
			msg = istio.LabelInjection + "=enabled is a namespace label: on a pod no webhook reads it (a pod asks with the label " + istio.KeyInject + "=\"true\"); " + whyNot
		case w.Labels[istio.KeyInject] == "true":
			msg = "the pod's label " + istio.KeyInject + "=\"true\" is overruled: " + whyNot
		case w.Labels[istio.LabelRev] != "" && nsLabels[istio.LabelInjection] == "disabled":
			msg = fmt.Sprintf("the pod's label %s=%q is overruled: %s", istio.LabelRev, w.Labels[istio.LabelRev], whyNot)
		case nearMiss(w, nsLabels) != "":
			msg = nearMiss(w, nsLabels)
		}
		r.Warn(WarnAskedNotDone, "injection is asked for, but it does not happen: "+msg)
	}
	if !expected && !st.injected && w.Labels[istio.KeyInject] == "false" && w.Annotations[istio.KeyInject] == "true" {
		// Both ways at once: the label decides (every webhook's object
		// selector excludes it), the annotation is read only when a
		// webhook calls the injector.
		r.Warn(WarnConflictingLabels, "the pod's annotation "+istio.KeyInject+"=\"true\" asks for a sidecar, its label "+istio.KeyInject+"=\"false\" refuses one, and the label decides: no Istio webhook calls the injector for it")
	}
	if pr := w.Labels[istio.LabelRev]; pr != "" && expected && nsLabels[istio.LabelInjection] == "enabled" && pr != r.Revision && pr != tagOf(evals, r.Webhook) {
		r.Warn(WarnConflictingLabels, fmt.Sprintf("the pod's label istio.io/rev=%q is overruled: its namespace's istio-injection=enabled selects revision %s",
			pr, r.Revision))
		if r.Fix == "" {
			r.Fix = fmt.Sprintf("kubectl label namespace %s istio-injection- %s=%s   # a choice: the namespace moves to revision %s (its other pods too, at their restart); or remove the pod's label %s to keep %s",
				w.Namespace, istio.LabelRev, pr, pr, istio.LabelRev, r.Revision)
			if w.Pod != nil {
				r.Fix += "\n" + restartCommand(w)
			}
		}
	}
	if w.Pod == nil {
		if expected {
			r.Verdict = "Pods created from this template will be injected by " + by + "."
			r.Reason = "will be injected"
			return
		}
		r.Verdict = "Pods created from this template will not be injected: " + whyNot + "."
		r.Reason = "will not be injected: " + whyNot
		r.Fix = enable
		return
	}

	restart := restartCommand(w)
	switch {
	case st.injected && expected && (st.revision == "" || st.revision == r.Revision):
		r.Verdict = "Injected by " + by + "; re-created now, it would be injected the same way."
		r.Reason = "injected"
	case st.injected && expected:
		r.Mismatch = boolp(true)
		r.Verdict = fmt.Sprintf("Injected by revision %s, but re-created now it would be injected by %s.", st.revision, by)
		r.Reason = fmt.Sprintf("injected by %s; %s would inject it now: restart", st.revision, r.Revision)
		r.Fix = restart
	case st.injected:
		r.Mismatch = boolp(true)
		rev := ""
		if st.revision != "" {
			rev = " (revision " + st.revision + ")"
		}
		r.Verdict = "Injected" + rev + " when it was created, but it would not be now: " + whyNot + "."
		r.Reason = "injected; would not be now: restart to remove the sidecar"
		r.Fix = restart
		if strings.HasPrefix(whyNot, revisionGone) && enable != "" {
			// The namespace asks for a revision that is gone: a restart
			// alone would drop the sidecar; the label first.
			r.Reason = "injected; would not be now: the namespace's revision is gone"
			r.Fix = enable + "\n" + restart
		}
	case expected:
		r.Mismatch = boolp(true)
		r.Verdict = "Not injected, but it would be if re-created now, by " + by + ": it was created before injection was enabled for it (or while the injector skipped or could not reach it)."
		r.Reason = "created before injection was enabled: restart"
		r.Fix = restart
	default:
		r.Verdict = "Not injected, and it would not be if re-created: " + whyNot + "."
		r.Reason = whyNot
		switch {
		case strings.HasPrefix(enable, "kubectl patch") && !strings.HasPrefix(enable, "kubectl patch mutatingwebhookconfiguration"), strings.HasPrefix(enable, "kubectl get job"):
			r.Fix = enable // a changed template rolls the pods out by itself; a re-created Job makes new ones
		case enable != "":
			r.Fix = enable + "\n" + restart
		}
	}
}

// askedForInjection: the namespace or the pod asks for injection in a way
// that selects no webhook (an istio.io/rev naming no active revision or
// tag; the annotation sidecar.istio.io/inject="true", which selectors do not
// see) — a mistake, not a choice; a pod that opts out is not asking.
// asksForSidecar: the pod's label or its namespace's asks for a sidecar.
func asksForSidecar(w *Workload, nsLabels map[string]string) bool {
	if w.Labels[istio.KeyInject] == "false" {
		return false
	}
	_, rev := nsLabels[istio.LabelRev]
	return w.Labels[istio.KeyInject] == "true" || nsLabels[istio.LabelInjection] == "enabled" || rev
}

func askedForInjection(w *Workload, nsLabels map[string]string) bool {
	if w.Labels[istio.KeyInject] == "false" || w.Annotations[istio.KeyInject] == "false" {
		return false
	}
	_, rev := nsLabels[istio.LabelRev]
	_, injection := nsLabels[istio.LabelInjection]
	// The pod's own istio.io/rev asks for its revision; a namespace's
	// istio-injection=disabled overrules it (no webhook then selects it).
	podRev := w.Labels[istio.LabelRev] != "" && (!rev || nsLabels[istio.LabelInjection] == "disabled")
	return rev && !injection || podRev && (!injection || nsLabels[istio.LabelInjection] == "disabled") || w.Annotations[istio.KeyInject] == "true" && w.Labels[istio.KeyInject] == "" ||
		w.Labels[istio.KeyInject] == "true" || podAsksWithNamespaceKey(w) || nearMiss(w, nsLabels) != ""
}

// nearMiss is an injection label whose value asks for a sidecar in a way
// no webhook selects: the namespace's istio-injection other than "enabled"
// or "disabled" (istio-injection=true), the pod's sidecar.istio.io/inject
// other than "true" or "false" (inject=yes). "" when there is none.
func nearMiss(w *Workload, nsLabels map[string]string) string {
	if v, ok := nsLabels[istio.LabelInjection]; ok && v != "enabled" && v != "disabled" {
		return fmt.Sprintf("namespace label istio-injection=%q is neither \"enabled\" nor \"disabled\": no Istio webhook selects it, and it keeps every other one off", v)
	}
	if v, ok := w.Labels[istio.KeyInject]; ok && v != "true" && v != "false" {
		return fmt.Sprintf("pod label %s=%q is not \"true\": the webhooks' object selectors match only \"true\"", istio.KeyInject, v)
	}
	_, inj := nsLabels[istio.LabelInjection]
	_, rev := nsLabels[istio.LabelRev]
	if v := nsLabels[istio.KeyInject]; (v == "true" || v == "enabled") && !inj && !rev {
		return fmt.Sprintf("namespace label %s=%q is a pod's label: on a namespace no webhook reads it (a namespace asks with %s=enabled, or %s=REVISION)", istio.KeyInject, v, istio.LabelInjection, istio.LabelRev)
	}
	return ""
}

// podAsksWithNamespaceKey: the pod carries the namespace's injection label
// (istio-injection=enabled) as a label or annotation of its own, where no
// webhook reads it.
func podAsksWithNamespaceKey(w *Workload) bool {
	return w.Labels[istio.LabelInjection] == "enabled" || w.Annotations[istio.LabelInjection] == "enabled"
}

// ambientVerdict says what ambient mode makes of a workload it enrolls
// (or whose enrollment is unknown), which gets no sidecar.
func ambientVerdict(r *InjectionReport, amb ambientOutcome) {
	switch r.AmbientCapture {
	case AmbientCaptured:
		r.Verdict = "No sidecar, none expected: ztunnel captures the pod's traffic in ambient mode; " + amb.why + "."
		r.Reason = "ambient mode: captured"
	case AmbientWillCapture:
		r.Verdict = "Pods created from this template get no sidecar: ambient mode captures them through ztunnel; " + amb.why + "."
		r.Reason = "ambient mode: will be captured"
	case AmbientPending, AmbientNotSetUp:
		r.Mismatch = boolp(true)
		r.Verdict = "No sidecar, none expected, but ztunnel does not capture the pod: " + amb.why + "."
		r.Reason = "ambient mode, not captured: " + r.AmbientCapture
		r.Fix = amb.fix
	default:
		r.Verdict = "No sidecar, none expected: the pod is in ambient mode (istio.io/dataplane-mode), but whether ztunnel captures it is unknown: " + amb.unknown + " could not be read."
		r.Reason = "ambient mode: capture unknown"
		r.Mismatch = nil
	}
}

func tagOf(evals []*webhookEval, full string) string {
	for _, e := range evals {
		if e.fullName() == full {
			return e.tag
		}
	}
	return ""
}

// istioWhyNot says why w gets no sidecar, and how to enable injection.
func istioWhyNot(w *Workload, evals []*webhookEval, calls []webhookCall, nsLabels map[string]string) (string, string) {
	ns := w.Namespace
	if v, ok := nsLabels[istio.LabelInjection]; ok && v != "enabled" {
		why := fmt.Sprintf("namespace label istio-injection=%q blocks every Istio webhook", v)
		if rev, both := nsLabels[istio.LabelRev]; both {
			// istio-injection=enabled beside istio.io/rev would be the
			// conflict KM-INJ-003 warns of: the blocking label goes, and
			// istio.io/rev decides, when it names a revision that exists.
			revs, tags := activeRevisions(evals)
			if slices.Contains(revs, rev) || slices.Contains(tags, rev) {
				return why, fmt.Sprintf("kubectl label namespace %s istio-injection-   # istio.io/rev=%s then selects its revision", ns, rev)
			}
			w, fix := revisionNotFound(ns, rev, evals)
			if fix != "" {
				fix = fmt.Sprintf("kubectl label namespace %s istio-injection-\n", ns) + fix
			}
			return why + "; " + w, fix
		}
		if rev := w.Labels[istio.LabelRev]; rev != "" && v == "disabled" {
			revs, tags := activeRevisions(evals)
			if slices.Contains(revs, rev) || slices.Contains(tags, rev) {
				// The pod asks for a revision of its own: without the
				// blocking label, that revision's object webhook selects it.
				return why, fmt.Sprintf("kubectl label namespace %s istio-injection-   # a choice: the pod's istio.io/rev=%s then selects its revision (the namespace's other pods are injected only where they ask)", ns, rev)
			}
		}
		return why, fmt.Sprintf("kubectl label namespace %s istio-injection=enabled --overwrite", ns)
	}
	if w.Labels[istio.KeyInject] == "false" {
		return "pod label sidecar.istio.io/inject=\"false\" excludes it from every Istio webhook",
			setTemplateLabel(w, istio.KeyInject, "")
	}
	if len(calls) == 0 {
		if why, fix, ok := createNotCovered(evals); ok {
			return why, fix
		}
		active := activeNamespaceWebhooks(evals)
		if rev, ok := nsLabels[istio.LabelRev]; ok {
			if _, both := nsLabels[istio.LabelInjection]; !both {
				return revisionNotFound(ns, rev, evals)
			}
		}
		if rev, present := w.Labels[istio.LabelRev]; present && strings.TrimSpace(rev) == "" {
			// Empty, it names no revision; there, it fails every object
			// webhook's "istio.io/rev DoesNotExist".
			return `the pod's label istio.io/rev is empty: it names no revision, and its presence keeps away the webhook that takes a pod by its sidecar.istio.io/inject=true label (it asks that istio.io/rev not exist)`,
				setTemplateLabel(w, istio.LabelRev, "")
		}
		if rev := w.Labels[istio.LabelRev]; rev != "" {
			if _, nsRev := nsLabels[istio.LabelRev]; !nsRev {
				if _, inj := nsLabels[istio.LabelInjection]; !inj && !revisionActive(evals, rev) {
					return podRevisionNotFound(w, rev, evals)
				}
			}
		}
		if v := w.Labels[istio.KeyInject]; v != "" && v != "true" && v != "false" {
			return nearMiss(w, nsLabels), setTemplateLabel(w, istio.KeyInject, "true")
		}
		if v := w.Annotations[istio.KeyInject]; v == "true" && w.Labels[istio.KeyInject] == "" {
			return "no Istio webhook matches: the annotation sidecar.istio.io/inject=\"true\" is invisible to webhook selectors (only the label is seen)",
				setTemplateLabel(w, istio.KeyInject, "true")
		}
		if why, fix, ok := namespaceOnlyRevision(w, ns, nsLabels, evals); ok {
			return why, fix
		}
		why := "no Istio webhook matches: the namespace has no istio-injection=enabled or istio.io/rev label, and the pod no sidecar.istio.io/inject=true or istio.io/rev label"
		if len(evals) == 0 {
			why = "no Istio injection webhook is installed"
		}
		if len(active) == 0 {
			return why, ""
		}
		return why, fmt.Sprintf("kubectl label namespace %s %s", ns, active[0])
	}
	last := calls[len(calls)-1]
	if last.e.backendIssue != "" {
		return fmt.Sprintf("webhook %s is skipped (%s, failurePolicy Ignore)", last.e.fullName(), last.e.backendIssue), webhookDownFix(w, nsLabels, evals, last.e)
	}
	why := "istiod skips it: " + last.d.reason
	switch {
	case w.Spec.HostNetwork, strings.HasPrefix(last.d.reason, "namespace "):
		return why, ""
	case strings.Contains(last.d.reason, istio.KeyInject):
		return why, setTemplateLabel(w, istio.KeyInject, "true")
	default:
		return why, setTemplateLabel(w, istio.KeyInject, "true")
	}
}

// revisionNotFound says that the namespace's istio.io/rev names no active
// revision or tag, which ones exist, and the fix: the label set to one
// that exists (the default first), never to istio-injection, which with
// istio.io/rev left in place conflicts with it. With no revision label to
// name, the wrong label goes and istio-injection=enabled comes in its
// place, when a webhook selects that; with none, no revision is invented.
const revisionGone = "no active Istio webhook serves revision or tag"

func revisionNotFound(ns, rev string, evals []*webhookEval) (string, string) {
	known, names := knownRevisions(evals)
	why := fmt.Sprintf(revisionGone+" %q (namespace label istio.io/rev)", rev)
	if len(known) > 0 {
		why += "; the cluster has " + strings.Join(known, " and ")
	}
	switch {
	case len(names) > 0:
		return why, fmt.Sprintf("kubectl label namespace %s %s=%s --overwrite   # a revision or tag that exists (%s)", ns, istio.LabelRev, names[0], strings.Join(known, "; "))
	case slices.Contains(activeNamespaceWebhooks(evals), "istio-injection=enabled"):
		why += "; no webhook selects an istio.io/rev value, istio-injection=enabled selects the default injector"
		return why, fmt.Sprintf("kubectl label namespace %s %s- istio-injection=enabled   # the wrong label removed, so that the two do not conflict", ns, istio.LabelRev)
	}
	why += "; no active Istio revision or tag is known"
	return why, ""
}

// knownRevisions says which revisions and tags active webhooks serve
// ("revisions a, b", "tags c"), and their names, the default first.
func knownRevisions(evals []*webhookEval) (known, names []string) {
	revs, tags := activeRevisions(evals)
	if len(revs) > 0 {
		known = append(known, "revisions "+strings.Join(revs, ", "))
	}
	if len(tags) > 0 {
		known = append(known, "tags "+strings.Join(tags, ", "))
	}
	names = append(append([]string(nil), revs...), tags...)
	if slices.Contains(names, "default") {
		names = append([]string{"default"}, slices.DeleteFunc(names, func(n string) bool { return n == "default" })...)
	}
	return known, names
}

// revisionActive: an active webhook serves rev (a revision or a tag).
func revisionActive(evals []*webhookEval, rev string) bool {
	revs, tags := activeRevisions(evals)
	return slices.Contains(revs, rev) || slices.Contains(tags, rev)
}

// podRevisionNotFound says that the pod's own label istio.io/rev (in a
// namespace with no injection label, where it is what selects a webhook)
// names no active revision or tag, which exist, and the fix: the label set
// to one that exists on the pod's template.
func podRevisionNotFound(w *Workload, rev string, evals []*webhookEval) (string, string) {
	known, names := knownRevisions(evals)
	why := fmt.Sprintf(revisionGone+" %q: the pod's label istio.io/rev=%q matches no active revision or tag", rev, rev)
	if len(known) == 0 {
		return why + "; no active Istio revision or tag is known", ""
	}
	why += "; the cluster has " + strings.Join(known, " and ")
	return why, setTemplateLabel(w, istio.LabelRev, names[0]) + "   # a revision or tag that exists (" + strings.Join(known, "; ") + ")"
}

// activeRevisions are the istio.io/rev values an active Istio webhook
// selects namespaces by: revisions, and tags (a webhook configuration with
// an istio.io/tag label), each sorted.
func activeRevisions(evals []*webhookEval) (revs, tags []string) {
	const sel = "istio.io/rev in ("
	seen := map[string]bool{}
	for _, e := range evals {
		if e.deactivated || !e.rulesMatch {
			continue
		}
		i := strings.Index(e.nsSelector, sel)
		if i < 0 {
			continue
		}
		for _, v := range strings.Split(strings.SplitN(e.nsSelector[i+len(sel):], ")", 2)[0], ",") {
			if v = strings.TrimSpace(v); v == "" || seen[v] {
				continue
			}
			seen[v] = true
			if e.tag != "" && e.tag == v {
				tags = append(tags, v)
			} else {
				revs = append(revs, v)
			}
		}
	}
	sort.Strings(revs)
	sort.Strings(tags)
	return revs, tags
}

// activeNamespaceWebhooks lists namespace labels that select an active Istio
// webhook, preferred first: istio-injection=enabled, then istio.io/rev=<each>.
func activeNamespaceWebhooks(evals []*webhookEval) []string {
	var out []string
	seen := map[string]bool{}
	for _, pass := range []string{"istio-injection in (enabled)", "istio.io/rev in ("} {
		for _, e := range evals {
			if e.deactivated || !e.rulesMatch {
				continue
			}
			i := strings.Index(e.nsSelector, pass)
			if i < 0 {
				continue
			}
			label := "istio-injection=enabled"
			if strings.HasPrefix(pass, istio.LabelRev) {
				rest := e.nsSelector[i+len(pass):]
				label = "istio.io/rev=" + strings.SplitN(strings.SplitN(rest, ")", 2)[0], ",", 2)[0]
			}
			if !seen[label] {
				seen[label] = true
				out = append(out, label)
			}
		}
	}
	return out
}

// setTemplateLabel is the command that sets (or, with value "", removes) a
// label on the pod template that creates w's pods.
func setTemplateLabel(w *Workload, key, value string) string {
	kind, name := w.Kind, w.Name
	if w.Owner != nil {
		kind, name = w.Owner.Kind, w.Owner.Name
	}
	if kind == "Job" {
		v := &value
		if value == "" {
			v = nil
		}
		return RecreateJob(name, w.Namespace, nil, map[string]*string{key: v})
	}
	if kind == "Pod" || kind == "ReplicaSet" && w.Owner != nil {
		if value == "" {
			return fmt.Sprintf("kubectl label pod %s -n %s %s-   # then re-create the pod", w.Name, w.Namespace, key)
		}
		return fmt.Sprintf("set the label %s=%q in the pod's manifest and re-create it", key, value)
	}
	v := "null"
	if value != "" {
		v = fmt.Sprintf("%q", value)
	}
	// Spaces between the JSON's tokens: still the same patch, and a
	// terminal's output can wrap it inside the quotes.
	path := `{"spec": {"template": {"metadata": {"labels": {%q: %s}}}}}`
	if kind == "CronJob" {
		path = `{"spec": {"jobTemplate": {"spec": {"template": {"metadata": {"labels": {%q: %s}}}}}}}`
	}
	return fmt.Sprintf("kubectl patch %s %s -n %s --type merge -p '%s'", strings.ToLower(kind), name, w.Namespace, fmt.Sprintf(path, key, v))
}

// restartCommand re-creates a live pod so that injection is decided again:
// a Deployment's by a rollout restart; a StatefulSet's or a DaemonSet's by
// deleting the pod, which its controller re-creates whatever its update
// strategy (a rollout restart replaces none under OnDelete, and none below
// a StatefulSet's partition).
func restartCommand(w *Workload) string {
	if w.Owner != nil {
		switch w.Owner.Kind {
		case "Deployment":
			return fmt.Sprintf("kubectl rollout restart %s/%s -n %s", strings.ToLower(w.Owner.Kind), w.Owner.Name, w.Namespace)
		case "StatefulSet", "DaemonSet":
			return fmt.Sprintf("kubectl delete pod %s -n %s   # its %s %s re-creates it, whatever its update strategy (OnDelete, a partition)", w.Name, w.Namespace, w.Owner.Kind, w.Owner.Name)
		case "Job":
			if w.Pod != nil && (w.Pod.Status.Phase == corev1.PodSucceeded || w.Pod.Status.Phase == corev1.PodFailed) {
				// A finished pod is not run again: the Job's next pod is
				// decided anew.
				return fmt.Sprintf("# pod %s has finished: the next pod of its Job %s (or a CronJob's next Job) is decided anew; kubectl create job --from=cronjob/NAME runs a CronJob's now", w.Name, w.Owner.Name)
			}
			return fmt.Sprintf("kubectl delete pod %s -n %s   # its %s %s creates it again", w.Name, w.Namespace, w.Owner.Kind, w.Owner.Name)
		default:
			return fmt.Sprintf("kubectl delete pod %s -n %s   # its %s %s creates it again", w.Name, w.Namespace, w.Owner.Kind, w.Owner.Name)
		}
	}
	if w.Pod != nil && w.Pod.Annotations[istio.AnnotationStatus] == "" {
		// A bare pod without the sidecar: created again as it is, the
		// injector decides on it anew (nothing of the mesh to carry over
		// but istio-cni's mark of an ambient pod, which is dropped).
		strip := ""
		if _, ok := w.Pod.Annotations[istio.AnnotationRedirection]; ok {
			strip = fmt.Sprintf(` | kubectl patch --local -f - --type=merge -p '{"metadata":{"annotations":{%q:null}}}' -o json`, istio.AnnotationRedirection)
		}
		return fmt.Sprintf("kubectl get pod %s -n %s -o json%s | kubectl replace --force -f -   # a bare pod: no controller re-creates it; this deletes it and creates it again as it is, and admission decides anew", w.Name, w.Namespace, strip)
	}
	return fmt.Sprintf("kubectl delete pod %s -n %s   # a bare pod: create it again from its manifest (no controller re-creates it)", w.Name, w.Namespace)
}

func boolp(b bool) *bool { return &b }

// unknownVerdict says what is known of w when a fact that decides whether it
// would be injected could not be read: what happened to a live pod (its own
// status), that the rest is unknown and why, and which permissions would
// settle it. No fix: none can be built on an unknown.
func unknownVerdict(r *InjectionReport, w *Workload, st istioStatus, undecided []string) {
	r.Expected, r.Mismatch, r.Sidecar, r.Webhook, r.Fix = nil, nil, "", "", ""
	for _, u := range undecided {
		r.Needs = append(r.Needs, permissionOf(u))
	}
	why := strings.Join(undecided, "; ")
	short := "needs " + r.Needs[0]
	if len(r.Needs) > 1 {
		short += fmt.Sprintf(" (and %d more)", len(r.Needs)-1)
	}
	switch {
	case w.Pod == nil:
		r.Verdict = "Unknown whether pods created from this template will be injected: " + why + "."
		r.Reason = "unknown: " + short
	case st.injected:
		rev := ""
		if st.revision != "" {
			rev = " by revision " + st.revision
		}
		r.Verdict = "Injected" + rev + " when it was created (the pod says so); whether it would be injected if re-created now is unknown: " + why + "."
		r.Reason = "injected; unknown whether it would be now: " + short
	default:
		r.Verdict = "Not injected; whether it would be if re-created now is unknown: " + why + "."
		r.Reason = "not injected; unknown whether it would be now: " + short
	}
}

// permissionOf turns the reason a fact is unknown into the permission that
// would settle it ("forbidden: the user may not list nodes" → "list nodes").
func permissionOf(why string) string {
	return strings.TrimPrefix(strings.TrimPrefix(why, "forbidden: the user may not "), "forbidden: ")
}
