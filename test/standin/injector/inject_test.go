package main

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func revision(t *testing.T, tag, config string) *meshRevision {
	t.Helper()
	r, err := parseRevision("default", map[string]string{
		"config": config,
		"values": `{"global": {"hub": "kmesh.local/istio", "tag": "` + tag + `"}}`,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestInjectRequired(t *testing.T) {
	selectors := "policy: enabled\nneverInjectSelector:\n- matchLabels: {never: \"yes\"}\nalwaysInjectSelector:\n- matchLabels: {always: \"yes\"}\n"
	cases := []struct {
		name, tag, config, ns string
		labels, annotations   map[string]string
		hostNetwork           bool
		want                  bool
	}{
		{name: "default policy injects", tag: "1.28.1", config: "policy: enabled", ns: "app", want: true},
		{name: "disabled policy skips", tag: "1.28.1", config: "policy: disabled", ns: "app", want: false},
		{name: "disabled policy, annotation true", tag: "1.28.1", config: "policy: disabled", ns: "app",
			annotations: map[string]string{"sidecar.istio.io/inject": "true"}, want: true},
		{name: "label beats annotation", tag: "1.28.1", config: "policy: enabled", ns: "app",
			labels: map[string]string{"sidecar.istio.io/inject": "false"}, annotations: map[string]string{"sidecar.istio.io/inject": "true"}, want: false},
		{name: "hostNetwork", tag: "1.28.1", config: "policy: enabled", ns: "app", hostNetwork: true, want: false},
		{name: "ignored namespace", tag: "1.28.1", config: "policy: enabled", ns: "kube-system", want: false},
		{name: "1.28: 'enabled' is invalid, default applies", tag: "1.28.1", config: "policy: enabled", ns: "app",
			labels: map[string]string{"sidecar.istio.io/inject": "enabled"}, want: true},
		{name: "1.26: 'enabled' means do not inject", tag: "1.26.3", config: "policy: enabled", ns: "app",
			labels: map[string]string{"sidecar.istio.io/inject": "enabled"}, want: false},
		{name: "1.26: 'yes' injects", tag: "1.26.3", config: "policy: disabled", ns: "app",
			labels: map[string]string{"sidecar.istio.io/inject": "yes"}, want: true},
		{name: "1.28: 'yes' is invalid, disabled policy applies", tag: "1.28.1", config: "policy: disabled", ns: "app",
			labels: map[string]string{"sidecar.istio.io/inject": "yes"}, want: false},
		{name: "neverInjectSelector", tag: "1.28.1", config: selectors, ns: "app", labels: map[string]string{"never": "yes"}, want: false},
		{name: "never beats always", tag: "1.28.1", config: selectors, ns: "app", labels: map[string]string{"never": "yes", "always": "yes"}, want: false},
		{name: "alwaysInjectSelector beats disabled policy", tag: "1.28.1", config: strings.Replace(selectors, "enabled", "disabled", 1), ns: "app",
			labels: map[string]string{"always": "yes"}, want: true},
		{name: "explicit label beats neverInjectSelector", tag: "1.28.1", config: selectors, ns: "app",
			labels: map[string]string{"never": "yes", "sidecar.istio.io/inject": "true"}, want: true},
		{name: "illegal policy never injects", tag: "1.28.1", config: "policy: sometimes", ns: "app", want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annotations}, Spec: corev1.PodSpec{HostNetwork: tc.hostNetwork}}
			got, why := injectRequired(revision(t, tc.tag, tc.config), tc.ns, pod)
			if got != tc.want {
				t.Errorf("injectRequired = %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}

func TestReinjectionDoesNotDoubleTheSidecar(t *testing.T) {
	r := revision(t, "1.26.3", "policy: enabled")
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	injectPod(pod, r, false)
	injectPod(pod, r, false)
	var names []string
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "istio-init,app,istio-proxy" {
		t.Errorf("after two injections: %s", got)
	}
	if len(pod.Spec.Volumes) != 3 {
		t.Errorf("volumes: %d, want 3", len(pod.Spec.Volumes))
	}
}
