package injection

import (
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// --- builders for Istio's webhook configurations, with the chart's selectors ---

func expr(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
}

func hook(name, svc string, ns, obj []metav1.LabelSelectorRequirement) admissionregistrationv1.MutatingWebhook {
	fail := admissionregistrationv1.Fail
	port := int32(443)
	path := "/inject"
	return admissionregistrationv1.MutatingWebhook{
		Name:         name,
		ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "istio-system", Name: svc, Path: &path, Port: &port}},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
		}},
		FailurePolicy:     &fail,
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: ns},
		ObjectSelector:    &metav1.LabelSelector{MatchExpressions: obj},
	}
}

func revHooks(value, svc string) []admissionregistrationv1.MutatingWebhook {
	return []admissionregistrationv1.MutatingWebhook{
		hook("rev.namespace.sidecar-injector.istio.io", svc,
			[]metav1.LabelSelectorRequirement{expr("istio.io/rev", metav1.LabelSelectorOpIn, value), expr("istio-injection", metav1.LabelSelectorOpDoesNotExist)},
			[]metav1.LabelSelectorRequirement{expr("sidecar.istio.io/inject", metav1.LabelSelectorOpNotIn, "false")}),
		hook("rev.object.sidecar-injector.istio.io", svc,
			[]metav1.LabelSelectorRequirement{expr("istio.io/rev", metav1.LabelSelectorOpDoesNotExist), expr("istio-injection", metav1.LabelSelectorOpDoesNotExist)},
			[]metav1.LabelSelectorRequirement{expr("sidecar.istio.io/inject", metav1.LabelSelectorOpNotIn, "false"), expr("istio.io/rev", metav1.LabelSelectorOpIn, value)}),
	}
}

func defaultHooks(svc string, auto bool) []admissionregistrationv1.MutatingWebhook {
	hs := []admissionregistrationv1.MutatingWebhook{
		hook("namespace.sidecar-injector.istio.io", svc,
			[]metav1.LabelSelectorRequirement{expr("istio-injection", metav1.LabelSelectorOpIn, "enabled")},
			[]metav1.LabelSelectorRequirement{expr("sidecar.istio.io/inject", metav1.LabelSelectorOpNotIn, "false")}),
		hook("object.sidecar-injector.istio.io", svc,
			[]metav1.LabelSelectorRequirement{expr("istio-injection", metav1.LabelSelectorOpDoesNotExist), expr("istio.io/rev", metav1.LabelSelectorOpDoesNotExist)},
			[]metav1.LabelSelectorRequirement{expr("sidecar.istio.io/inject", metav1.LabelSelectorOpIn, "true"), expr("istio.io/rev", metav1.LabelSelectorOpDoesNotExist)}),
	}
	if auto {
		hs = append(hs, hook("auto.sidecar-injector.istio.io", svc,
			[]metav1.LabelSelectorRequirement{expr("istio-injection", metav1.LabelSelectorOpDoesNotExist), expr("istio.io/rev", metav1.LabelSelectorOpDoesNotExist),
				expr("kubernetes.io/metadata.name", metav1.LabelSelectorOpNotIn, istioIgnoredNamespaces...)},
			[]metav1.LabelSelectorRequirement{expr("sidecar.istio.io/inject", metav1.LabelSelectorOpDoesNotExist), expr("istio.io/rev", metav1.LabelSelectorOpDoesNotExist)}))
	}
	return hs
}

func mwc(name string, labels map[string]string, hooks []admissionregistrationv1.MutatingWebhook) admissionregistrationv1.MutatingWebhookConfiguration {
	return admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Webhooks: hooks}
}

func deactivate(c admissionregistrationv1.MutatingWebhookConfiguration) admissionregistrationv1.MutatingWebhookConfiguration {
	never := &metav1.LabelSelector{MatchLabels: map[string]string{"istio.io/deactivated": "never-match"}}
	for i := range c.Webhooks {
		c.Webhooks[i].NamespaceSelector, c.Webhooks[i].ObjectSelector = never, never
	}
	return c
}

func injectorCM(rev, tag, config string) *corev1.ConfigMap {
	name := "istio-sidecar-injector"
	if rev != "default" {
		name += "-" + rev
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: name},
		Data: map[string]string{"config": config, "values": `{"global": {"hub": "docker.io/istio", "tag": "` + tag + `"}}`}}
}

func ready() []discoveryv1.EndpointSlice {
	return []discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.9"}}}}}
}

