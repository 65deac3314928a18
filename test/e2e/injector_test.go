package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
)

type injectionStatus struct {
	InitContainers []string `json:"initContainers"`
	Containers     []string `json:"containers"`
	Revision       string   `json:"revision"`
}

func appPod(name string, labels, annotations map[string]string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "app", Image: testImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/sh", "-c", "mkdir -p /www && echo hello-from-app > /www/index.html && exec httpd -f -p 8080 -h /www"},
				Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			}},
		},
	}
}

// appDeployment is a Deployment of replicas appPod pods labelled app=name,
// with the template annotations given (TypeMeta set: it marshals as a manifest).
func appDeployment(ns, name string, replicas int32, annotations map[string]string) *appsv1.Deployment {
	tmpl := appPod(name, map[string]string{"app": name}, annotations)
	return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}}}
}

// writeManifest writes objects as one multi-document YAML file in a
// temporary directory of the test and returns its path.
func writeManifest(t *testing.T, objs ...any) string {
	t.Helper()
	var manifest []byte
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		manifest = append(append(manifest, b...), []byte("---\n")...)
	}
	file := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(file, manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// The real apiserver picks the webhook from Istio's selectors, and real
// istiod (one per revision, from Istio's charts) decides and injects: the
// default revision native sidecars, canary (and tag prod) classic ones held
// until the proxy is ready, the proxy image tagged with the built version.
func TestIstiodInjection(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	enabled := c.Namespace(t, "inj-enabled", map[string]string{"istio-injection": "enabled"})
	canary := c.Namespace(t, "inj-canary", map[string]string{"istio.io/rev": "canary"})
	tagged := c.Namespace(t, "inj-tag", map[string]string{"istio.io/rev": "prod"})
	plain := c.Namespace(t, "inj-plain", nil)
	disabled := c.Namespace(t, "inj-disabled", map[string]string{"istio-injection": "disabled"})

	cases := []struct {
		name, ns    string
		labels      map[string]string
		annotations map[string]string
		hostNetwork bool
		revision    string // "" = not injected
		native      bool
	}{
		{name: "ns-enabled", ns: enabled, revision: "default", native: true},
		{name: "ns-enabled-pod-opt-out", ns: enabled, labels: map[string]string{"sidecar.istio.io/inject": "false"}},
		{name: "ns-enabled-annotation-opt-out", ns: enabled, annotations: map[string]string{"sidecar.istio.io/inject": "false"}},
		{name: "ns-enabled-never-inject-selector", ns: enabled, labels: map[string]string{"kmesh.demo/never-inject": ""}},
		{name: "ns-enabled-host-network", ns: enabled, hostNetwork: true},
		{name: "ns-enabled-classic-by-annotation", ns: enabled, annotations: map[string]string{"sidecar.istio.io/nativeSidecar": "false"}, revision: "default"},
		{name: "ns-canary", ns: canary, revision: "canary"},
		{name: "ns-tag-prod", ns: tagged, revision: "canary"},
		{name: "plain-pod-label", ns: plain, labels: map[string]string{"sidecar.istio.io/inject": "true"}, revision: "default", native: true},
		{name: "plain-pod-annotation-only", ns: plain, annotations: map[string]string{"sidecar.istio.io/inject": "true"}},
		{name: "plain-pod-rev-label", ns: plain, labels: map[string]string{"istio.io/rev": "canary"}, revision: "canary"},
		{name: "plain-nothing", ns: plain},
		{name: "ns-disabled-pod-label", ns: disabled, labels: map[string]string{"sidecar.istio.io/inject": "true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := appPod(tc.name, tc.labels, tc.annotations)
			pod.Spec.HostNetwork = tc.hostNetwork
			created, err := c.Client.CoreV1().Pods(tc.ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			raw, injected := created.Annotations["sidecar.istio.io/status"]
			if tc.revision == "" {
				if injected {
					t.Fatalf("injected (%s), want not injected; containers %s / init %s", raw,
						testcluster.ContainerNames(created.Spec.Containers), testcluster.ContainerNames(created.Spec.InitContainers))
				}
				return
			}
			if !injected {
				t.Fatalf("not injected, want revision %s", tc.revision)
			}
			var st injectionStatus
			if err := json.Unmarshal([]byte(raw), &st); err != nil {
				t.Fatalf("sidecar.istio.io/status %q: %v", raw, err)
			}
			if st.Revision != tc.revision {
				t.Errorf("revision %q, want %q", st.Revision, tc.revision)
			}
			for _, ct := range append(append([]corev1.Container{}, created.Spec.InitContainers...), created.Spec.Containers...) {
				if strings.HasPrefix(ct.Name, "istio-") && ct.Image != c.ProxyImage {
					t.Errorf("%s image %s, want %s", ct.Name, ct.Image, c.ProxyImage)
				}
			}
			inits := testcluster.ContainerNames(created.Spec.InitContainers)
			containers := testcluster.ContainerNames(created.Spec.Containers)
			switch {
			case tc.native:
				if inits != "istio-init,istio-proxy" || containers != "app" {
					t.Errorf("native sidecar: init %q containers %q, want istio-init,istio-proxy / app", inits, containers)
				}
				if rp := created.Spec.InitContainers[1].RestartPolicy; rp == nil || *rp != corev1.ContainerRestartPolicyAlways {
					t.Errorf("istio-proxy init container has no restartPolicy: Always")
				}
			case tc.revision == "canary":
				// canary: ENABLE_NATIVE_SIDECARS=false and holdApplicationUntilProxyStarts: the proxy first, held by pilot-agent wait.
				if inits != "istio-init" || containers != "istio-proxy,app" {
					t.Errorf("held classic sidecar: init %q containers %q, want istio-init / istio-proxy,app", inits, containers)
				}
				if l := created.Spec.Containers[0].Lifecycle; l == nil || l.PostStart == nil || strings.Join(l.PostStart.Exec.Command, " ") != "pilot-agent wait" {
					t.Errorf("istio-proxy has no postStart pilot-agent wait")
				}
			default:
				if inits != "istio-init" || containers != "app,istio-proxy" {
					t.Errorf("classic sidecar: init %q containers %q, want istio-init / app,istio-proxy", inits, containers)
				}
			}
		})
	}
}

// Injected pods run: istio-init programs Istio's rules and the stand-in
// proxy becomes ready. A connection from pod A to pod B leaves A through
// ISTIO_REDIRECT to A's proxy on 15001, which dials B as uid 1337; B's
// PREROUTING sends it to B's proxy on 15006, which hands it to B's app from
// 127.0.0.6. A connection from A to its own address stays on lo and is not
// captured, as in Istio.
func TestInjectedPodsCaptureTraffic(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ns := c.Namespace(t, "inj-traffic", map[string]string{"istio-injection": "enabled"})
	ips := map[string]string{}
	for _, name := range []string{"a", "b"} {
		pod := appPod(name, nil, nil)
		// Ready once httpd listens (an exec probe: istiod rewrites HTTP and TCP
		// probes to its agent, which the stand-in proxy does not serve).
		pod.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "nc -w 1 127.0.0.1 8080 </dev/null"}}}}
		if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"a", "b"} {
		p := c.WaitPod(t, ns, name, 90*time.Second, "running and ready", testcluster.Running)
		init := p.Status.InitContainerStatuses[0]
		if init.Name != "istio-init" || init.State.Terminated == nil || init.State.Terminated.ExitCode != 0 {
			t.Fatalf("%s: istio-init: %+v", name, init)
		}
		ips[name] = p.Status.PodIP
	}
	// (busybox's static wget crashes; nc speaks HTTP/1.0 well enough)
	get := `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 "$0" 8080`
	// Under load (make test runs the netns tests beside these), the first
	// connection between two fresh pods is now and then lost on the node's
	// bridge before it reaches pod b (neither of b's nat tables sees it; cause
	// not found): up to three attempts, each reported.
	for _, target := range []string{"b", "a"} {
		var got string
		for attempt := 1; attempt <= 3; attempt++ {
			got = c.RunEphemeral(t, ns, "a", fmt.Sprintf("get-%s-%d", target, attempt), testImage, nil, "/bin/sh", "-c", get, ips[target])
			if strings.HasSuffix(strings.TrimSpace(got), "hello-from-app") {
				break
			}
			t.Logf("attempt %d: GET %s:8080 from pod a answered %q", attempt, target, got)
		}
		if !strings.HasSuffix(strings.TrimSpace(got), "hello-from-app") {
			caps := []corev1.Capability{"NET_ADMIN", "NET_RAW"}
			dump := "iptables-nft-save -c; iptables-legacy-save -c"
			t.Fatalf("GET %s:8080 from pod a answered %q\nproxy a:\n%s\nproxy b:\n%s\nrules of a:\n%s\nrules of b:\n%s", target, got,
				c.Logs(t, ns, "a", "istio-proxy"), c.Logs(t, ns, "b", "istio-proxy"),
				c.RunEphemeral(t, ns, "a", "fail-dump", testImage, caps, "/bin/sh", "-c", dump),
				c.RunEphemeral(t, ns, "b", "fail-dump", testImage, caps, "/bin/sh", "-c", dump))
		}
	}
	caps := []corev1.Capability{"NET_ADMIN", "NET_RAW"}
	dumpA := c.RunEphemeral(t, ns, "a", "dump", testImage, caps, "iptables-save", "-c", "-t", "nat")
	dumpB := c.RunEphemeral(t, ns, "b", "dump", testImage, caps, "iptables-save", "-c", "-t", "nat")
	for _, want := range []struct{ pod, dump, rule string }{
		{"a", dumpA, "-A ISTIO_OUTPUT -j ISTIO_REDIRECT"},
		{"a", dumpA, "-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001"},
		{"a", dumpA, "-A ISTIO_OUTPUT -m owner --uid-owner 1337 -j RETURN"},
		{"a", dumpA, "-A ISTIO_OUTPUT -o lo -m owner ! --uid-owner 1337 -j RETURN"},
		{"b", dumpB, "-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT"},
		{"b", dumpB, "-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006"},
		{"b", dumpB, "-A ISTIO_OUTPUT -s 127.0.0.6/32 -o lo -j RETURN"},
	} {
		if n := counterOf(want.dump, want.rule); n < 1 {
			t.Errorf("pod %s: rule %q: packet counter %d, want at least 1\n%s", want.pod, want.rule, n, want.dump)
		}
	}
	for _, rule := range []string{
		"-A ISTIO_INBOUND -p tcp -m tcp --dport 15090 -j RETURN",
		"-A ISTIO_INBOUND -p tcp -m tcp --dport 15021 -j RETURN",
		"-A ISTIO_INBOUND -p tcp -m tcp --dport 15020 -j RETURN",
	} {
		if counterOf(dumpA, rule) < 0 {
			t.Errorf("pod a: rule %q missing\n%s", rule, dumpA)
		}
	}
}

