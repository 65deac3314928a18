package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/yaml"

	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// Istio's CNI plugin, istio-cni built from Istio's module, writes the rules
// of pods that real istiod (the cni revision: istio-validation instead of
// istio-init) injected. It is run here as a container runtime runs a chained
// plugin (CNI_COMMAND=ADD, the network namespace, the pod's name in
// CNI_ARGS, a prevResult), against a test-made network namespace; it reads
// the pod from the real apiserver and programs the namespace with the real
// iptables. The rules it wrote must be exactly what kubectl-mesh expects
// from the pod (no drift): kubectl-mesh derives the plugin's arguments from
// the pod as the plugin does.
func TestIstioCNIPlugin(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	plugin, runDir := cniPlugin(t, c)
	ctx := context.Background()
	ns := c.Namespace(t, "cni", map[string]string{"istio.io/rev": "cni"})
	dns := `{"proxyMetadata": {"ISTIO_META_DNS_CAPTURE": "true"}}`
	cases := []struct {
		name        string
		annotations map[string]string
	}{
		{"defaults", nil},
		{"status-port", map[string]string{"status.sidecar.istio.io/port": "15999"}},
		{"exclusions", map[string]string{
			"traffic.sidecar.istio.io/excludeInboundPorts":     "9090,8443",
			"traffic.sidecar.istio.io/excludeOutboundPorts":    "5432",
			"traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.96.0.0/12,192.168.0.0/16",
			"traffic.sidecar.istio.io/includeOutboundPorts":    "3306"}},
		{"include-lists", map[string]string{
			"traffic.sidecar.istio.io/includeInboundPorts":     "8080,9090",
			"traffic.sidecar.istio.io/includeOutboundIPRanges": "10.0.0.0/8",
			"traffic.sidecar.istio.io/excludeInterfaces":       "eth9"}},
		{"tproxy", map[string]string{"sidecar.istio.io/interceptionMode": "TPROXY", "traffic.sidecar.istio.io/excludeInboundPorts": "9090"}},
		{"dns-capture", map[string]string{"proxy.istio.io/config": dns}},
		{"tproxy-dns", map[string]string{"sidecar.istio.io/interceptionMode": "TPROXY", "proxy.istio.io/config": dns}},
		{"virt-interfaces", map[string]string{"istio.io/reroute-virtual-interfaces": "tap0,tap1"}},
	}
	rules := 0
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := appPod(tc.name, nil, tc.annotations)
			pod.Spec.SchedulerName = "kmesh-unscheduled" // admitted and injected, never run: the plugin is run by hand
			created, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			inits := testcluster.ContainerNames(created.Spec.InitContainers)
			if !strings.Contains(inits, "istio-validation") || strings.Contains(inits, "istio-init") {
				t.Fatalf("the cni revision injected init containers %q, want istio-validation and no istio-init", inits)
			}
			args, env, source, ok := capture.CaptureArgsFromPod(created)
			if !ok || !strings.Contains(source, "CNI plugin") {
				t.Fatalf("capture arguments of the pod: ok %v, from %q", ok, source)
			}

			netns := "kmesh-cni-" + rand.String(6)
			run(t, "ip", "netns", "add", netns)
			t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", netns).Run() })
			podIP := fmt.Sprintf("10.213.99.%d", 10+i)
			run(t, "ip", "-n", netns, "link", "set", "lo", "up")
			// A veth whose pod end is eth0, as the bridge plugin would leave it
			// (removed with the namespace).
			run(t, "ip", "link", "add", "kmc"+netns[len(netns)-6:], "type", "veth", "peer", "name", "eth0", "netns", netns)
			run(t, "ip", "-n", netns, "addr", "add", podIP+"/24", "dev", "eth0")
			run(t, "ip", "-n", netns, "link", "set", "eth0", "up")

			conf, _ := json.Marshal(map[string]any{
				"cniVersion": "1.0.0", "name": "kmeshnet", "type": "istio-cni",
				"cni_agent_run_dir": runDir, "plugin_log_level": "info",
				"prevResult": map[string]any{"cniVersion": "1.0.0",
					"interfaces": []map[string]any{{"name": "eth0", "sandbox": "/var/run/netns/" + netns}},
					"ips":        []map[string]any{{"address": podIP + "/24", "interface": 0}}},
			})
			cmd := exec.Command(plugin)
			cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND=ADD", "CNI_CONTAINERID=kmesh-" + tc.name,
				"CNI_NETNS=/var/run/netns/" + netns, "CNI_IFNAME=eth0", "CNI_PATH=/usr/lib/cni",
				"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=" + ns + ";K8S_POD_NAME=" + tc.name}
			cmd.Stdin = strings.NewReader(string(conf))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("istio-cni ADD: %v\n%s", err, out)
			}

			var dump string
			for _, save := range []string{"iptables-nft-save", "iptables-legacy-save"} {
				if out := run(t, "ip", "netns", "exec", netns, save); strings.Contains(out, "ISTIO_") {
					dump = out
				}
			}
			if dump == "" {
				t.Fatalf("istio-cni wrote no ISTIO_ chains in the pod's network namespace")
			}
			rs, err := capture.ParseSave([]byte(dump))
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := capture.ParseCaptureArgs(args, env)
			if err != nil {
				t.Fatal(err)
			}
			cfg.PodAddrs = []netip.Addr{netip.MustParseAddr(podIP)}
			drift, err := capture.CompareRules(rs, capture.ExpectedRules(cfg, false, nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(drift.Missing)+len(drift.Extra)+len(drift.Reordered) > 0 {
				t.Errorf("expected from %q, istio-cni wrote otherwise:\nmissing %q\nextra %q\nreordered %q\n%s", args, drift.Missing, drift.Extra, drift.Reordered, dump)
			}
			rules += rs.RuleCount()
		})
	}
	testreport.Count(t, "%d pods injected by real istiod for the CNI plugin, %d rules written by Istio's istio-cni, 0 drift", len(cases), rules)
}

