package injection

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// webhookRefusal is what the apiserver's message says of a webhook it
// called for a pod: which webhook (by the name every revision gives its
// webhooks alike), the URL it posted to, and whether the webhook answered
// and denied the pod or could not be called.
type webhookRefusal struct {
	webhook string
	url     string
	denied  bool
	problem string
}

var (
	failedCalling = regexp.MustCompile(`failed calling webhook "([^"]+)": (?:failed to call webhook: )?(?:Post "([^"]+)": )?(.*)`)
	deniedBy      = regexp.MustCompile(`admission webhook "([^"]+)" denied the request:? ?(.*)`)
)

// parseWebhookRefusal reads a FailedCreate event's or a dry run's message.
func parseWebhookRefusal(msg string) (webhookRefusal, bool) {
	msg = strings.Join(strings.Fields(msg), " ")
	if m := failedCalling.FindStringSubmatch(msg); m != nil {
		// The apiserver adds its timeout to the URL it posts to.
		url, _, _ := strings.Cut(m[2], "?")
		return webhookRefusal{webhook: m[1], url: url, problem: strings.TrimSpace(m[3])}, true
	}
	if m := deniedBy.FindStringSubmatch(msg); m != nil {
		return webhookRefusal{webhook: m[1], denied: true, problem: strings.TrimSpace(m[2])}, true
	}
	return webhookRefusal{}, false
}

// backendURL is the URL the apiserver posts a webhook's requests to: its
// url, or the one it builds from its service.
func backendURL(cc admissionregistrationv1.WebhookClientConfig) string {
	switch {
	case cc.URL != nil:
		return *cc.URL
	case cc.Service != nil:
		port := int32(443)
		if cc.Service.Port != nil {
			port = *cc.Service.Port
		}
		path := ""
		if cc.Service.Path != nil {
			path = *cc.Service.Path
		}
		return fmt.Sprintf("https://%s.%s.svc:%d%s", cc.Service.Name, cc.Service.Namespace, port, path)
	}
	return ""
}

// actedOn are the webhooks that produced a refusal: of those whose
// selectors and rules match this pod, the ones with the quoted name and,
// when the message quotes where it posted, that URL. Every revision names
// its webhooks alike: the name alone never says which one it was.
func actedOn(matched []*webhookEval, ref webhookRefusal) []*webhookEval {
	var out []*webhookEval
	for _, e := range matched {
		if e.name != ref.webhook {
			continue
		}
		if ref.url != "" && e.url != "" && e.url != ref.url {
			continue
		}
		out = append(out, e)
	}
	return out
}

// describeActed names the webhook configurations that acted, each with
// where the apiserver calls it: two that could have are both said.
func describeActed(acted []*webhookEval) string {
	var parts []string
	for _, e := range acted {
		s := "MutatingWebhookConfiguration " + e.config + " (webhook " + e.name + ", revision " + e.revision
		if e.tag != "" {
			s += " through tag " + e.tag
		}
		s += ", " + e.backend + ", failurePolicy " + map[bool]string{true: "Fail", false: "Ignore"}[e.failClosed] + ")"
		parts = append(parts, s)
	}
	if len(parts) > 1 {
		return "one of " + strings.Join(parts, " or ")
	}
	return strings.Join(parts, "")
}

// answeringRevisions are the revisions and tags other than e's whose
// webhooks are active and not known to be down, the default first: where
// a namespace can move while e's istiod does not answer.
func answeringRevisions(evals []*webhookEval, e *webhookEval) []string {
	down := map[string]bool{}
	for _, o := range evals {
		if o.backendIssue != "" || o.url != "" && o.url == e.url {
			down[o.revision] = true
			if o.tag != "" {
				down[o.tag] = true
			}
		}
	}
	revs, tags := activeRevisions(evals)
	var out []string
	for _, v := range append(revs, tags...) {
		if v == e.revision || v == e.tag || down[v] || slices.Contains(out, v) {
			continue
		}
		out = append(out, v)
	}
	if i := slices.Index(out, "default"); i > 0 {
		out = append([]string{"default"}, slices.Delete(out, i, i+1)...)
	}
	return out
}

// webhookDownFix is the fix for an Istio webhook that cannot be called for
// w's pods: move what selects it (the namespace's label, or the pod
// template's) to a revision that answers, or bring its istiod back. The
// choice is said: only the user knows whether the revision is gone for
// good.
func webhookDownFix(w *Workload, nsLabels map[string]string, evals []*webhookEval, e *webhookEval) string {
	ns := w.Namespace
	alts := answeringRevisions(evals, e)
	why := fmt.Sprintf("revision %s's istiod does not answer at %s", e.revision, e.url)
	if e.backendIssue != "" {
		why = fmt.Sprintf("revision %s's webhook cannot be called: %s", e.revision, e.backendIssue)
	} else if e.url == "" {
		why = fmt.Sprintf("revision %s's webhook cannot be called (%s)", e.revision, e.backend)
	}
	podRev := w.Labels[istio.LabelRev]
	switch {
	case len(alts) == 0:
	case podRev != "" && strings.Contains(e.objSelector, istio.LabelRev):
		return setTemplateLabel(w, istio.LabelRev, alts[0]) + "   # " + why + ": a revision that answers (" + strings.Join(alts, ", ") + "); or start that istiod and keep the label"
	case nsLabels[istio.LabelRev] != "" && strings.Contains(e.nsSelector, istio.LabelRev):
		return fmt.Sprintf("kubectl label namespace %s %s=%s --overwrite   # %s: move the namespace to a revision that answers (%s); or start that istiod and keep the label",
			ns, istio.LabelRev, alts[0], why, strings.Join(alts, ", "))
	case nsLabels[istio.LabelInjection] == "enabled" && strings.Contains(e.nsSelector, istio.LabelInjection):
		return fmt.Sprintf("kubectl label namespace %s %s- %s=%s   # %s: move the namespace to a revision that answers (%s); or start that istiod and keep the label",
			ns, istio.LabelInjection, istio.LabelRev, alts[0], why, strings.Join(alts, ", "))
	}
	return fmt.Sprintf("kubectl delete mutatingwebhookconfiguration %s   # only if revision %s is gone for good (%s; its pods are then created without its sidecar); otherwise start that istiod so that it answers",
		e.config, e.revision, why)
}

