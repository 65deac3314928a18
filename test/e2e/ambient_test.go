package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// renderAmbient renders Istio's ambient profile with the istioctl built from
// Istio's module and returns istio-cni's ConfigMap and the pod templates of
// the istio-cni and ztunnel DaemonSets, as Istio's charts make them.
func renderAmbient(t *testing.T, c *testcluster.Cluster) (*corev1.ConfigMap, map[string]*corev1.PodTemplateSpec) {
	t.Helper()
	if c.IstioctlPath == "" {
		t.Fatal("no istioctl: hack/cluster/build-istio.sh builds it")
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(c.IstioctlPath, "manifest", "generate", "--set", "profile=ambient")
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("istioctl manifest generate --set profile=ambient: %v\n%s", err, errOut.String())
	}
	var cm *corev1.ConfigMap
	templates := map[string]*corev1.PodTemplateSpec{}
	dec := utilyaml.NewYAMLReader(bufio.NewReader(&out))
	for {
		doc, err := dec.Read()
		if err != nil {
			break
		}
		var meta metav1.TypeMeta
		if yaml.Unmarshal(doc, &meta) != nil {
			continue
		}
		switch meta.Kind {
		case "ConfigMap":
			var m corev1.ConfigMap
			if err := yaml.Unmarshal(doc, &m); err == nil && m.Name == "istio-cni-config" {
				cm = &m
			}
		case "DaemonSet":
			var ds appsv1.DaemonSet
			if err := yaml.Unmarshal(doc, &ds); err == nil {
				templates[ds.Name] = &ds.Spec.Template
			}
		}
	}
	if cm == nil || templates["istio-cni-node"] == nil || templates["ztunnel"] == nil {
		t.Fatalf("the ambient profile rendered no istio-cni-config ConfigMap or no istio-cni-node/ztunnel DaemonSet (%d DaemonSets)", len(templates))
	}
	return cm, templates
}

// installAmbientCNI creates istio-cni's ConfigMap of Istio's ambient profile
// (renderAmbient) in namespace ns, deleted when the test ends, and returns
// it with the node agents' pod templates.
func installAmbientCNI(t *testing.T, c *testcluster.Cluster, ns string) (*corev1.ConfigMap, map[string]*corev1.PodTemplateSpec) {
	t.Helper()
	cm, templates := renderAmbient(t, c)
	cm.Namespace, cm.ResourceVersion = ns, ""
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().ConfigMaps(ns).Delete(context.Background(), cm.Name, metav1.DeleteOptions{})
	})
	return cm, templates
}