// meshFacts is a cluster with a default install (1.28.1), a canary revision
// (1.26.3) and a tag prod → canary, every istiod ready.
func meshFacts() *ClusterFacts {
	f := &ClusterFacts{
		Webhooks: []admissionregistrationv1.MutatingWebhookConfiguration{
			mwc("istio-sidecar-injector", map[string]string{"istio.io/rev": "default"}, append(revHooks("default", "istiod"), defaultHooks("istiod", false)...)),
			mwc("istio-sidecar-injector-canary", map[string]string{"istio.io/rev": "canary"}, revHooks("canary", "istiod-canary")),
			mwc("istio-revision-tag-prod", map[string]string{"istio.io/rev": "canary", "istio.io/tag": "prod"}, revHooks("prod", "istiod-canary")),
		},
		Namespaces: map[string]*corev1.Namespace{},
		ConfigMaps: map[string]*corev1.ConfigMap{},
		Services: map[string]*corev1.Service{
			"istio-system/istiod":        {ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istiod"}},
			"istio-system/istiod-canary": {ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istiod-canary"}},
		},
		EndpointSlices:  map[string][]discoveryv1.EndpointSlice{"istio-system/istiod": ready(), "istio-system/istiod-canary": ready()},
		KubeletVersions: map[string]string{"node-1": "v1.34.4"},
		Unknown:         map[string]string{},
	}
	for _, cm := range []*corev1.ConfigMap{injectorCM("default", "1.28.1", "policy: enabled"), injectorCM("canary", "1.26.3", "policy: enabled")} {
		f.ConfigMaps[cm.Namespace+"/"+cm.Name] = cm
	}
	return f
}

func withNamespace(f *ClusterFacts, name string, labels map[string]string) *ClusterFacts {
	l := map[string]string{"kubernetes.io/metadata.name": name}
	for k, v := range labels {
		l[k] = v
	}
	f.Namespaces[name] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	return f
}

func template(ns string, labels, annotations map[string]string) *Workload {
	return &Workload{Kind: "Deployment", Namespace: ns, Name: "app", Labels: labels, Annotations: annotations, NamespaceSource: NamespaceFromCluster}
}

func factor(r *InjectionReport, name string) *Factor {
	for i := range r.Factors {
		if r.Factors[i].Factor == name {
			return &r.Factors[i]
		}
	}
	return nil
}

type want struct {
	expected   bool
	revision   string
	webhook    string // "" for none
	blocked    bool
	ambient    bool
	verdict    string // substring
	fix        string // substring
	factor     string // a factor that must be present…
	effect     string // …with this effect
	warning    string // substring of a warning
	noWarnings bool   // and none at all
	sidecar    string
}

func fmtBool(b *bool) string {
	if b == nil {
		return "null"
	}
	return fmt.Sprint(*b)
}

func check(t *testing.T, r *InjectionReport, w want) {
	t.Helper()
	if r.Expected == nil || *r.Expected != w.expected {
		t.Errorf("expected = %v, want %v (verdict: %s)", fmtBool(r.Expected), w.expected, r.Verdict)
	}
	if w.revision != "" && r.Revision != w.revision {
		t.Errorf("revision = %q, want %q", r.Revision, w.revision)
	}
	if r.Webhook != w.webhook {
		t.Errorf("webhook = %q, want %q", r.Webhook, w.webhook)
	}
	if r.CreationBlocked != w.blocked {
		t.Errorf("creationBlocked = %v, want %v (%s)", r.CreationBlocked, w.blocked, r.Verdict)
	}
	if r.Ambient != w.ambient {
		t.Errorf("ambient = %v, want %v", r.Ambient, w.ambient)
	}
	if !strings.Contains(r.Verdict, w.verdict) {
		t.Errorf("verdict %q does not contain %q", r.Verdict, w.verdict)
	}
	if !strings.Contains(r.Fix, w.fix) {
		t.Errorf("fix %q does not contain %q", r.Fix, w.fix)
	}
	if w.factor != "" {
		f := factor(r, w.factor)
		if f == nil {
			t.Errorf("no factor %q in %+v", w.factor, r.Factors)
		} else if f.Effect != w.effect {
			t.Errorf("factor %q: effect %q, want %q (%+v)", w.factor, f.Effect, w.effect, *f)
		}
	}
	if w.noWarnings && len(r.Warnings) > 0 {
		t.Errorf("warnings %q, want none", r.Warnings)
	}
	if w.warning != "" && !strings.Contains(strings.Join(r.Warnings, "\n"), w.warning) {
		t.Errorf("warnings %q lack %q", r.Warnings, w.warning)
	}
	if w.sidecar != "" && r.Sidecar != w.sidecar {
		t.Errorf("sidecar = %q, want %q", r.Sidecar, w.sidecar)
	}
}

const (
	whDefaultNS   = "istio-sidecar-injector/namespace.sidecar-injector.istio.io"
	whDefaultObj  = "istio-sidecar-injector/object.sidecar-injector.istio.io"
	whCanaryNS    = "istio-sidecar-injector-canary/rev.namespace.sidecar-injector.istio.io"
	whCanaryObj   = "istio-sidecar-injector-canary/rev.object.sidecar-injector.istio.io"
	whTagProdNS   = "istio-revision-tag-prod/rev.namespace.sidecar-injector.istio.io"
	whDefaultRevN = "istio-sidecar-injector/rev.namespace.sidecar-injector.istio.io"
)

// templateDecision is a case of TestIstioTemplateDecisions.
type templateDecision struct {
	name        string
	nsLabels    map[string]string
	ns          string
	labels      map[string]string
	annotations map[string]string
	facts       func(*ClusterFacts)
	hostNetwork bool
	want        want
}

// templateDecisions are the pod templates whose injection
// TestIstioTemplateDecisions decides, and the answers.
var templateDecisions = []templateDecision{
	{name: "namespace istio-injection=enabled", nsLabels: map[string]string{"istio-injection": "enabled"},
		want: want{expected: true, revision: "default", webhook: whDefaultNS, verdict: "will be injected", factor: "namespace label istio-injection", effect: EffectInject, sidecar: "native"}},
	{name: "istio-injection=disabled blocks even a pod label true", nsLabels: map[string]string{"istio-injection": "disabled"}, labels: map[string]string{"sidecar.istio.io/inject": "true"},
		want: want{verdict: `istio-injection="disabled" blocks every Istio webhook`, fix: "istio-injection=enabled --overwrite", factor: "namespace label istio-injection", effect: EffectBlocks}},
	{name: "istio-injection=disabled overrules a pod's istio.io/rev: asked, not done", nsLabels: map[string]string{"istio-injection": "disabled"}, labels: map[string]string{"istio.io/rev": "canary"},
		want: want{verdict: `istio-injection="disabled" blocks every Istio webhook`, fix: "kubectl label namespace app istio-injection-   # a choice: the pod's istio.io/rev=canary then selects its revision",
			factor: "namespace label istio-injection", effect: EffectBlocks, warning: `the pod's label istio.io/rev="canary" is overruled`}},
	{name: "a namespace labelled with the pod's key: asked, not done", nsLabels: map[string]string{"sidecar.istio.io/inject": "true"},
		want: want{warning: `namespace label sidecar.istio.io/inject="true" is a pod's label`}},
	{name: "label false over annotation true: the label decides, the conflict warns", nsLabels: map[string]string{"istio-injection": "enabled"},
		labels: map[string]string{"sidecar.istio.io/inject": "false"}, annotations: map[string]string{"sidecar.istio.io/inject": "true"},
		want: want{fix: `"sidecar.istio.io/inject": null`, warning: `its label sidecar.istio.io/inject="false" refuses one, and the label decides`}},
	{name: "an empty istio.io/rev beside inject=true: no revision, and no object webhook", labels: map[string]string{"sidecar.istio.io/inject": "true", "istio.io/rev": ""},
		want: want{verdict: "the pod's label istio.io/rev is empty", fix: `"istio.io/rev": null`}},
	{name: "gateway template: the proxy is no sidecar of either kind", nsLabels: map[string]string{"istio-injection": "enabled"}, annotations: map[string]string{"inject.istio.io/templates": "gateway"},
		want: want{expected: true, revision: "default", webhook: whDefaultNS, factor: "sidecar kind", effect: EffectInfoOnly}},
	{name: "any other istio-injection value blocks", nsLabels: map[string]string{"istio-injection": "true"},
		want: want{verdict: `istio-injection="true" blocks`, factor: "namespace label istio-injection", effect: EffectBlocks}},
	{name: "includeOutboundPorts not a port list: admitted, istio-init will fail", nsLabels: map[string]string{"istio-injection": "enabled"},
		annotations: map[string]string{"traffic.sidecar.istio.io/includeOutboundPorts": "abc"},
		want:        want{expected: true, revision: "default", webhook: whDefaultNS, warning: "istio-init will fail on it"}},
	{name: "istio-injection=enabled beats istio.io/rev", nsLabels: map[string]string{"istio-injection": "enabled", "istio.io/rev": "canary"},
		want: want{expected: true, revision: "default", webhook: whDefaultNS, factor: "namespace label istio.io/rev", effect: EffectNone, warning: "istio.io/rev is ignored"}},
	{name: "namespace istio.io/rev=canary", nsLabels: map[string]string{"istio.io/rev": "canary"},
		want: want{expected: true, revision: "canary", webhook: whCanaryNS, factor: "namespace label istio.io/rev", effect: EffectInject, sidecar: "classic"}},
	{name: "namespace istio.io/rev=default (the default revision by name)", nsLabels: map[string]string{"istio.io/rev": "default"},
		want: want{expected: true, revision: "default", webhook: whDefaultRevN}},
	{name: "revision tag prod points at canary", nsLabels: map[string]string{"istio.io/rev": "prod"},
		want: want{expected: true, revision: "canary", webhook: whTagProdNS, verdict: "through tag prod"}},
	{name: "istio.io/rev naming no revision", nsLabels: map[string]string{"istio.io/rev": "stable"},
		want: want{verdict: `no active Istio webhook serves revision or tag "stable"`, fix: "kubectl label namespace app istio.io/rev=default --overwrite", factor: "namespace label istio.io/rev", effect: EffectWarning, warning: "injection is asked for, but it does not happen"}},
	{name: "unlabelled namespace, pod label inject=true", labels: map[string]string{"sidecar.istio.io/inject": "true"},
		want: want{expected: true, revision: "default", webhook: whDefaultObj, factor: "pod label sidecar.istio.io/inject", effect: EffectInject}},
	{name: "unlabelled namespace, annotation only: invisible to selectors", annotations: map[string]string{"sidecar.istio.io/inject": "true"},
		want: want{verdict: "invisible to webhook selectors", fix: `kubectl patch deployment app -n app --type merge -p '{"spec": {"template": {"metadata": {"labels": {"sidecar.istio.io/inject": "true"}}}}}'`,
			factor: "pod annotation sidecar.istio.io/inject", effect: EffectWarning, warning: "injection is asked for, but it does not happen"}},
	{name: "unlabelled namespace, nothing", want: want{verdict: "no Istio webhook matches", fix: "kubectl label namespace app istio-injection=enabled", noWarnings: true}},
	{name: "unlabelled namespace, pod label istio.io/rev=canary", labels: map[string]string{"istio.io/rev": "canary"},
		want: want{expected: true, revision: "canary", webhook: whCanaryObj, factor: "pod label istio.io/rev", effect: EffectInject}},
	{name: "namespace rev wins over pod rev", nsLabels: map[string]string{"istio.io/rev": "canary"}, labels: map[string]string{"istio.io/rev": "default"},
		want: want{expected: true, revision: "canary", webhook: whCanaryNS, factor: "pod label istio.io/rev", effect: EffectNone}},
	{name: "pod label inject=false opts out", nsLabels: map[string]string{"istio-injection": "enabled"}, labels: map[string]string{"sidecar.istio.io/inject": "false"},
		want: want{verdict: `sidecar.istio.io/inject="false" excludes it`, factor: "pod label sidecar.istio.io/inject", effect: EffectSkip}},
	// The namespace's label still selects the webhook: only the pod's own
	// label keeps it out (never "no active webhook selects it").
	{name: "pod label inject=false: the namespace label does its part", nsLabels: map[string]string{"istio-injection": "enabled"}, labels: map[string]string{"sidecar.istio.io/inject": "false"},
		want: want{verdict: `sidecar.istio.io/inject="false" excludes it`, factor: "namespace label istio-injection", effect: EffectInject}},
	{name: "annotation inject=false: webhook called, istiod skips", nsLabels: map[string]string{"istio-injection": "enabled"}, annotations: map[string]string{"sidecar.istio.io/inject": "false"},
		want: want{verdict: "istiod skips it", factor: "sidecar.istio.io/inject (injector)", effect: EffectSkip}},
	{name: "label true wins over annotation false", nsLabels: map[string]string{"istio-injection": "enabled"},
		labels: map[string]string{"sidecar.istio.io/inject": "true"}, annotations: map[string]string{"sidecar.istio.io/inject": "false"},
		want: want{expected: true, revision: "default", webhook: whDefaultNS, factor: "sidecar.istio.io/inject annotation", effect: EffectNone}},
	{name: "hostNetwork is never injected", nsLabels: map[string]string{"istio-injection": "enabled"}, hostNetwork: true,
		want: want{verdict: "hostNetwork", factor: "hostNetwork", effect: EffectBlocks}},
	{name: "kube-system is ignored even when labelled", ns: "kube-system", nsLabels: map[string]string{"istio-injection": "enabled"},
		want: want{verdict: "kube-system", factor: "ignored namespace", effect: EffectBlocks}},
	{name: "policy disabled skips a labelled namespace", nsLabels: map[string]string{"istio-injection": "enabled"},
		facts: func(f *ClusterFacts) {
			f.ConfigMaps["istio-system/istio-sidecar-injector"].Data["config"] = "policy: disabled"
		},
		want: want{verdict: "injector policy disabled", fix: `"sidecar.istio.io/inject": "true"`, factor: "policy", effect: EffectSkip}},
	{name: "policy disabled, pod label true injects", nsLabels: map[string]string{"istio-injection": "enabled"}, labels: map[string]string{"sidecar.istio.io/inject": "true"},
		facts: func(f *ClusterFacts) {
			f.ConfigMaps["istio-system/istio-sidecar-injector"].Data["config"] = "policy: disabled"
		},
		want: want{expected: true, revision: "default", webhook: whDefaultNS, factor: "policy", effect: EffectNone}},
	{name: "alwaysInjectSelector beats policy disabled", nsLabels: map[string]string{"istio-injection": "enabled"}, labels: map[string]string{"tier": "web"},
		facts: func(f *ClusterFacts) {
			f.ConfigMaps["istio-system/istio-sidecar-injector"].Data["config"] = "policy: disabled\nalwaysInjectSelector:\n- matchLabels: {tier: web}"
		},
		want: want{expected: true, revision: "default", webhook: whDefaultNS, factor: "alwaysInjectSelector", effect: EffectInject}},
	{name: "neverInjectSelector beats alwaysInjectSelector", nsLabels: map[string]string{"istio-injection": "enabled"}, labels: map[string]string{"tier": "web"},
		facts: func(f *ClusterFacts) {
			f.ConfigMaps["istio-system/istio-sidecar-injector"].Data["config"] = "policy: enabled\nneverInjectSelector:\n- matchLabels: {tier: web}\nalwaysInjectSelector:\n- matchLabels: {tier: web}"
		},
		want: want{verdict: "neverInjectSelector", factor: "neverInjectSelector", effect: EffectSkip}},
	{name: "explicit label true beats neverInjectSelector", nsLabels: map[string]string{"istio-injection": "enabled"}, labels: map[string]string{"tier": "web", "sidecar.istio.io/inject": "true"},
		facts: func(f *ClusterFacts) {
			f.ConfigMaps["istio-system/istio-sidecar-injector"].Data["config"] = "policy: enabled\nneverInjectSelector:\n- matchLabels: {tier: web}"
		},
		want: want{expected: true, revision: "default", webhook: whDefaultNS, factor: "neverInjectSelector", effect: EffectNone}},
	{name: "invalid policy never injects", nsLabels: map[string]string{"istio-injection": "enabled"},
		facts: func(f *ClusterFacts) {
			f.ConfigMaps["istio-system/istio-sidecar-injector"].Data["config"] = "policy: sometimes"
		},
		want: want{verdict: "neither enabled nor disabled", factor: "policy", effect: EffectBlocks}},
	// Real istiod (the ground-truth e2e): a config without a policy never
	// injects, not even a pod that asks for it.
	{name: "missing policy never injects, even a pod that asks", nsLabels: map[string]string{"istio-injection": "enabled"}, labels: map[string]string{"sidecar.istio.io/inject": "true"},
		facts: func(f *ClusterFacts) {
			f.ConfigMaps["istio-system/istio-sidecar-injector"].Data["config"] = "alwaysInjectSelector:\n- matchLabels: {sidecar.istio.io/inject: \"true\"}"
		},
		want: want{verdict: "policy (not set) is neither enabled nor disabled", factor: "policy", effect: EffectBlocks}},
	{name: "1.28: label value enabled is invalid, default policy injects", nsLabels: map[string]string{"istio-injection": "enabled"}, labels: map[string]string{"sidecar.istio.io/inject": "enabled"},
		want: want{expected: true, revision: "default", webhook: whDefaultNS, factor: "sidecar.istio.io/inject (injector)", effect: EffectWarning}},
	{name: "1.26: label value enabled means do not inject", nsLabels: map[string]string{"istio.io/rev": "canary"}, labels: map[string]string{"sidecar.istio.io/inject": "enabled"},
		want: want{verdict: "istiod skips it", factor: "sidecar.istio.io/inject (injector)", effect: EffectSkip}},
	{name: "1.26: yes injects under policy disabled", nsLabels: map[string]string{"istio.io/rev": "canary"}, labels: map[string]string{"sidecar.istio.io/inject": "yes"},
		facts: func(f *ClusterFacts) {
			f.ConfigMaps["istio-system/istio-sidecar-injector-canary"].Data["config"] = "policy: disabled"
		},
		want: want{expected: true, revision: "canary", webhook: whCanaryNS, factor: "sidecar.istio.io/inject (injector)", effect: EffectInject}},
	{name: "version from the istiod image beats values.global.tag", nsLabels: map[string]string{"istio.io/rev": "canary"}, labels: map[string]string{"sidecar.istio.io/inject": "enabled"},
		facts: func(f *ClusterFacts) {
			f.ControlPlanes = []appsv1.Deployment{{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istiod-canary", Labels: map[string]string{"istio.io/rev": "canary"}},
				Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "discovery", Image: "docker.io/istio/pilot:1.27.2"}}}}}}}
		},
		want: want{expected: true, revision: "canary", webhook: whCanaryNS, factor: "sidecar.istio.io/inject (injector)", effect: EffectWarning}},
	{name: "default revision deactivated, default tag takes over", nsLabels: map[string]string{"istio-injection": "enabled"},
		facts: func(f *ClusterFacts) {
			f.Webhooks[0] = deactivate(f.Webhooks[0])
			f.Webhooks = append(f.Webhooks, mwc("istio-revision-tag-default", map[string]string{"istio.io/rev": "canary", "istio.io/tag": "default"},
				append(revHooks("default", "istiod-canary"), defaultHooks("istiod-canary", false)...)))
		},
		want: want{expected: true, revision: "canary", webhook: "istio-revision-tag-default/namespace.sidecar-injector.istio.io", verdict: "through tag default"}},
	{name: "default tag without deactivating the default: double injection", nsLabels: map[string]string{"istio-injection": "enabled"},
		facts: func(f *ClusterFacts) {
			f.Webhooks = append(f.Webhooks, mwc("istio-revision-tag-default", map[string]string{"istio.io/rev": "canary", "istio.io/tag": "default"},
				append(revHooks("default", "istiod-canary"), defaultHooks("istiod-canary", false)...)))
		},
		// The apiserver calls configurations in name order: the tag's first, then the
		// default's, which re-injects with its own revision.
		want: want{expected: true, revision: "default", webhook: whDefaultNS, warning: "more than one Istio webhook matches"}},
	{name: "deactivated only: nothing injects", nsLabels: map[string]string{"istio-injection": "enabled"},
		facts: func(f *ClusterFacts) { f.Webhooks = f.Webhooks[:1]; f.Webhooks[0] = deactivate(f.Webhooks[0]) },
		want:  want{verdict: "no Istio webhook matches", factor: "namespace label istio-injection", effect: EffectWarning}},
	{name: "enableNamespacesByDefault: the auto webhook injects unlabelled namespaces",
		facts: func(f *ClusterFacts) {
			f.Webhooks[0].Webhooks = append(revHooks("default", "istiod"), defaultHooks("istiod", true)...)
		},
		want: want{expected: true, revision: "default", webhook: "istio-sidecar-injector/auto.sidecar-injector.istio.io"}},
	{name: "no ready endpoints, failurePolicy Fail: creation fails", nsLabels: map[string]string{"istio-injection": "enabled"},
		facts: func(f *ClusterFacts) { f.EndpointSlices["istio-system/istiod"] = nil },
		want: want{blocked: true, verdict: "has no ready endpoints", fix: "kubectl label namespace app istio-injection- istio.io/rev=canary   # revision default's webhook cannot be called: service istio-system/istiod has no ready endpoints",
			factor: "webhook backend", effect: EffectBlocks}},
	{name: "no service, failurePolicy Ignore: created without injection", nsLabels: map[string]string{"istio-injection": "enabled"},
		facts: func(f *ClusterFacts) {
			delete(f.Services, "istio-system/istiod")
			ignore := admissionregistrationv1.Ignore
			for i := range f.Webhooks[0].Webhooks {
				f.Webhooks[0].Webhooks[i].FailurePolicy = &ignore
			}
		},
		want: want{verdict: "does not exist, failurePolicy Ignore", factor: "webhook backend", effect: EffectSkip}},
	{name: "ambient namespace: no sidecar expected", nsLabels: map[string]string{"istio.io/dataplane-mode": "ambient"}, facts: withAmbientCNI,
		want: want{ambient: true, verdict: "ambient mode captures them through ztunnel", factor: "ambient enablement selector", effect: EffectInject}},
	{name: "ambient namespace without istio-cni: nothing captures it", nsLabels: map[string]string{"istio.io/dataplane-mode": "ambient"},
		want: want{verdict: "will not be injected", warning: "no istio-cni with ambient mode is installed", factor: "istio-cni ambient configuration", effect: EffectWarning}},
	{name: "ambient namespace, pod opts out of ambient", nsLabels: map[string]string{"istio.io/dataplane-mode": "ambient"}, labels: map[string]string{"istio.io/dataplane-mode": "none"},
		want: want{verdict: "no Istio webhook matches"}},
	{name: "sidecar and ambient both: the sidecar wins", nsLabels: map[string]string{"istio-injection": "enabled", "istio.io/dataplane-mode": "ambient"},
		want: want{expected: true, revision: "default", webhook: whDefaultNS, warning: "ambient"}},
	{name: "missing template is rejected", nsLabels: map[string]string{"istio-injection": "enabled"}, annotations: map[string]string{"inject.istio.io/templates": "sidecar,custom"},
		facts: func(f *ClusterFacts) {
			f.ConfigMaps["istio-system/istio-sidecar-injector"].Data["config"] = "policy: enabled\ntemplates:\n  sidecar: x\n  gateway: y"
		},
		want: want{blocked: true, webhook: whDefaultNS, verdict: `template "custom" is not in ConfigMap`, factor: "inject.istio.io/templates", effect: EffectBlocks}},
	// istiod checks annotation values before it picks templates: the refusal names the annotation.
	{name: "invalid annotation and missing template: the annotation decides", nsLabels: map[string]string{"istio-injection": "enabled"},
		annotations: map[string]string{"inject.istio.io/templates": "custom", "traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.0.0.0/33"},
		facts: func(f *ClusterFacts) {
			f.ConfigMaps["istio-system/istio-sidecar-injector"].Data["config"] = "policy: enabled\ntemplates:\n  sidecar: x"
		},
		want: want{blocked: true, webhook: whDefaultNS, verdict: "istiod refuses the pod at admission: invalid value \"10.0.0.0/33\"", factor: "traffic.sidecar.istio.io/excludeOutboundIPRanges", effect: EffectBlocks}},
	{name: "unreadable injector config: policy assumed, and said so", nsLabels: map[string]string{"istio-injection": "enabled"},
		facts: func(f *ClusterFacts) {
			f.ConfigMaps["istio-system/istio-sidecar-injector"].Data["config"] = "policy: [unterminated"
		},
		want: want{expected: true, revision: "default", webhook: whDefaultNS, factor: "policy", effect: EffectInject}},
	{name: "interceptionMode NONE: injected without capture", nsLabels: map[string]string{"istio-injection": "enabled"}, annotations: map[string]string{"sidecar.istio.io/interceptionMode": "NONE"},
		want: want{expected: true, revision: "default", webhook: whDefaultNS, factor: "sidecar.istio.io/interceptionMode", effect: EffectInfoOnly}},
	{name: "native sidecar turned off by annotation", nsLabels: map[string]string{"istio-injection": "enabled"}, annotations: map[string]string{"sidecar.istio.io/nativeSidecar": "false"},
		want: want{expected: true, revision: "default", webhook: whDefaultNS, sidecar: "classic"}},
	{name: "native sidecar auto needs every kubelet at 1.33", nsLabels: map[string]string{"istio-injection": "enabled"},
		facts: func(f *ClusterFacts) { f.KubeletVersions["old-node"] = "v1.32.9" },
		want:  want{expected: true, revision: "default", webhook: whDefaultNS, sidecar: "classic"}},
}

