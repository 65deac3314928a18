package injection

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// withAmbientCNI installs istio-cni with ambient mode on, as the chart's
// defaults do, and its agents (ready) on node-1.
func withAmbientCNI(f *ClusterFacts) {
	f.ConfigMaps["istio-system/istio-cni-config"] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istio-cni-config"},
		Data: map[string]string{"AMBIENT_ENABLED": "true", "AMBIENT_ENABLEMENT_SELECTOR": ambientSelectors, "EXCLUDE_NAMESPACES": "kube-system"}}
	f.AmbientAgents = []corev1.Pod{agentPod("istio-cni-node-abcde", "k8s-app", "istio-cni-node", true), agentPod("ztunnel-fghij", "app", "ztunnel", true)}
}

func agentPod(name, key, value string, ready bool) corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: name, Labels: map[string]string{key: value}},
		Spec:   corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}}}
}

// Ambient enrollment in the istio-cni agent's order, for live pods: the
// namespace label and the pod's own, hostNetwork, a sidecar, excluded
// namespaces, the annotation the agent writes, its agents on the node, a
// configuration that is off, absent or unreadable.
func TestAmbientCapture(t *testing.T) {
	ambientNS := map[string]string{"istio.io/dataplane-mode": "ambient"}
	cases := []struct {
		name     string
		ns       string
		nsLabels map[string]string
		pod      func(p *corev1.Pod)
		facts    func(f *ClusterFacts)
		ambient  bool
		capture  string
		mismatch string // "true", "false", "null"
		verdict  string
		fix      string
		factor   string
		effect   string
		warning  string
		needs    string
	}{
		{name: "captured", nsLabels: ambientNS, pod: redirection("enabled"),
			ambient: true, capture: AmbientCaptured, mismatch: "false", verdict: "ztunnel captures the pod's traffic", factor: "ztunnel on node node-1", effect: EffectInfoOnly},
		{name: "the pod's own label enrolls it anywhere", pod: func(p *corev1.Pod) {
			p.Labels = map[string]string{"istio.io/dataplane-mode": "ambient"}
			redirection("enabled")(p)
		}, ambient: true, capture: AmbientCaptured, mismatch: "false", factor: "ambient enablement selector", effect: EffectInject},
		{name: "the pod's label none overrides the namespace", nsLabels: ambientNS, pod: func(p *corev1.Pod) { p.Labels = map[string]string{"istio.io/dataplane-mode": "none"} },
			mismatch: "false", verdict: "Not injected", factor: "ambient enablement selectors", effect: EffectInfoOnly},
		{name: "any other pod label value is still enrolled", nsLabels: ambientNS, pod: func(p *corev1.Pod) {
			p.Labels = map[string]string{"istio.io/dataplane-mode": "sidecar"}
			redirection("enabled")(p)
		}, ambient: true, capture: AmbientCaptured, mismatch: "false"},
		{name: "pending: ztunnel not ready", nsLabels: ambientNS, pod: redirection("pending"),
			facts:   func(f *ClusterFacts) { f.AmbientAgents[1] = agentPod("ztunnel-fghij", "app", "ztunnel", false) },
			ambient: true, capture: AmbientPending, mismatch: "true", verdict: "ztunnel on its node has not taken it", fix: "kubectl describe pod ztunnel-fghij -n istio-system",
			factor: "ztunnel on node node-1", effect: EffectBlocks},
		{name: "not set up: no istio-cni on the node", nsLabels: ambientNS, facts: func(f *ClusterFacts) { f.AmbientAgents = f.AmbientAgents[1:] },
			ambient: true, capture: AmbientNotSetUp, mismatch: "true", verdict: "no istio-cni pod runs on node node-1", fix: "kubectl get daemonset -A -l k8s-app=istio-cni-node",
			factor: "istio-cni on node node-1", effect: EffectBlocks},
		{name: "not set up while istio-cni is ready: setting it up failed", nsLabels: ambientNS,
			ambient: true, capture: AmbientNotSetUp, mismatch: "true", verdict: "setting it up failed", fix: "kubectl rollout restart deployment/web -n mesh"},
		{name: "not set up, the node agents unknown: no fix", nsLabels: ambientNS, facts: func(f *ClusterFacts) {
			f.AmbientAgents = nil
			f.Unknown[FactAmbientAgents] = "forbidden: the user may not list pods (all namespaces)"
		}, ambient: true, capture: AmbientNotSetUp, mismatch: "true", verdict: "has not set it up", factor: "istio-cni on node node-1", effect: EffectUnknown},
		{name: "hostNetwork", nsLabels: ambientNS, pod: func(p *corev1.Pod) { p.Spec.HostNetwork = true },
			mismatch: "false", factor: "hostNetwork", effect: EffectBlocks, warning: "hostNetwork"},
		{name: "a sidecar wins", nsLabels: ambientNS, pod: func(p *corev1.Pod) {
			p.Annotations["sidecar.istio.io/status"] = `{"revision":"default"}`
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.28.1"})
		}, mismatch: "true", factor: "sidecar", effect: EffectBlocks},
		{name: "excluded namespace", ns: "kube-system", nsLabels: ambientNS,
			mismatch: "false", factor: "EXCLUDE_NAMESPACES", effect: EffectBlocks, warning: "istio-cni leaves namespace kube-system out"},
		{name: "ambient mode off", nsLabels: ambientNS, facts: func(f *ClusterFacts) { f.ConfigMaps["istio-system/istio-cni-config"].Data["AMBIENT_ENABLED"] = "false" },
			mismatch: "false", factor: "AMBIENT_ENABLED", effect: EffectWarning, warning: "ambient mode is off"},
		{name: "no istio-cni at all", nsLabels: ambientNS, facts: func(f *ClusterFacts) { delete(f.ConfigMaps, "istio-system/istio-cni-config") },
			mismatch: "false", warning: "no istio-cni with ambient mode is installed"},
		{name: "configuration unreadable: capture unknown, no fix", nsLabels: ambientNS, facts: func(f *ClusterFacts) {
			delete(f.ConfigMaps, "istio-system/istio-cni-config")
			f.Unknown[FactConfigMaps] = "forbidden: the user may not list configmaps (all namespaces)"
		}, ambient: true, capture: EffectUnknown, mismatch: "null", verdict: "whether ztunnel captures it is unknown", factor: "istio-cni ambient configuration", effect: EffectUnknown,
			needs: "list configmaps (all namespaces)"},
		{name: "configuration unreadable, the pod pending: capture unknown, the permission named", nsLabels: ambientNS, pod: redirection("pending"), facts: func(f *ClusterFacts) {
			delete(f.ConfigMaps, "istio-system/istio-cni-config")
			f.Unknown[FactConfigMaps] = "forbidden: the user may not list configmaps (all namespaces)"
		}, ambient: true, capture: EffectUnknown, mismatch: "null", factor: "istio-cni ambient configuration", effect: EffectUnknown,
			needs: "list configmaps (all namespaces)"},
		{name: "selectors unreadable", nsLabels: ambientNS, facts: func(f *ClusterFacts) {
			f.ConfigMaps["istio-system/istio-cni-config"].Data["AMBIENT_ENABLEMENT_SELECTOR"] = "- podSelector: [oops"
		}, ambient: true, capture: EffectUnknown, mismatch: "null", factor: "ambient enablement selectors", effect: EffectUnknown},
		// Without AMBIENT_ENABLEMENT_SELECTOR the agent's release decides:
		// before 1.27 the dataplane-mode labels enroll pods, from 1.27 no
		// selector enrolls none; a release it does not name is unknown.
		{name: "istio-cni 1.25: no selectors, its built-in rule enrolls by the labels", nsLabels: ambientNS, pod: redirection("enabled"),
			facts: noSelectors("1.25.2"), ambient: true, capture: AmbientCaptured, mismatch: "false", factor: "ambient enablement selector", effect: EffectInject},
		{name: "istio-cni 1.25: the pod's none still opts out", nsLabels: ambientNS, pod: func(p *corev1.Pod) { p.Labels = map[string]string{"istio.io/dataplane-mode": "none"} },
			facts: noSelectors("1.25.2"), mismatch: "false", factor: "ambient enablement selectors", effect: EffectInfoOnly},
		{name: "istio-cni 1.28 with no selectors enrolls nothing", nsLabels: ambientNS, facts: noSelectors("1.28.1"),
			mismatch: "false", factor: "ambient enablement selectors", effect: EffectBlocks, warning: "enrolls no pod without selectors"},
		{name: "no selectors and istio-cni's release unknown: capture unknown, no fix", nsLabels: ambientNS, pod: redirection("enabled"), facts: noSelectors("latest"),
			ambient: true, capture: EffectUnknown, mismatch: "null", verdict: "whether ztunnel captures it is unknown", factor: "ambient enablement selectors", effect: EffectUnknown},
		{name: "no selectors and istio-cni 1.22, whose ambient mode is not modelled", nsLabels: ambientNS, facts: noSelectors("1.22.1"),
			ambient: true, capture: EffectUnknown, mismatch: "null", factor: "ambient enablement selectors", effect: EffectUnknown},
		{name: "use-waypoint has no part in capture", nsLabels: ambientNS, pod: func(p *corev1.Pod) {
			p.Labels = map[string]string{"istio.io/use-waypoint": "waypoint"}
			redirection("enabled")(p)
		}, ambient: true, capture: AmbientCaptured, mismatch: "false", factor: "pod label istio.io/use-waypoint", effect: EffectInfoOnly},
	}
	checked := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := c.ns
			if ns == "" {
				ns = "mesh"
			}
			f, w := livePod(ns, c.nsLabels, "", "", false)
			withAmbientCNI(f)
			w.Pod.Spec.NodeName, w.Spec.NodeName = "node-1", "node-1"
			if c.pod != nil {
				c.pod(w.Pod)
				w.Labels, w.Annotations, w.Spec = w.Pod.Labels, w.Pod.Annotations, w.Pod.Spec
			}
			if c.facts != nil {
				c.facts(f)
			}
			r := Istio{}.Explain(f, w)
			if r.Ambient != c.ambient || r.AmbientCapture != c.capture || fmtBool(r.Mismatch) != c.mismatch {
				t.Errorf("ambient %v, capture %q, mismatch %s; want %v, %q, %s (verdict: %s)", r.Ambient, r.AmbientCapture, fmtBool(r.Mismatch), c.ambient, c.capture, c.mismatch, r.Verdict)
			}
			if !strings.Contains(r.Verdict, c.verdict) {
				t.Errorf("verdict %q does not contain %q", r.Verdict, c.verdict)
			}
			if !strings.Contains(r.Fix, c.fix) || c.fix == "" && r.Mismatch == nil && r.Fix != "" {
				t.Errorf("fix %q, want %q", r.Fix, c.fix)
			}
			if c.factor != "" {
				if fac := factor(r, c.factor); fac == nil || fac.Effect != c.effect {
					t.Errorf("factor %q: %+v, want effect %q; factors %+v", c.factor, fac, c.effect, r.Factors)
				}
			}
			if c.needs != "" && !strings.Contains(strings.Join(r.Needs, "\n"), c.needs) {
				t.Errorf("needs %q lack %q", r.Needs, c.needs)
			}
			if c.warning != "" && !strings.Contains(strings.Join(r.Warnings, "\n"), c.warning) {
				t.Errorf("warnings %q lack %q", r.Warnings, c.warning)
			}
			checked++
		})
	}
	t.Logf("%d ambient cases checked", checked)
}

