package injection

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ENABLE_NATIVE_SIDECARS=auto: the node versions that decide, as istiod reads
// them (the bound node if it exists, else every node; no node or an
// unparseable version means classic), named in the answer; unreadable nodes
// leave the kind unknown.
func TestNativeSidecarNodeVersions(t *testing.T) {
	cases := []struct {
		name     string
		nodes    map[string]string
		unknown  bool
		nodeName string
		owned    bool // a live pod with a controller
		sidecar  string
		value    string // the "node versions" row; "" when there is none
		effect   string // of the "sidecar kind" row
	}{
		{name: "every node 1.33+", nodes: map[string]string{"b": "v1.37.2", "a": "v1.33.13"}, sidecar: "native",
			value: "a v1.33.13, b v1.37.2: 1.33 or newer", effect: EffectInfoOnly},
		{name: "one node 1.32", nodes: map[string]string{"new": "v1.37.2", "old": "v1.32.13"}, sidecar: "classic",
			value: "old v1.32.13 (below 1.33)", effect: EffectInfoOnly},
		{name: "bound to a 1.33+ node beside a 1.32 one", nodes: map[string]string{"new": "v1.37.2", "old": "v1.32.13"}, nodeName: "new", sidecar: "native",
			value: "new v1.37.2: 1.33 or newer", effect: EffectInfoOnly},
		{name: "bound to the 1.32 node", nodes: map[string]string{"new": "v1.37.2", "old": "v1.32.13"}, nodeName: "old", sidecar: "classic",
			value: "old v1.32.13 (below 1.33)", effect: EffectInfoOnly},
		{name: "bound to a node that is gone: every node decides", nodes: map[string]string{"new": "v1.37.2", "old": "v1.32.13"}, nodeName: "gone", sidecar: "classic",
			value: "old v1.32.13 (below 1.33)", effect: EffectInfoOnly},
		{name: "a version that does not parse", nodes: map[string]string{"odd": "unknown-build"}, sidecar: "classic",
			value: "odd unknown-build (not a version: counts as below 1.33)", effect: EffectInfoOnly},
		{name: "a controller's live pod on the new node: its replacement arrives unbound", nodes: map[string]string{"new": "v1.37.2", "old": "v1.32.13"}, nodeName: "new", owned: true, sidecar: "classic",
			value: "old v1.32.13 (below 1.33)", effect: EffectInfoOnly},
		{name: "no node at all", nodes: map[string]string{}, sidecar: "classic", value: "no node", effect: EffectInfoOnly},
		{name: "nodes not readable", unknown: true, sidecar: "", effect: EffectUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := withNamespace(meshFacts(), "app", map[string]string{"istio-injection": "enabled"})
			f.KubeletVersions = tc.nodes
			if tc.unknown {
				f.KubeletVersions = nil
				f.Unknown = map[string]string{FactNodes: "forbidden: list nodes"}
			}
			w := template("app", nil, nil)
			w.Spec.NodeName = tc.nodeName
			if tc.owned {
				w.Pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "app-1"}, Spec: w.Spec}
				w.Owner = &Owner{Kind: "ReplicaSet", Name: "app-5d8"}
			}
			r := Istio{}.Explain(f, w)
			if r.Sidecar != tc.sidecar {
				t.Errorf("sidecar %q, want %q", r.Sidecar, tc.sidecar)
			}
			nv := factor(r, "node versions")
			switch {
			case tc.value == "" && nv != nil:
				t.Errorf("node versions row %+v, want none", *nv)
			case tc.value != "" && (nv == nil || nv.Value != tc.value):
				t.Errorf("node versions row %+v, want value %q", nv, tc.value)
			}
			if k := factor(r, "sidecar kind"); k == nil || k.Effect != tc.effect {
				t.Errorf("sidecar kind row %+v, want effect %q", k, tc.effect)
			} else if tc.unknown && !strings.Contains(k.Source, "forbidden: list nodes") {
				t.Errorf("sidecar kind row does not name the missing fact: %+v", *k)
			}
		})
	}
}

// A live pod whose sidecar kind differs from what it would get now says so.
func TestSidecarKindChangedSinceCreation(t *testing.T) {
	f, w := livePod("shop", map[string]string{"istio-injection": "enabled"}, `{"revision":"default"}`, "kmesh.local/istio/proxyv2:1.28.1", true)
	f.KubeletVersions = map[string]string{"new": "v1.37.2", "old": "v1.32.13"}
	r := Istio{}.Explain(f, w)
	if k := factor(r, "sidecar kind now"); r.Sidecar != "classic" || k == nil || k.Effect != EffectWarning || k.Value != "native → classic" {
		t.Errorf("sidecar %q, row %+v", r.Sidecar, k)
	}
	f.KubeletVersions = map[string]string{"new": "v1.37.2"}
	if r := (Istio{}).Explain(f, w); factor(r, "sidecar kind now") != nil || r.Sidecar != "native" {
		t.Errorf("a native pod that would still be native: %q %+v", r.Sidecar, factor(r, "sidecar kind now"))
	}
}

