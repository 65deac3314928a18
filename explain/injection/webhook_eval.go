package injection

import (
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

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
	url          string // the URL the apiserver posts to (backendURL)
	// index is the webhook's place in its configuration's list; service
	// says its clientConfig names a Service (else a URL).
	index        int
	service      bool
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
		for i, w := range c.Webhooks {
			if !isIstioWebhook(w.Name) {
				continue
			}
			e := compiledWebhook{webhookEval: webhookEval{config: c.Name, name: w.Name, tag: c.Labels[istio.LabelTag], index: i, service: w.ClientConfig.Service != nil}}
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
			e.url = backendURL(w.ClientConfig)
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