// why-injected for ambient mode on the real apiserver: istio-cni's
// ConfigMap as Istio's chart renders it (first the test bed's own, ambient
// off; then the ambient profile's), namespaces and pods labelled for ambient,
// the pods' ambient.istio.io/redirection annotation written through the
// pods/status subresource as istio-cni's agent writes it, and the node
// agents on the node. istio-cni's node agent and ztunnel cannot do their
// work here (ztunnel is Rust; the agent needs it to take a pod): their pods
// are stand-ins that carry the labels of Istio's DaemonSets, the ztunnel one
// never ready, and the test writes the annotation the agent would.
func TestWhyInjectedAmbient(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	checks := 0
	ns := c.Namespace(t, "amb", map[string]string{"istio.io/dataplane-mode": "ambient"})

	pod := func(name string, labels map[string]string) string {
		p := appPod(name, labels, nil)
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		c.WaitPod(t, ns, name, 120*time.Second, "scheduled", func(p *corev1.Pod) bool { return p.Spec.NodeName != "" })
		return name
	}
	annotate := func(name, value string) {
		patch := `{"metadata":{"annotations":{"ambient.istio.io/redirection":"` + value + `"}}}`
		if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	report := func(args ...string) injection.InjectionReport {
		t.Helper()
		return decode[reportDoc](t, mesh(t, c, "", append(append([]string{"why-injected"}, args...), "-o", "json")...)).InjectionReport
	}

	// The test bed's istio-cni (revision cni, sidecar mode) renders its
	// ConfigMap with ambient off: nothing captures the pod.
	off := pod("off", nil)
	if r := report(off, "-n", ns); r.Ambient || r.AmbientCapture != "" || !strings.Contains(strings.Join(r.Warnings, " "), "ambient mode is off") {
		t.Errorf("ambient off: ambient %v, capture %q, warnings %q", r.Ambient, r.AmbientCapture, r.Warnings)
	}
	checks++

	// The ambient profile's istio-cni, in a namespace of its own (as when
	// installed apart from istiod); it wins over the ambient-off one.
	agentsNS := c.Namespace(t, "amb-cni", nil)
	_, templates := installAmbientCNI(t, c, agentsNS)
	agent := func(name string, tmpl *corev1.PodTemplateSpec, ready bool) {
		p := appPod(name, tmpl.Labels, nil)
		if !ready {
			p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}}
		}
		standIn(t, c, agentsNS, p)
	}
	agent("istio-cni-node-standin", templates["istio-cni-node"], true)
	agent("ztunnel-standin", templates["ztunnel"], false)
	c.WaitPod(t, agentsNS, "istio-cni-node-standin", 120*time.Second, "ready", func(p *corev1.Pod) bool {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady {
				return cond.Status == corev1.ConditionTrue
			}
		}
		return false
	})
	c.WaitPod(t, agentsNS, "ztunnel-standin", 120*time.Second, "running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	captured, pending, unset := pod("captured", nil), pod("pending", nil), pod("unset", nil)
	optOut := pod("opt-out", map[string]string{"istio.io/dataplane-mode": "none"})
	annotate(captured, "enabled")
	annotate(pending, "pending")
	for _, c := range []struct {
		pod, capture, verdict, fix string
		mismatch                   bool
	}{
		{captured, injection.AmbientCaptured, "ztunnel captures the pod's traffic", "", false},
		{pending, injection.AmbientPending, "ztunnel pod " + agentsNS + "/ztunnel-standin not ready",
			"kubectl describe pod ztunnel-standin -n " + agentsNS, true},
		{unset, injection.AmbientNotSetUp, "istio-cni on its node is ready, so setting it up failed", "kubectl get pod unset -n " + ns + " -o json | kubectl replace --force -f -", true},
	} {
		r := report(c.pod, "-n", ns)
		if !r.Ambient || r.AmbientCapture != c.capture || r.IsMismatch() != c.mismatch || !strings.Contains(r.Verdict, c.verdict) || !strings.Contains(r.Fix, c.fix) {
			t.Errorf("pod %s: ambient %v, capture %q, mismatch %s; verdict %q; fix %q", c.pod, r.Ambient, r.AmbientCapture, fmtBool(r.Mismatch), r.Verdict, r.Fix)
		}
		checks++
	}
	if r := report(optOut, "-n", ns); r.Ambient || r.IsExpected() {
		t.Errorf("pod labelled istio.io/dataplane-mode=none: ambient %v, expected %s: %s", r.Ambient, fmtBool(r.Expected), r.Verdict)
	}
	checks++

	// A template: its pods will be captured.
	file := writeManifest(t, appDeployment(ns, "web", 1, nil))
	if r := report("-f", file); !r.Ambient || r.AmbientCapture != injection.AmbientWillCapture {
		t.Errorf("template: ambient %v, capture %q: %s", r.Ambient, r.AmbientCapture, r.Verdict)
	}
	checks++

	// A sweep of the namespace: each pod as alone, the table says it.
	d := decode[listDoc](t, mesh(t, c, "", "why-injected", "-n", ns, "-o", "json"))
	got := map[string]string{}
	for _, it := range d.Items {
		got[it.Name] = it.AmbientCapture
	}
	if got[captured] != injection.AmbientCaptured || got[pending] != injection.AmbientPending || got[unset] != injection.AmbientNotSetUp || got[optOut] != "" {
		t.Errorf("sweep: %v", got)
	}
	table := mesh(t, c, "", "why-injected", "-n", ns)
	if !strings.Contains(table.stdout, "ambient mode, not captured: pending") || !strings.Contains(table.stdout, "kubectl get pod unset -n "+ns+" -o json | kubectl replace --force -f -") {
		t.Errorf("sweep table:\n%s", table.stdout)
	}
	checks += 2

	// A user who may read the namespace's pods and the ConfigMaps but not
	// the node agents' pods: the agents are unknown, and no fix is built on them.
	viewer := ns + "-viewer"
	read := []string{"get", "list"}
	c.GrantRole(t, ns, viewer, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: read}})
	c.GrantClusterRole(t, viewer, "", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps", "nodes", "services"}, Verbs: read},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations"}, Verbs: read},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: read},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
	})
	r := decode[reportDoc](t, mesh(t, c, "", "why-injected", unset, "-n", ns, "--as", viewer, "-o", "json")).InjectionReport
	agents, ok := factorOf(r, "istio-cni on node "+nodeOf(t, c, ns, unset))
	if r.AmbientCapture != injection.AmbientNotSetUp || r.Fix != "" || !ok || agents.Effect != injection.EffectUnknown {
		t.Errorf("viewer without the agents' pods: capture %q, fix %q, factors %+v", r.AmbientCapture, r.Fix, r.Factors)
	}
	checks++
	testreport.Count(t, "ambient: %d answers checked on the real apiserver with istio-cni's ConfigMap from Istio's chart", checks)
}