func TestIstioTemplateDecisions(t *testing.T) {
	m := Istio{}
	cases := templateDecisions
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.ns
			if ns == "" {
				ns = "app"
			}
			f := withNamespace(meshFacts(), ns, tc.nsLabels)
			if tc.facts != nil {
				tc.facts(f)
			}
			w := template(ns, tc.labels, tc.annotations)
			w.Spec.HostNetwork = tc.hostNetwork
			r := m.Explain(f, w)
			if r.Injected != nil {
				t.Errorf("a template has injected = %v, want null", *r.Injected)
			}
			check(t, r, tc.want)
		})
	}
}

func livePod(ns string, nsLabels map[string]string, status string, proxyImage string, native bool) (*ClusterFacts, *Workload) {
	f := withNamespace(meshFacts(), ns, nsLabels)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-7d4b9-x2x", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	if status != "" {
		p.Annotations["sidecar.istio.io/status"] = status
		proxy := corev1.Container{Name: "istio-proxy", Image: proxyImage}
		if native {
			always := corev1.ContainerRestartPolicyAlways
			proxy.RestartPolicy = &always
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "istio-init"}, proxy)
		} else {
			p.Spec.Containers = append(p.Spec.Containers, proxy)
		}
	}
	return f, &Workload{Kind: "Pod", Namespace: ns, Name: p.Name, Labels: p.Labels, Annotations: p.Annotations, Spec: p.Spec, Pod: p,
		NamespaceSource: NamespaceFromCluster, Owner: &Owner{Kind: "Deployment", Name: "web"}}
}

