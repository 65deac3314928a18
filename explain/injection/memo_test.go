package injection

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// memoPods are pods drawn from every choice Istio's answer depends on:
// namespaces labelled each way, the pod's labels and Istio annotations
// (valid and refused), owners or none, nodes, hostNetwork, and proxies
// already injected (classic, native, old image), plus labels and
// annotations of no interest that differ from pod to pod.
func memoPods(rng *rand.Rand, n int) []*Workload {
	pick := func(choices ...string) string { return choices[rng.Intn(len(choices))] }
	var out []*Workload
	for i := 0; i < n; i++ {
		ns := pick("shop", "legacy", "canary-ns", "tagged", "plain", "kube-system", "absent")
		labels := map[string]string{"app": pick("web", "db")}
		annotations := map[string]string{"cni.projectcalico.org/podIP": fmt.Sprintf("10.0.0.%d/32", rng.Intn(250))}
		if v := pick("", "true", "false"); v != "" {
			labels["sidecar.istio.io/inject"] = v
		}
		if v := pick("", "", "canary", "prod", "nope"); v != "" {
			labels["istio.io/rev"] = v
		}
		if v := pick("", "", "ambient", "none"); v != "" {
			labels["istio.io/dataplane-mode"] = v
		}
		for _, a := range [][2]string{
			{"sidecar.istio.io/inject", pick("", "", "true", "false")},
			{"sidecar.istio.io/interceptionMode", pick("", "", "NONE", "TPROXY", "BOGUS")},
			{"traffic.sidecar.istio.io/excludeOutboundPorts", pick("", "", "5432", "not-a-port")},
			{"inject.istio.io/templates", pick("", "", "sidecar", "nosuch")},
			{"sidecar.istio.io/nativeSidecar", pick("", "", "true", "false")},
			{"proxy.istio.io/config", pick("", "", "holdApplicationUntilProxyStarts: true")},
			{"ambient.istio.io/redirection", pick("", "", "enabled", "pending")},
		} {
			if a[1] != "" {
				annotations[a[0]] = a[1]
			}
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("pod-%d", i), Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}, NodeName: pick("", "node-1", "node-old"),
				HostNetwork: rng.Intn(8) == 0}}
		switch pick("none", "classic", "native", "old") {
		case "classic":
			p.Annotations["sidecar.istio.io/status"] = `{"revision":"default"}`
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.28.1"})
		case "native":
			always := corev1.ContainerRestartPolicyAlways
			p.Annotations["sidecar.istio.io/status"] = `{"revision":"canary"}`
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.26.3", RestartPolicy: &always})
		case "old":
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "docker.io/istio/proxyv2:1.20.0"})
		}
		w := &Workload{Kind: "Pod", Namespace: ns, Name: p.Name, Labels: p.Labels, Annotations: p.Annotations, Spec: p.Spec, Pod: p,
			NamespaceSource: NamespaceFromCluster}
		switch pick("deployment", "statefulset", "none") {
		case "deployment":
			w.Owner = &Owner{Kind: "Deployment", Name: labels["app"]}
		case "statefulset":
			w.Owner = &Owner{Kind: "StatefulSet", Name: labels["app"]}
		}
		if ns == "absent" {
			w.NamespaceSource = NamespaceMissing
		}
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		out = append(out, w)
	}
	return out
}