// noSelectors makes istio-cni's ConfigMap one of a release whose chart
// renders no AMBIENT_ENABLEMENT_SELECTOR, with its CURRENT_AGENT_VERSION.
func noSelectors(version string) func(f *ClusterFacts) {
	return func(f *ClusterFacts) {
		cm := f.ConfigMaps["istio-system/istio-cni-config"]
		delete(cm.Data, "AMBIENT_ENABLEMENT_SELECTOR")
		cm.Data["CURRENT_AGENT_VERSION"] = version
	}
}

func redirection(v string) func(p *corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations["ambient.istio.io/redirection"] = v }
}

// A namespace's summary counts the pods ambient mode enrolls, those
// ztunnel took and those it did not, and says so.
func TestAmbientSummary(t *testing.T) {
	yes, no := true, false
	pod := func(ns string, injected bool, capture string, mismatch bool) *InjectionReport {
		r := &InjectionReport{Namespace: ns, Injected: &injected, Expected: &no, Mismatch: &mismatch, AmbientCapture: capture, Ambient: capture != ""}
		if injected {
			r.Expected = &yes
		}
		return r
	}
	f := &ClusterFacts{Namespaces: map[string]*corev1.Namespace{}}
	got := Summarize(f, []*InjectionReport{
		pod("all", false, AmbientCaptured, false), pod("all", false, AmbientCaptured, false),
		pod("mixed", true, "", false), pod("mixed", false, AmbientCaptured, false),
		pod("broken", false, AmbientCaptured, false), pod("broken", false, AmbientPending, true), pod("broken", false, AmbientNotSetUp, true), pod("broken", true, "", true),
	})
	want := map[string]string{
		"all":    "ambient mode: all captured by ztunnel",
		"mixed":  "1 pod injected, the rest captured by ztunnel (ambient mode)",
		"broken": "1 pod differs from what it would get if re-created; 2 pods in ambient mode not captured by ztunnel",
	}
	for _, s := range got {
		if s.Description != want[s.Namespace] {
			t.Errorf("%s: %q, want %q", s.Namespace, s.Description, want[s.Namespace])
		}
	}
	if b := got[1]; b.Namespace != "broken" || b.Ambient != 3 || b.AmbientCaptured != 1 || b.AmbientNotCaptured != 2 || b.Mismatched != 3 {
		t.Errorf("broken: %+v", b)
	}
	t.Logf("%d namespaces summarised", len(got))
}