func TestIstioLivePods(t *testing.T) {
	m := Istio{}
	t.Run("injected and still expected", func(t *testing.T) {
		f, w := livePod("shop", map[string]string{"istio-injection": "enabled"}, `{"revision":"default"}`, "docker.io/istio/proxyv2:1.28.1", true)
		r := m.Explain(f, w)
		check(t, r, want{expected: true, revision: "default", webhook: whDefaultNS, verdict: "Injected by revision default", sidecar: "native"})
		if r.Injected == nil || !*r.Injected || r.IsMismatch() {
			t.Errorf("injected %v mismatch %v", r.Injected, r.Mismatch)
		}
		if f := factor(r, "istio-proxy"); f == nil || !strings.HasPrefix(f.Value, "native sidecar") {
			t.Errorf("istio-proxy factor %+v", f)
		}
	})
	t.Run("created before the namespace was labelled", func(t *testing.T) {
		f, w := livePod("legacy", map[string]string{"istio-injection": "enabled"}, "", "", false)
		r := m.Explain(f, w)
		check(t, r, want{expected: true, revision: "default", webhook: whDefaultNS, verdict: "would be if re-created", fix: "kubectl rollout restart deployment/web -n legacy"})
		if !r.IsMismatch() || r.Reason != "created before injection was enabled: restart" {
			t.Errorf("mismatch %v reason %q", r.Mismatch, r.Reason)
		}
	})
	t.Run("injected, namespace since disabled", func(t *testing.T) {
		f, w := livePod("shop", map[string]string{"istio-injection": "disabled"}, `{"revision":"default"}`, "docker.io/istio/proxyv2:1.28.1", false)
		r := m.Explain(f, w)
		check(t, r, want{verdict: "would not be now", fix: "kubectl rollout restart deployment/web -n shop"})
		if !r.IsMismatch() {
			t.Error("no mismatch")
		}
	})
	t.Run("injected by canary, namespace moved to default", func(t *testing.T) {
		f, w := livePod("shop", map[string]string{"istio-injection": "enabled"}, `{"revision":"canary"}`, "docker.io/istio/proxyv2:1.26.3", false)
		r := m.Explain(f, w)
		check(t, r, want{expected: true, revision: "default", webhook: whDefaultNS, verdict: "Injected by revision canary, but", fix: "rollout restart", sidecar: "native"})
		if r.InjectedRevision != "canary" || !r.IsMismatch() {
			t.Errorf("injectedRevision %q mismatch %v", r.InjectedRevision, r.Mismatch)
		}
	})
	t.Run("old proxy version after an upgrade", func(t *testing.T) {
		f, w := livePod("shop", map[string]string{"istio-injection": "enabled"}, `{"revision":"default"}`, "docker.io/istio/proxyv2:1.27.0", true)
		r := m.Explain(f, w)
		if fac := factor(r, "proxy version"); fac == nil || fac.Effect != EffectWarning {
			t.Errorf("proxy version factor %+v", fac)
		}
	})
	t.Run("ambient enrolled pod", func(t *testing.T) {
		f, w := livePod("mesh", map[string]string{"istio.io/dataplane-mode": "ambient"}, "", "", false)
		withAmbientCNI(f)
		w.Pod.Annotations["ambient.istio.io/redirection"] = "enabled"
		r := m.Explain(f, w)
		check(t, r, want{ambient: true, verdict: "ztunnel captures the pod's traffic in ambient mode"})
		if r.IsMismatch() {
			t.Error("ambient pod reported as mismatch")
		}
	})
	t.Run("FailedCreate events on the owner", func(t *testing.T) {
		f, w := livePod("shop", map[string]string{"istio-injection": "enabled"}, "", "", false)
		w.Pod = nil
		w.Kind, w.Name, w.Owner = "Deployment", "web", nil
		w.Events = []corev1.Event{{Reason: "FailedCreate", InvolvedObject: corev1.ObjectReference{Kind: "ReplicaSet", Name: "web-7d4b9"},
			Message: `Error creating: Internal error occurred: failed calling webhook "namespace.sidecar-injector.istio.io": failed to call webhook: context deadline exceeded`}}
		r := m.Explain(f, w)
		check(t, r, want{blocked: true, webhook: whDefaultNS, verdict: "rejected pod creation", factor: "event FailedCreate", effect: EffectBlocks})
	})
}