// failedOpen says whether the Istio webhook e (failurePolicy Ignore), which
// selects w's live pod now, already selected it when the pod was created:
// the webhook's configuration existed, and so did the namespace labels its
// selector reads (as the namespace's managed fields date them). Then the
// pod has no sidecar not because it is older than injection, but because
// the webhook did not answer and the apiserver let it through. false when
// that cannot be told (a date not recorded).
func failedOpen(f *ClusterFacts, w *Workload, e *webhookEval, nsLabels map[string]string) (string, bool) {
	p := w.Pod
	if p == nil || p.CreationTimestamp.IsZero() {
		return "", false
	}
	var since time.Time
	for i := range f.Webhooks {
		if f.Webhooks[i].Name == e.config {
			since = f.Webhooks[i].CreationTimestamp.Time
		}
	}
	if since.IsZero() {
		return "", false
	}
	what := "MutatingWebhookConfiguration " + e.config
	if ns := f.Namespaces[w.Namespace]; ns != nil {
		for _, k := range []string{istio.LabelRev, istio.LabelInjection} {
			if _, ok := nsLabels[k]; !ok || !strings.Contains(e.nsSelector, k+" ") {
				continue
			}
			at, ok := labelSetAt(ns, k)
			if !ok {
				return "", false
			}
			if at.After(since) {
				since, what = at, "the namespace's label "+k
			}
		}
	}
	if !p.CreationTimestamp.After(since) {
		return "", false
	}
	return fmt.Sprintf("it was created at %s, after %s was in place (%s)", p.CreationTimestamp.UTC().Format(time.RFC3339), what, since.UTC().Format(time.RFC3339)), true
}

// labelSetAt is when a namespace's label was last written, as its managed
// fields record it.
func labelSetAt(ns *corev1.Namespace, key string) (time.Time, bool) {
	needle := `"f:` + key + `"`
	var at time.Time
	found := false
	for _, mf := range ns.ManagedFields {
		if mf.FieldsV1 == nil || mf.Time == nil || !strings.Contains(mf.FieldsV1.GetRawString(), needle) {
			continue
		}
		found = true
		if mf.Time.After(at) {
			at = mf.Time.Time
		}
	}
	return at, found
}

// failOpenVerdict answers for a live pod without a sidecar that a webhook
// with failurePolicy Ignore selected when it was created: the webhook did
// not answer, and a restart before it answers gives the same pod.
func failOpenVerdict(r *InjectionReport, w *Workload, e *webhookEval, when string) {
	r.Verdict = fmt.Sprintf("Not injected, though %s selected it when it was created (%s): its failurePolicy Ignore let the apiserver create the pod without a sidecar when the webhook did not answer. Re-created while it does not answer, the pod again gets no sidecar.",
		describeActed([]*webhookEval{e}), when)
	r.Reason = "webhook " + e.fullName() + " failed open (failurePolicy Ignore): restart only once it answers"
	r.FailedOpen = true
	// Each line works when pasted; the check between them is a comment (a
	// check that finds the fault exits 4).
	verify := "# then, once a dry run shows the sidecar (kubectl mesh why-injected pod/" + w.Name + " -n " + w.Namespace + " --verify; if it does already, the webhook answers again and the restart alone is the fix):"
	r.Fix = r.FailOpenFix + "\n" + verify + "\n" + restartCommand(w)
}

// retryNow is the line that has a refused workload's controller create its
// pods at once after a fix outside its template (a namespace's label, a
// webhook, a policy): its own retries back off, to minutes. "" for a
// workload with no pods to create now, or a template (a fix to it rolls
// the pods out by itself).
func retryNow(w *Workload) string {
	if w.Pod != nil {
		return ""
	}
	switch kind, name := templateOwnerOf(w); kind {
	case "Deployment", "StatefulSet", "DaemonSet":
		return "\nsleep 3; kubectl rollout restart " + strings.ToLower(kind) + "/" + name + " -n " + w.Namespace + "   # once the apiserver has the change (policies reload about every second), its controller tries again at once (its own retries back off)"
	case "ReplicaSet":
		return "\nsleep 3; kubectl annotate replicaset/" + name + " -n " + w.Namespace + " kubectl-mesh.io/retried-at=\"$(date +%s)\" --overwrite   # a change to it makes its controller try again at once (its own retries back off)"
	}
	return ""
}