// ENABLE_NATIVE_SIDECARS unset: Istio's default for the revision's version
// (auto from 1.27, off before). The version is read from the istiod image
// when values.global.tag names no release ("latest", a digest's tag), and
// from the revision's name ("1-24-6") when neither does.
func TestNativeSidecarDefaultByIstioVersion(t *testing.T) {
	for _, tc := range []struct {
		tag, image, sidecar, why string
	}{
		{"1.28.1", "", "native", "(the default of Istio 1.28)"},
		{"1.26.3", "", "classic", "ENABLE_NATIVE_SIDECARS=false (the default of Istio 1.26)"},
		{"1.22.8", "", "classic", "ENABLE_NATIVE_SIDECARS=false (the default of Istio 1.22)"},
		{"latest", "docker.io/istio/pilot:1.29.2", "native", "ENABLE_NATIVE_SIDECARS=auto (the default of Istio 1.29)"},
		{"sha256-3f2a", "docker.io/istio/pilot:1.27.0-distroless@sha256:3f2a", "native", "(the default of Istio 1.27)"},
		{"latest", "docker.io/istio/pilot:1.24.6", "classic", "ENABLE_NATIVE_SIDECARS=false (the default of Istio 1.24)"},
	} {
		f := withNamespace(meshFacts(), "app", map[string]string{"istio-injection": "enabled"})
		f.ConfigMaps["istio-system/istio-sidecar-injector"] = injectorCM("default", tc.tag, "policy: enabled")
		f.ControlPlanes = nil
		if tc.image != "" {
			f.ControlPlanes = []appsv1.Deployment{istiod("default", tc.image)}
		}
		r := Istio{}.Explain(f, template("app", nil, nil))
		k := factor(r, "sidecar kind")
		if r.Sidecar != tc.sidecar || k == nil || !strings.Contains(k.Source, tc.why) {
			t.Errorf("tag %s, image %q: sidecar %q, row %+v; want %s with %q", tc.tag, tc.image, r.Sidecar, k, tc.sidecar, tc.why)
		}
	}
}

func istiod(rev, image string) appsv1.Deployment {
	name := "istiod"
	if rev != "default" {
		name += "-" + rev
	}
	return appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: name, Labels: map[string]string{"istio.io/rev": rev}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "discovery", Image: image}}}}}}
}