func TestIstioUnknownFacts(t *testing.T) {
	f := withNamespace(meshFacts(), "app", map[string]string{"istio-injection": "enabled"})
	f.ConfigMaps = map[string]*corev1.ConfigMap{}
	f.Unknown[FactConfigMaps] = "forbidden: list configmaps"
	r := Istio{}.Explain(f, template("app", nil, nil))
	if len(r.Incomplete) != 1 || !strings.Contains(r.Incomplete[0], "forbidden: list configmaps") {
		t.Errorf("incomplete = %q", r.Incomplete)
	}
	if fac := factor(r, "injector ConfigMap"); fac == nil || fac.Effect != EffectUnknown {
		t.Errorf("injector ConfigMap factor %+v", fac)
	}
	// The webhook matches, but whether istiod injects depends on the policy
	// it could not read: unknown, never "no", and no fix built on it.
	if r.Expected != nil || r.Mismatch != nil || r.Fix != "" || len(r.Needs) != 1 || r.Needs[0] != "list configmaps" ||
		!strings.Contains(r.Verdict, "Unknown whether") {
		t.Errorf("policy unknown: expected %s mismatch %s fix %q needs %q verdict %q", fmtBool(r.Expected), fmtBool(r.Mismatch), r.Fix, r.Needs, r.Verdict)
	}
	for _, fac := range r.Factors {
		if fac.Factor == "policy" {
			t.Errorf("a policy row with a value the user could not read: %+v", fac)
		}
	}
}