// cniPlugin is Istio's CNI plugin, and a run directory for it holding the
// kubeconfig it reads pods with (as the agent's install leaves it).
func cniPlugin(t *testing.T, c *testcluster.Cluster) (plugin, runDir string) {
	t.Helper()
	plugin = filepath.Join(c.IstioBinDir, "istio-cni")
	if _, err := os.Stat(plugin); err != nil {
		t.Fatalf("istio-cni not built (hack/cluster/build-istio.sh): %v", err)
	}
	runDir = t.TempDir()
	kc, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(runDir, "istio-cni-kubeconfig"), kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return plugin, runDir
}

// run runs a command of the host and returns its output, failing the test on error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The CNI readiness race of ambient mode, with Istio's real CNI plugin: a
// pod that ambient mode enrolls (the plugin reads it and its namespace from
// the real apiserver and matches the chart's enablement selectors) while no
// istio-cni node agent listens on the node. The plugin fails the sandbox; the
// kubelet here does not run Istio's plugin in its chain, so the test writes
// the kubelet's FailedCreatePodSandBox event itself (a stand-in, with the
// plugin's own error in containerd's wording). startup must name the race
// and the fix.
func TestAmbientCNIRace(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	plugin, runDir := cniPlugin(t, c) // the agent's run directory, without its socket: no agent
	ctx := context.Background()
	ns := c.Namespace(t, "amb-race", map[string]string{"istio.io/dataplane-mode": "ambient"})
	pod := appPod("web", nil, nil)
	pod.Spec.SchedulerName = "kmesh-unscheduled"
	created, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm, _ := renderAmbient(t, c)
	var selectors []map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["AMBIENT_ENABLEMENT_SELECTOR"]), &selectors); err != nil {
		t.Fatal(err)
	}
	conf, _ := json.Marshal(map[string]any{
		"cniVersion": "1.0.0", "name": "kmeshnet", "type": "istio-cni",
		"cni_agent_run_dir": runDir, "plugin_log_level": "info", "ambient_enabled": true,
		"enablement_selectors": selectors, "exclude_namespaces": strings.Split(cm.Data["EXCLUDE_NAMESPACES"], ","),
		"prevResult": map[string]any{"cniVersion": "1.0.0", "ips": []map[string]any{{"address": "10.213.98.10/24"}}},
	})
	cmd := exec.Command(plugin)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "CNI_COMMAND=ADD", "CNI_CONTAINERID=kmesh-race",
		"CNI_NETNS=/var/run/netns/kmesh-race-none", "CNI_IFNAME=eth0", "CNI_PATH=/usr/lib/cni",
		"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=" + ns + ";K8S_POD_NAME=web"}
	cmd.Stdin = strings.NewReader(string(conf))
	out, err := cmd.Output()
	var cniErr struct {
		Msg string `json:"msg"`
	}
	if err == nil || json.Unmarshal(out, &cniErr) != nil || !strings.Contains(cniErr.Msg, "failed to contact node Istio CNI agent") {
		t.Fatalf("istio-cni ADD without an agent: err %v, output %s", err, out)
	}
	now := metav1.Now()
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "web-"}, Type: corev1.EventTypeWarning,
		Reason: "FailedCreatePodSandBox", Count: 4, FirstTimestamp: now, LastTimestamp: now, Source: corev1.EventSource{Component: "kubelet"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web", UID: created.UID, APIVersion: "v1"},
		Message:        `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "kmesh-race": plugin type="istio-cni" name="kmeshnet" failed (add): ` + cniErr.Msg}
	if _, err := c.Client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var r startup.StartupReport
	res := mesh(t, c, "", "startup", "web", "-n", ns, "-o", "json")
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
		t.Fatalf("startup -o json: %v\n%s\n%s", err, res.stdout, res.stderr)
	}
	if !r.Ambient || len(r.Hazards) != 1 || r.Hazards[0].ID != "ambient-cni-not-ready" || !strings.Contains(r.Hazards[0].Message, "4 times") {
		t.Errorf("startup of a pod the plugin could not hand to the agent: ambient %v, hazards %+v", r.Ambient, r.Hazards)
	}
	human := mesh(t, c, "", "startup", "web", "-n", ns)
	if !strings.Contains(human.stdout, "could not reach the istio-cni agent") || !strings.Contains(human.stdout, "istio-cni-node") ||
		!strings.Contains(human.stdout, "(ambient mode, no sidecar)") {
		t.Errorf("startup does not say the race and its fix:\n%s", human.stdout)
	}
	// diagnose's catalogue: KM-INIT-006, planted here (TestCheckCatalogue
	// names this test as its plant).
	var d struct {
		Findings []struct{ Code, Status string }
	}
	dres := mesh(t, c, "", "diagnose", "web", "-n", ns, "-o", "json")
	if err := json.Unmarshal([]byte(dres.stdout), &d); err != nil {
		t.Fatalf("diagnose -o json: %v\n%s\n%s", err, dres.stdout, dres.stderr)
	}
	found := false
	for _, f := range d.Findings {
		found = found || f.Code == "KM-INIT-006" && f.Status == "fail"
	}
	if !found {
		t.Errorf("diagnose of the pod the plugin could not hand to the agent has no KM-INIT-006 finding: %+v", d.Findings)
	}
	testreport.Count(t, "ambient CNI race: Istio's CNI plugin failed the sandbox without its agent (%q); startup named it, diagnose as KM-INIT-006", cniErr.Msg)
}