func nodeOf(t *testing.T, c *testcluster.Cluster, ns, pod string) string {
	t.Helper()
	p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Spec.NodeName
}

// iptables on an ambient pod: its in-pod rules written in its own network
// namespace, as istio-cni's agent writes them, by istio-cni's own rule
// writer (hack/tools/istio/inpod, built from Istio's module, run from an init
// container of the pod: the agent itself needs ztunnel to run), the pod then
// annotated as the agent annotates it. kubectl-mesh reads them with the
// istio-cni agent's image (a stand-in pod on the node carrying the
// DaemonSet's labels and the proxy image, which has iptables), recognises
// ambient mode, compares them with what istio-cni's ConfigMap (rendered
// from Istio's ambient profile) and the pod's annotations call for, and
// traces a connection to ztunnel.
func TestIptablesAmbientPod(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	ctx := context.Background()
	ns := c.Namespace(t, "amb-ipt", map[string]string{"istio.io/dataplane-mode": "ambient"})
	agentsNS := c.Namespace(t, "amb-ipt-cni", nil)
	cm, templates := installAmbientCNI(t, c, agentsNS)

	root, dir := int64(0), corev1.HostPathDirectory
	pod := appPod("web", nil, map[string]string{"ambient.istio.io/dns-capture": "false"})
	pod.Spec.Volumes = []corev1.Volume{{Name: "istio-bin", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: c.IstioBinDir, Type: &dir}}}}
	pod.Spec.InitContainers = []corev1.Container{{Name: "inpod", Image: c.ProxyImage, ImagePullPolicy: corev1.PullNever,
		Command:         []string{"/istio-bin/inpod", "-dns=" + cm.Data["AMBIENT_DNS_CAPTURE"], "-ipv6=" + cm.Data["AMBIENT_IPV6"], "-pod-dns=off"},
		VolumeMounts:    []corev1.VolumeMount{{Name: "istio-bin", MountPath: "/istio-bin", ReadOnly: true}},
		SecurityContext: &corev1.SecurityContext{RunAsUser: &root, Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitPod(t, ns, "web", 120*time.Second, "running", testcluster.Running)
	patch := `{"metadata":{"annotations":{"ambient.istio.io/redirection":"enabled"}}}`
	if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, "web", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	checks := 0

	// No proxy container, no istio-cni pod on the node: it asks for an image.
	if r := mesh(t, c, "", "iptables", "web", "-n", ns); r.code == 0 || !strings.Contains(r.stderr, "--image") {
		t.Errorf("without an istio-cni pod on the node: exit %d, %s", r.code, r.stderr)
	}
	checks++

	// The istio-cni agent's stand-in on the node: its image reads the rules.
	agent := appPod("istio-cni-node-standin", templates["istio-cni-node"].Labels, nil)
	agent.Spec.Containers[0].Image = c.ProxyImage
	agent.Spec.Containers[0].Command = []string{"sleep", "3600"}
	standIn(t, c, agentsNS, agent)
	c.WaitPod(t, agentsNS, agent.Name, 120*time.Second, "running", testcluster.Running)
	r := mesh(t, c, "", "iptables", "web", "-n", ns, "--trace", "out:10.96.0.10:443", "--trace", "out:10.96.0.10:53/udp", "-o", "json")
	d := decode[captureDoc](t, r)
	if r.code != 0 || d.Drift == nil || len(d.Drift.Missing)+len(d.Drift.Extra)+len(d.Drift.Reordered) != 0 ||
		!strings.Contains(d.Expected, "istio-cni's ConfigMap "+agentsNS+"/istio-cni-config") || !strings.Contains(d.Expected, "ambient.istio.io/dns-capture") {
		t.Errorf("exit %d, expected from %q, drift %+v (%s)", r.code, d.Expected, d.Drift, r.stderr)
	}
	checks++
	if len(d.Traces) != 2 || d.Traces[0].Verdict != "redirect" || d.Traces[0].Port != 15001 || !strings.Contains(d.Traces[0].Summary, "ztunnel outbound") || d.Traces[1].Port != 0 {
		t.Errorf("traces: %+v", d.Traces)
	}
	checks++
	if ru := ruleOf(d, "nat", "-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m mark ! --mark 0x539/0xfff -j REDIRECT --to-ports 15001"); ru == nil || !strings.Contains(ru.Annotation, "ztunnel outbound") {
		t.Errorf("the outbound rule is not read as ztunnel's: %+v", ru)
	}
	checks++
	human := mesh(t, c, "", "iptables", "web", "-n", ns)
	if !strings.Contains(human.stdout, "ambient mode") || !strings.Contains(human.stdout, "Drift: none") {
		t.Errorf("human output:\n%s", human.stdout)
	}
	checks++

	// The fleet audit of the namespace: one node pod, the same comparison.
	fl := mesh(t, c, "", "iptables", "audit", "-n", ns, "-o", "json")
	var audit struct {
		Kind  string `json:"kind"`
		Items []struct {
			Pod, Mesh, Inbound, Outbound, DNS, Error string
			Drift                                    *bool
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(fl.stdout), &audit); err != nil || fl.code != 0 || len(audit.Items) != 1 {
		t.Fatalf("fleet audit: exit %d, %v, %d lines\n%s\n%s", fl.code, err, len(audit.Items), fl.stdout, fl.stderr)
	}
	if l := audit.Items[0]; l.Mesh != "istio ambient" || l.Drift == nil || *l.Drift || l.Outbound != "captured (15001)" || l.Inbound != "captured (15006)" || l.DNS != "not captured" || l.Error != "" {
		t.Errorf("fleet audit line: %+v", l)
	}
	checks++
	testreport.Count(t, "iptables on an ambient pod with istio-cni's own in-pod rules: %d checks", checks)
}

// standIn creates a node agent's stand-in pod, and deletes it when the test
// ends, waiting until it is gone: the next test must not find it on the
// node while its namespace is still being deleted.
func standIn(t *testing.T, c *testcluster.Cluster, ns string, p *corev1.Pod) {
	t.Helper()
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		ctx := context.Background()
		_ = c.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := c.Client.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
}