func TestIstioFileNamespace(t *testing.T) {
	f := meshFacts()
	w := template("new-ns", nil, nil)
	w.NamespaceSource = NamespaceFromFile
	w.NamespaceLabels = map[string]string{"istio.io/rev": "prod"}
	r := Istio{}.Explain(f, w)
	check(t, r, want{expected: true, revision: "canary", webhook: whTagProdNS, verdict: "will be injected"})
	if fac := factor(r, "namespace label istio.io/rev"); fac == nil || !strings.Contains(fac.Source, "from the manifest") {
		t.Errorf("namespace source not named: %+v", fac)
	}
	w.NamespaceSource, w.NamespaceLabels = NamespaceMissing, nil
	r = Istio{}.Explain(f, w)
	if r.IsExpected() || !strings.Contains(factor(r, "namespace label istio-injection").Source, "does not exist") {
		t.Errorf("missing namespace: expected %v factors %+v", fmtBool(r.Expected), r.Factors)
	}
}

func TestSortAndSummary(t *testing.T) {
	yes, no := true, false
	rs := []*InjectionReport{
		{Namespace: "b", Name: "ok", Injected: &yes, Expected: &yes, Mismatch: &no},
		{Namespace: "a", Name: "plain", Injected: &no, Expected: &no, Mismatch: &no},
		{Namespace: "b", Name: "stale", Injected: &no, Expected: &yes, Mismatch: &yes},
	}
	SortReports(rs)
	if rs[0].Name != "stale" || rs[1].Name != "plain" || rs[2].Name != "ok" {
		t.Errorf("order %s %s %s", rs[0].Name, rs[1].Name, rs[2].Name)
	}
	s := Summarize(&ClusterFacts{Namespaces: map[string]*corev1.Namespace{}}, rs)
	if len(s) != 2 || s[1].Namespace != "b" || s[1].Mismatched != 1 || s[1].Injected != 1 || !strings.Contains(s[1].Description, "differs") {
		t.Errorf("summary %+v", s)
	}
}