// Two ways a traffic annotation breaks a pod under real Istio. istiod checks
// the CIDR annotations when it injects and refuses the pod at admission, with
// its message; why-injected predicts the refusal. istiod does not check
// includeOutboundPorts: the pod is created, and Istio's istio-iptables in
// istio-init passes the value to iptables-restore, which refuses it.
func TestTrafficAnnotationFailures(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "inj-broken", map[string]string{"istio-injection": "enabled"})

	refused := appPod("refused", nil, map[string]string{"traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.0.0.0/33"})
	refused.Namespace = ns
	_, err := c.Client.CoreV1().Pods(ns).Create(ctx, refused, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "denied the request") || !strings.Contains(err.Error(), "10.0.0.0/33") {
		t.Fatalf("create with a /33 exclusion: %v; want istiod's denial naming the CIDR", err)
	}
	manifest := filepath.Join(t.TempDir(), "refused.yaml")
	refused.APIVersion, refused.Kind = "v1", "Pod"
	b, _ := yaml.Marshal(refused)
	if err := os.WriteFile(manifest, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := mesh(t, c, "", "why-injected", "-f", manifest, "-o", "json")
	d := decode[reportDoc](t, r)
	if d.Kind != "InjectionReport" || !d.CreationBlocked || !isFalse(d.Expected) || !strings.Contains(d.Verdict, "istiod refuses the pod at admission") ||
		!strings.Contains(d.Fix, "traffic.sidecar.istio.io/excludeOutboundIPRanges") {
		t.Errorf("why-injected -f for the refused pod: exit %d, blocked %v, verdict %q, fix %q", r.code, d.CreationBlocked, d.Verdict, d.Fix)
	}

	pod := appPod("broken", nil, map[string]string{"traffic.sidecar.istio.io/includeOutboundPorts": "abc"})
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := c.WaitPod(t, ns, "broken", 60*time.Second, "istio-init to fail", func(p *corev1.Pod) bool {
		for _, s := range p.Status.InitContainerStatuses {
			if s.Name == "istio-init" && (s.State.Terminated != nil && s.State.Terminated.ExitCode != 0 || s.LastTerminationState.Terminated != nil) {
				return true
			}
		}
		return false
	})
	s := p.Status.InitContainerStatuses[0]
	term := s.State.Terminated
	if term == nil {
		term = s.LastTerminationState.Terminated
	}
	if term.ExitCode == 0 {
		t.Fatalf("istio-init terminated with exit 0")
	}
	// The container restarts: its refusal is in the log of the run that
	// failed, the current one's or the previous one's.
	var logs string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		logs = ""
		for _, previous := range []bool{false, true} {
			b, err := c.Client.CoreV1().Pods(ns).GetLogs("broken", &corev1.PodLogOptions{Container: "istio-init", Previous: previous}).DoRaw(ctx)
			if err == nil {
				logs += string(b)
			}
		}
		return strings.Contains(logs, "invalid port/service `abc'"), nil
	})
	if err != nil {
		t.Errorf("istio-init's logs lack iptables-restore's refusal:\n%s", logs)
	}
}