// The sidecar kind by release: the mode's default, whether "auto" exists,
// and what the pod annotation sidecar.istio.io/nativeSidecar does (ignored
// before 1.24, only "true" from 1.24 to 1.26, anything but "false" from
// 1.27). A release that is unknown or outside the table answers only what
// every modelled release agrees on; else the kind is unknown, with why.
func TestNativeSidecarByRelease(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tag        string
		env        string // ENABLE_NATIVE_SIDECARS in values.pilot.env ("" unset)
		annotation string // sidecar.istio.io/nativeSidecar ("-" unset)
		oldNode    bool   // a 1.32 node beside the 1.34 one
		sidecar    string
		why        string
	}{
		{name: "1.22: classic by default", tag: "1.22.8", annotation: "-", sidecar: "classic", why: "ENABLE_NATIVE_SIDECARS=false (the default of Istio 1.22)"},
		{name: "1.22: the annotation is not read", tag: "1.22.8", annotation: "true", sidecar: "classic", why: "is not read by Istio 1.22 (istiod reads it from 1.24); ENABLE_NATIVE_SIDECARS=false"},
		{name: "1.22: the mode set to true", tag: "1.22.8", env: "true", annotation: "-", sidecar: "native", why: "ENABLE_NATIVE_SIDECARS=true"},
		{name: "1.22: auto is not a mode yet", tag: "1.22.8", env: "auto", annotation: "-", sidecar: "classic", why: "Istio 1.22 has no auto mode"},
		{name: "1.24: the annotation asks for native", tag: "1.24.6", annotation: "true", sidecar: "native", why: `sidecar.istio.io/nativeSidecar="true"`},
		{name: "1.24: only true is native", tag: "1.24.6", env: "true", annotation: "yes", sidecar: "classic", why: `Istio 1.24 reads only "true" as native`},
		{name: "1.28: auto, every node new enough", tag: "1.28.1", annotation: "-", sidecar: "native", why: "ENABLE_NATIVE_SIDECARS=auto (the default of Istio 1.28): every node runs kubelet 1.33 or newer"},
		{name: "1.28: auto, an old node", tag: "1.28.1", annotation: "-", oldNode: true, sidecar: "classic", why: "must run kubelet 1.33 or newer"},
		{name: "1.28: anything but false is native", tag: "1.28.1", annotation: "yes", oldNode: true, sidecar: "native", why: `Istio 1.28 reads any value but "false" as native`},
		{name: "1.28: an empty annotation leaves it to the mode", tag: "1.28.1", annotation: "", oldNode: true, sidecar: "classic", why: "is empty: the mode decides"},
		{name: "1.28: a mode value istiod does not know", tag: "1.28.1", env: "True", annotation: "-", sidecar: "classic", why: "not a value istiod knows"},
		{name: "unknown version, unset mode: the releases disagree", tag: "latest", annotation: "-", sidecar: "",
			why: `the Istio version of revision "default" is unknown: ConfigMap istio-system/istio-sidecar-injector values.global.tag is "latest", not a release`},
		{name: "unknown version: which releases give what", tag: "latest", annotation: "-", sidecar: "", why: "(1.20–1.26: classic; 1.27–1.32: native)"},
		{name: "unknown version, the mode set to true: every release agrees", tag: "latest", env: "true", annotation: "-", sidecar: "native",
			why: "every modelled release (1.20–1.32) adds a native sidecar here"},
		{name: "unknown version, the annotation true: 1.20-1.23 ignore it", tag: "latest", annotation: "true", sidecar: "", why: "1.20–1.23: classic; 1.24–1.32: native"},
		{name: "unknown version, the annotation false and the mode unset: classic everywhere", tag: "latest", annotation: "false", sidecar: "classic", why: "every modelled release"},
		{name: "unknown version, auto: releases before 1.27 have no auto", tag: "latest", env: "auto", annotation: "-", sidecar: "", why: "1.20–1.26: classic; 1.27–1.32: native"},
		{name: "1.19: outside the table", tag: "1.19.9", annotation: "-", sidecar: "", why: "runs Istio 1.19 (1.19.9 from ConfigMap istio-system/istio-sidecar-injector values.global.tag), a release kubectl-mesh does not model (it models 1.20–1.32)"},
		{name: "1.33: outside the table, the mode false: every release agrees", tag: "1.33.0", env: "false", annotation: "-", sidecar: "classic", why: "a release kubectl-mesh does not model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := withNamespace(meshFacts(), "app", map[string]string{"istio-injection": "enabled"})
			cm := injectorCM("default", tc.tag, "policy: enabled")
			if tc.env != "" {
				cm.Data["values"] = `{"global": {"tag": "` + tc.tag + `"}, "pilot": {"env": {"ENABLE_NATIVE_SIDECARS": "` + tc.env + `"}}}`
			}
			f.ConfigMaps["istio-system/istio-sidecar-injector"] = cm
			if tc.oldNode {
				f.KubeletVersions["old"] = "v1.32.4"
			}
			var ann map[string]string
			if tc.annotation != "-" {
				ann = map[string]string{"sidecar.istio.io/nativeSidecar": tc.annotation}
			}
			r := Istio{}.Explain(f, template("app", nil, ann))
			if r.Expected == nil || !*r.Expected {
				t.Fatalf("not expected to be injected: %s", r.Verdict)
			}
			k := factor(r, "sidecar kind")
			if r.Sidecar != tc.sidecar || k == nil || !strings.Contains(k.Source, tc.why) {
				t.Errorf("sidecar %q, row %+v; want %q with %q", r.Sidecar, k, tc.sidecar, tc.why)
			}
			if wantEffect := map[bool]string{true: EffectUnknown, false: EffectInfoOnly}[tc.sidecar == ""]; k != nil && k.Effect != wantEffect {
				t.Errorf("sidecar kind row effect %q, want %q", k.Effect, wantEffect)
			}
			if tc.sidecar == "" && strings.Contains(r.Verdict, "sidecar, as a") {
				t.Errorf("an unknown kind named in the verdict: %s", r.Verdict)
			}
		})
	}
}

// A revision's version read from its name when nothing else names one.
func TestIstioVersionFromRevisionName(t *testing.T) {
	f := withNamespace(meshFacts(), "app", map[string]string{"istio.io/rev": "1-22-3"})
	f.Webhooks = append(f.Webhooks, mwc("istio-sidecar-injector-1-22-3", map[string]string{"istio.io/rev": "1-22-3"}, revHooks("1-22-3", "istiod-1-22-3")))
	f.Services["istio-system/istiod-1-22-3"] = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: "istiod-1-22-3"}}
	f.EndpointSlices["istio-system/istiod-1-22-3"] = ready()
	cm := injectorCM("1-22-3", "latest", "policy: enabled")
	f.ConfigMaps[cm.Namespace+"/"+cm.Name] = cm
	r := Istio{}.Explain(f, template("app", map[string]string{"sidecar.istio.io/inject": "yes"}, nil))
	k := factor(r, "sidecar kind")
	if r.Revision != "1-22-3" || r.Sidecar != "classic" || k == nil || !strings.Contains(k.Source, "the default of Istio 1.22") {
		t.Errorf("revision %q sidecar %q row %+v", r.Revision, r.Sidecar, k)
	}
	// 1.22 reads "yes" as inject (y/yes/true/on).
	if inj := factor(r, "sidecar.istio.io/inject (injector)"); inj == nil || inj.Effect != EffectInject || !strings.Contains(inj.Source, `from the revision's name "1-22-3"`) {
		t.Errorf("inject row %+v", inj)
	}
}

// How istiod reads sidecar.istio.io/inject depends on the release; with the
// release unknown, a value the rules read differently decides only when
// both rules lead to the same decision.