func TestInjectValueUnknownRelease(t *testing.T) {
	for _, tc := range []struct {
		name, value, policy string
		expected            string // "yes", "no", "unknown"
	}{
		{"true: every release injects", "true", "enabled", "yes"},
		{"false: every release skips", "false", "enabled", "no"},
		{"enabled under policy enabled: 1.27+ injects (the policy), earlier releases skip", "enabled", "enabled", "unknown"},
		{"enabled under policy disabled: neither injects", "enabled", "disabled", "no"},
		{"yes under policy enabled: both inject", "yes", "enabled", "yes"},
		{"yes under policy disabled: 1.27+ skips (the policy), earlier releases inject", "yes", "disabled", "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := withNamespace(meshFacts(), "app", map[string]string{"istio-injection": "enabled"})
			f.ConfigMaps["istio-system/istio-sidecar-injector"] = injectorCM("default", "latest", "policy: "+tc.policy)
			// The annotation: the label "false" would keep every webhook from calling istiod.
			r := Istio{}.Explain(f, template("app", nil, map[string]string{"sidecar.istio.io/inject": tc.value}))
			got := "unknown"
			if r.Expected != nil {
				got = map[bool]string{true: "yes", false: "no"}[*r.Expected]
			}
			if got != tc.expected {
				t.Fatalf("expected %s, want %s: %s", got, tc.expected, r.Verdict)
			}
			inj := factor(r, "sidecar.istio.io/inject (injector)")
			if inj == nil || !strings.Contains(inj.Source, `the Istio version of revision "default" is unknown`) {
				t.Errorf("inject row does not say the version is unknown: %+v", inj)
			}
			if got == "unknown" && (inj.Effect != EffectUnknown || r.Fix != "" || len(r.Needs) == 0 || !strings.Contains(r.Verdict, "depends on it: use --verify") || !strings.Contains(inj.Source, "rules disagree")) {
				t.Errorf("unknown answer: row %+v, fix %q, needs %v, verdict %s", inj, r.Fix, r.Needs, r.Verdict)
			}
		})
	}
}

// TestIstioUnknownIsNotNo: a fact that could not be read never counts as
// absent. The verdict is unknown exactly when the outcome depends on it; it is
// decided when the known facts settle it anyway; no fix is built on an unknown.
func TestIstioUnknownIsNotNo(t *testing.T) {
	enabled := map[string]string{"istio-injection": "enabled"}
	cases := []struct {
		name  string
		setup func() (*ClusterFacts, *Workload)
		// expected: "unknown", "yes" or "no"
		expected string
		needs    string // the one permission named, when unknown
		verdict  string
	}{
		{"namespace labels unreadable", func() (*ClusterFacts, *Workload) {
			f := meshFacts()
			f.Unknown[FactNamespaces] = "forbidden: the user may not list namespaces"
			return f, template("shop", nil, nil)
		}, "unknown", "list namespaces", "Unknown whether pods created from this template"},
		{"namespace labels unreadable, but every webhook's objectSelector excludes the pod", func() (*ClusterFacts, *Workload) {
			f := meshFacts()
			f.Unknown[FactNamespaces] = "forbidden: the user may not list namespaces"
			return f, template("shop", map[string]string{"sidecar.istio.io/inject": "false"}, nil)
		}, "no", "", "will not be injected"},
		{"namespace list forbidden, the namespace itself read (get)", func() (*ClusterFacts, *Workload) {
			f := withNamespace(meshFacts(), "shop", enabled)
			f.Unknown[FactNamespaces] = "forbidden: the user may not list namespaces"
			return f, template("shop", nil, nil)
		}, "yes", "", "will be injected"},
		{"webhooks unreadable: the injected pod's past is known, its future is not", func() (*ClusterFacts, *Workload) {
			f, w := livePod("shop", enabled, `{"revision":"default"}`, "docker.io/istio/proxyv2:1.28.1", true)
			f.Webhooks = nil
			f.Unknown[FactWebhooks] = "forbidden: the user may not list mutatingwebhookconfigurations.admissionregistration.k8s.io"
			return f, w
		}, "unknown", "list mutatingwebhookconfigurations.admissionregistration.k8s.io", "Injected by revision default when it was created"},
		{"webhooks unreadable, pod not injected", func() (*ClusterFacts, *Workload) {
			f, w := livePod("shop", enabled, "", "", false)
			f.Webhooks = nil
			f.Unknown[FactWebhooks] = "forbidden: the user may not list mutatingwebhookconfigurations.admissionregistration.k8s.io"
			return f, w
		}, "unknown", "list mutatingwebhookconfigurations.admissionregistration.k8s.io", "Not injected; whether it would be"},
		{"istiod's endpoints unreadable (failurePolicy Fail: the call decides)", func() (*ClusterFacts, *Workload) {
			f := withNamespace(meshFacts(), "shop", enabled)
			f.EndpointSlices = map[string][]discoveryv1.EndpointSlice{}
			f.Unknown[FactEndpointSlices] = "forbidden: the user may not list endpointslices.discovery.k8s.io in namespace istio-system"
			return f, template("shop", nil, nil)
		}, "unknown", "list endpointslices.discovery.k8s.io in namespace istio-system", "Unknown whether"},
		{"injector config unreadable, the pod's annotation says no", func() (*ClusterFacts, *Workload) {
			f := withNamespace(meshFacts(), "shop", enabled)
			f.ConfigMaps = map[string]*corev1.ConfigMap{}
			f.Unknown[FactConfigMaps] = "forbidden: the user may not list configmaps (all namespaces)"
			return f, template("shop", nil, map[string]string{"sidecar.istio.io/inject": "false"})
		}, "no", "", "will not be injected"},
		{"injector config unreadable, the pod's label asks for injection (a policy could still refuse)", func() (*ClusterFacts, *Workload) {
			f := withNamespace(meshFacts(), "shop", enabled)
			f.ConfigMaps = map[string]*corev1.ConfigMap{}
			f.Unknown[FactConfigMaps] = "forbidden: the user may not list configmaps (all namespaces)"
			return f, template("shop", map[string]string{"sidecar.istio.io/inject": "true"}, nil)
		}, "unknown", "list configmaps (all namespaces)", "Unknown whether"},
	}
	checked := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, w := tc.setup()
			r := Istio{}.Explain(f, w)
			got := "unknown"
			if r.Expected != nil {
				got = map[bool]string{true: "yes", false: "no"}[*r.Expected]
			}
			if got != tc.expected || !strings.Contains(r.Verdict, tc.verdict) {
				t.Fatalf("expected %s, want %s; verdict %q (want %q)", got, tc.expected, r.Verdict, tc.verdict)
			}
			if tc.expected != "unknown" {
				if len(r.Needs) != 0 || r.Mismatch == nil {
					t.Errorf("decided, yet needs %q mismatch %s", r.Needs, fmtBool(r.Mismatch))
				}
				return
			}
			if r.Mismatch != nil || r.Fix != "" || r.Sidecar != "" || len(r.Needs) != 1 || r.Needs[0] != tc.needs {
				t.Errorf("unknown: mismatch %s fix %q sidecar %q needs %q (want %q)", fmtBool(r.Mismatch), r.Fix, r.Sidecar, r.Needs, tc.needs)
			}
			// No row shows a value for what could not be read.
			for _, fac := range r.Factors {
				if strings.HasPrefix(fac.Factor, "namespace label ") && f.Unknown[FactNamespaces] != "" && f.Namespaces[w.Namespace] == nil {
					t.Errorf("row %q = %q although the namespace's labels are unknown", fac.Factor, fac.Value)
				}
				if fac.Factor == "policy" && f.Unknown[FactConfigMaps] != "" {
					t.Errorf("row policy = %q although the configuration is unknown", fac.Value)
				}
			}
			checked++
		})
	}
	if checked != 5 {
		t.Errorf("%d unknown cases checked, want 5", checked)
	}
}