// oneChange is a copy of w with one thing changed that the answer may depend
// on: pods that differ in nothing else, so that a memo forgetting that
// thing gives one of them the other's answer.
func oneChange(w *Workload, what int) *Workload {
	p := w.Pod.DeepCopy()
	c := *w
	toggle := func(m map[string]string, k, v string) {
		if _, ok := m[k]; ok {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	switch what {
	case 0:
		p.Spec.HostNetwork = !p.Spec.HostNetwork
	case 1:
		p.Spec.NodeName = map[string]string{"": "node-old", "node-1": "node-old", "node-old": "node-1"}[p.Spec.NodeName]
	case 2:
		for i := range p.Spec.Containers {
			if p.Spec.Containers[i].Name == "istio-proxy" {
				p.Spec.Containers[i].Image = "docker.io/istio/proxyv2:1.19.0"
			}
		}
		for i := range p.Spec.InitContainers {
			if p.Spec.InitContainers[i].Name == "istio-proxy" {
				p.Spec.InitContainers[i].RestartPolicy = nil
			}
		}
	case 3:
		toggle(p.Annotations, "sidecar.istio.io/interceptionMode", "NONE")
	case 4:
		toggle(p.Annotations, "ambient.istio.io/redirection", "enabled")
	case 5:
		toggle(p.Labels, "sidecar.istio.io/inject", "false")
	case 6:
		if c.Owner == nil {
			c.Owner = &Owner{Kind: "Deployment", Name: "web"}
		} else {
			c.Owner = nil
		}
	case 7:
		c.Namespace = map[string]string{"shop": "plain", "plain": "shop"}[c.Namespace]
		p.Namespace = c.Namespace
		if c.Namespace == "" {
			c.Namespace, p.Namespace = "legacy", "legacy"
		}
	case 8:
		toggle(p.Annotations, "sidecar.istio.io/status", `{"revision":"canary"}`)
	case 9:
		toggle(p.Annotations, "traffic.sidecar.istio.io/excludeOutboundPorts", "not-a-port")
	}
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	c.Pod, c.Labels, c.Annotations, c.Spec = p, p.Labels, p.Annotations, p.Spec
	return &c
}

// memoFleet is n pods made from 880 templates (memoPods, each with one
// variant per oneChange), each pod with its own name and an annotation of
// no interest to Istio that differs from pod to pod.
func memoFleet(rng *rand.Rand, n int) []*Workload {
	var templates []*Workload
	for _, t := range memoPods(rng, 80) {
		templates = append(templates, t)
		for what := 0; what < 10; what++ {
			templates = append(templates, oneChange(t, what))
		}
	}
	out := make([]*Workload, 0, n)
	for i := 0; i < n; i++ {
		t := templates[rng.Intn(len(templates))]
		p := t.Pod.DeepCopy()
		p.Name = fmt.Sprintf("%s-%d", t.Name, i)
		p.Annotations["cni.projectcalico.org/podIP"] = fmt.Sprintf("10.0.%d.%d/32", i/250, i%250)
		// The app (and its owner's name) differ between pods of a template:
		// no answer may be shared between them unless it is the same.
		p.Labels["app"] = []string{"web", "db", "api"}[rng.Intn(3)]
		w := *t
		w.Name, w.Pod, w.Labels, w.Annotations, w.Spec = p.Name, p, p.Labels, p.Annotations, p.Spec
		if w.Owner != nil {
			w.Owner = &Owner{Kind: w.Owner.Kind, Name: p.Labels["app"]}
		}
		out = append(out, &w)
	}
	// As a sweep reads them: namespace by namespace.
	sort.SliceStable(out, func(i, j int) bool { return out[i].Namespace < out[j].Namespace })
	return out
}

// memoFacts is meshFacts with namespaces labelled each way; selectsApp adds
// an objectSelector on the app label to the default revision's webhooks and
// a neverInjectSelector on it to its injector (the answer then depends on
// that label).
func memoFacts(unknown map[string]string, selectsApp bool) *ClusterFacts {
	f := meshFacts()
	if selectsApp {
		for i := range f.Webhooks[0].Webhooks {
			sel := f.Webhooks[0].Webhooks[i].ObjectSelector
			sel.MatchExpressions = append(sel.MatchExpressions, expr("app", metav1.LabelSelectorOpNotIn, "api"))
		}
		cm := injectorCM("default", "1.28.1", "policy: enabled\nneverInjectSelector:\n- matchLabels: {app: db}\n")
		f.ConfigMaps[cm.Namespace+"/"+cm.Name] = cm
	}
	withNamespace(f, "shop", map[string]string{"istio-injection": "enabled"})
	withNamespace(f, "legacy", map[string]string{"istio-injection": "disabled"})
	withNamespace(f, "canary-ns", map[string]string{"istio.io/rev": "canary"})
	withNamespace(f, "tagged", map[string]string{"istio.io/rev": "prod", "istio.io/dataplane-mode": "ambient"})
	withNamespace(f, "plain", nil)
	withNamespace(f, "kube-system", nil)
	f.KubeletVersions["node-old"] = "v1.31.2"
	for k, v := range unknown {
		f.Unknown[k] = v
	}
	return f
}

// The memo's answer for every pod is the answer Explain gives it, byte for
// byte in JSON, also when facts are unknown, in the full and the compact
// (sweep) form; and it reused answers (the pods share them).
func TestMemoAnswersAsExplainDoes(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	pods := memoFleet(rng, 4000)
	for _, unknown := range []map[string]string{
		nil,
		{FactNamespaces: "forbidden: the user may not list namespaces"},
		{FactWebhooks: "forbidden: the user may not list mutatingwebhookconfigurations.admissionregistration.k8s.io"},
		{FactConfigMaps: "forbidden: the user may not list configmaps (all namespaces)", FactNodes: "forbidden: the user may not list nodes"},
		{"selects app": ""},
		{"ambient": ""},
	} {
		_, selectsApp := unknown["selects app"]
		_, ambient := unknown["ambient"]
		if selectsApp || ambient {
			unknown = nil
		}
		for _, compact := range []bool{false, true} {
			f := memoFacts(unknown, selectsApp)
			if ambient {
				// istio-cni's ambient mode, its agents ready on node-1 and
				// not on node-old, and an enablement selector on the app label.
				withAmbientCNI(f)
				cm := f.ConfigMaps["istio-system/istio-cni-config"]
				cm.Data["AMBIENT_ENABLEMENT_SELECTOR"] += "- podSelector:\n    matchLabels:\n      app: api\n"
				old := agentPod("istio-cni-node-old", "k8s-app", "istio-cni-node", false)
				old.Spec.NodeName = "node-old"
				f.AmbientAgents = append(f.AmbientAgents, old)
			}
			memo := NewMemo(Istio{}, f, compact)
			compared := 0
			for _, w := range pods {
				want := Istio{}.Explain(f, w)
				if compact {
					kept := []Factor{}
					for _, fac := range want.Factors {
						if fac.Effect != EffectNone {
							kept = append(kept, fac)
						}
					}
					want.Factors = kept
				}
				got := memo.Explain(w)
				wj, _ := json.Marshal(want)
				gj, _ := json.Marshal(got)
				if string(wj) != string(gj) {
					t.Fatalf("unknown %v, compact %v, pod %s/%s:\nmemo:    %s\nexplain: %s", unknown, compact, w.Namespace, w.Name, gj, wj)
				}
				compared++
			}
			if memo.Hits == 0 || memo.Hits+memo.Misses != compared {
				t.Errorf("unknown %v: %d hits, %d misses for %d pods", unknown, memo.Hits, memo.Misses, compared)
			}
			t.Logf("unknown %v, selects app %v, ambient %v, compact %v: %d pods compared, %d answers computed, %d reused", unknown, selectsApp, ambient, compact, compared, memo.Misses, memo.Hits)
		}
	}
}

// A report from the memo is the pod's own: changing it changes no other
// pod's report.
func TestMemoReportsAreCopies(t *testing.T) {
	f := memoFacts(nil, false)
	memo := NewMemo(Istio{}, f, false)
	_, a := livePod("shop", nil, "", "", false)
	b := *a
	b.Name = "other"
	ra, rb := memo.Explain(a), memo.Explain(&b)
	if memo.Hits != 1 {
		t.Fatalf("%d hits, want the second pod to reuse the first's answer", memo.Hits)
	}
	ra.Verdict, ra.Fix = "changed", "changed"
	if rb.Verdict == "changed" || rb.Name != "other" || ra.Name != a.Name {
		t.Errorf("reports share their fields: %q %q %q", rb.Verdict, rb.Name, ra.Name)
	}
	if want := "kubectl rollout restart deployment/web -n shop"; rb.Fix != want {
		t.Errorf("fix %q, want %q", rb.Fix, want)
	}
}