// A matching webhook with matchConditions (CEL, not evaluated here): whether
// the apiserver calls it is unknown, never a yes.
func TestIstioMatchConditionsAreUnknown(t *testing.T) {
	f := withNamespace(meshFacts(), "shop", map[string]string{"istio-injection": "enabled"})
	for i := range f.Webhooks[0].Webhooks {
		f.Webhooks[0].Webhooks[i].MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "skip-x", Expression: "object.metadata.name != 'x'"}}
	}
	r := Istio{}.Explain(f, template("shop", nil, nil))
	if r.Expected != nil || len(r.Needs) != 1 || !strings.Contains(r.Needs[0], "matchConditions") || r.Fix != "" {
		t.Errorf("expected %s needs %q fix %q: %s", fmtBool(r.Expected), r.Needs, r.Fix, r.Verdict)
	}
}

// A namespace whose istio.io/rev names no revision: the fix names only a
// revision or tag that exists (never istio-injection=enabled beside the
// wrong istio.io/rev, which conflicts with it), the verdict lists those
// that exist, and with none known no revision is invented.
func TestRevisionNotFoundFix(t *testing.T) {
	onlyDefault := func(f *ClusterFacts) {
		f.Webhooks = f.Webhooks[:1]
		f.Webhooks[0].Webhooks = defaultHooks("istiod", false)
	}
	cases := []struct {
		name          string
		nsLabels      map[string]string
		facts         func(*ClusterFacts)
		verdict, fix  string
		fixIsEmpty    bool
		fixMustNotSay string
	}{
		{name: "revisions and a tag exist", nsLabels: map[string]string{"istio.io/rev": "1-99-nonexistent"},
			verdict: "the cluster has revisions canary, default and tags prod", fix: "kubectl label namespace app istio.io/rev=default --overwrite",
			fixMustNotSay: "istio-injection=enabled"},
		{name: "no default: the first revision", nsLabels: map[string]string{"istio.io/rev": "1-99-nonexistent"},
			facts: func(f *ClusterFacts) { f.Webhooks = f.Webhooks[1:] }, verdict: "revisions canary and tags prod",
			fix: "istio.io/rev=canary --overwrite", fixMustNotSay: "istio-injection=enabled"},
		{name: "only istio-injection selects a webhook", nsLabels: map[string]string{"istio.io/rev": "1-99-nonexistent"}, facts: onlyDefault,
			verdict: "istio-injection=enabled selects the default injector", fix: "kubectl label namespace app istio.io/rev- istio-injection=enabled"},
		{name: "no webhook at all: no revision invented", nsLabels: map[string]string{"istio.io/rev": "1-99-nonexistent"},
			facts: func(f *ClusterFacts) { f.Webhooks = nil }, verdict: "no active Istio revision or tag is known", fixIsEmpty: true},
		{name: "istio-injection=disabled beside an existing revision", nsLabels: map[string]string{"istio-injection": "disabled", "istio.io/rev": "canary"},
			verdict: "blocks every Istio webhook", fix: "kubectl label namespace app istio-injection-", fixMustNotSay: "istio-injection=enabled"},
		{name: "istio-injection=disabled beside a missing revision", nsLabels: map[string]string{"istio-injection": "disabled", "istio.io/rev": "gone"},
			verdict: "revisions canary, default", fix: "istio-injection-\nkubectl label namespace app istio.io/rev=default --overwrite", fixMustNotSay: "istio-injection=enabled"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := withNamespace(meshFacts(), "app", tc.nsLabels)
			if tc.facts != nil {
				tc.facts(f)
			}
			r := Istio{}.Explain(f, template("app", nil, nil))
			if !strings.Contains(r.Verdict, tc.verdict) {
				t.Errorf("verdict %q lacks %q", r.Verdict, tc.verdict)
			}
			if !strings.Contains(r.Fix, tc.fix) || tc.fixIsEmpty && r.Fix != "" {
				t.Errorf("fix %q, want one with %q (empty: %v)", r.Fix, tc.fix, tc.fixIsEmpty)
			}
			if tc.fixMustNotSay != "" && strings.Contains(r.Fix, tc.fixMustNotSay) {
				t.Errorf("fix %q says %q", r.Fix, tc.fixMustNotSay)
			}
		})
	}
	// A pod a gone revision injected: the label first, then the restart
	// (a restart alone would drop its sidecar).
	f, w := livePod("app", map[string]string{"istio.io/rev": "gone"}, `{"revision":"gone"}`, "docker.io/istio/proxyv2:1.20.0", false)
	r := Istio{}.Explain(f, w)
	if !strings.HasPrefix(r.Fix, "kubectl label namespace app istio.io/rev=default --overwrite") || !strings.Contains(r.Fix, "rollout restart") {
		t.Errorf("a pod of a gone revision: fix %q", r.Fix)
	}
}
