package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubectl-mesh/kubectl-mesh/internal/testcluster"
	"github.com/kubectl-mesh/kubectl-mesh/internal/testreport"
)

// The diagnose JSON as this test reads it: its own small types, so that it
// decodes whatever the command prints (an item without findings decodes
// with none).
type catFinding struct {
	Code     string `json:"code"`
	Title    string `json:"title"`
	Stage    string `json:"stage"`
	Status   string `json:"status"`
	Evidence string `json:"evidence"`
	Fix      string `json:"fix"`
	Mesh     string `json:"mesh"`
}

type catCheck struct {
	Name     string `json:"name"`
	Status   string `json:"status"`
	Code     string `json:"code"`
	Evidence string `json:"evidence"`
}

type catItem struct {
	WorkloadKind string       `json:"workloadKind"`
	Namespace    string       `json:"namespace"`
	Name         string       `json:"name"`
	Status       string       `json:"status"`
	First        string       `json:"first"`
	Verdict      string       `json:"verdict"`
	Checks       []catCheck   `json:"checks"`
	Findings     []catFinding `json:"findings"`
}

type catDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	catItem
	Items []catItem `json:"items"`
}

func (d catDoc) all() []catItem {
	if d.Kind == "Diagnosis" {
		return []catItem{d.catItem}
	}
	return d.Items
}

// has reports whether the item has a finding with that code.
func (it catItem) has(code string) bool {
	for _, f := range it.Findings {
		if f.Code == code {
			return true
		}
	}
	return false
}

func (it catItem) check(name string) catCheck {
	for _, c := range it.Checks {
		if c.Name == name {
			return c
		}
	}
	return catCheck{Name: name, Status: "(absent)"}
}

// codes lists the item's findings as CODE(status).
func (it catItem) codes() string {
	var out []string
	for _, f := range it.Findings {
		out = append(out, f.Code+"("+f.Status+")")
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, " ")
}

// says is what diagnose says about the item, in one line.
func (it catItem) says() string {
	return fmt.Sprintf("%s %s: status %s, first %q, verdict %q; findings %s", it.WorkloadKind, it.Name, it.Status, it.First, catShort(it.Verdict), it.codes())
}

// catShort is s on one line, cut at 300 characters.
func catShort(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// catMessage is one message of `istioctl analyze -o json`.
type catMessage struct {
	Code    string `json:"code"`
	Level   string `json:"level"`
	Message string `json:"message"`
	Origin  string `json:"origin"`
}

// catContractCode is one line of the catalogue (diagnose --list-checks).
type catContractCode struct {
	code, status, kind, stage, what string
	istioctl                        []string
}

// readCatalogueContract reads the catalogue from the built binary
// (diagnose --list-checks -o json): the registry itself.
func readCatalogueContract(t *testing.T, c *testcluster.Cluster) []catContractCode {
	t.Helper()
	res := mesh(t, c, "", "diagnose", "--list-checks", "-o", "json")
	var doc struct {
		Items []struct {
			Code, Status, Kind, Stage, Title string
			Istioctl                         []string
		}
	}
	if err := json.Unmarshal([]byte(res.stdout), &doc); err != nil || len(doc.Items) == 0 {
		t.Fatalf("diagnose --list-checks -o json: %v\n%s\n%s", err, res.stdout, res.stderr)
	}
	var out []catContractCode
	for _, it := range doc.Items {
		out = append(out, catContractCode{code: it.Code, status: it.Status, kind: it.Kind, stage: it.Stage, what: it.Title, istioctl: it.Istioctl})
	}
	return out
}

// catFault is one planted fault: the code it is for, the namespace and the
// pod (or the workload, when admission refuses its pods), how it was
// planted, and its plant function, which creates it and then waits until
// the fault is in the state it is about.
type catFault struct {
	code, ns, name, how string
	// workload: no pod is admitted; the diagnosis item is the Deployment's
	// (or its ReplicaSet's), named name or name-….
	workload bool
	plant    func(ctx context.Context, f *catFault) error
	// Set by plant: the pod (when name is its Deployment's or Job's) and
	// the state reached.
	pod, state string
	err        error
	took       time.Duration
}

// target is the pod's name, or the workload's.
func (f *catFault) target() string {
	if f.workload {
		return f.name
	}
	return f.pod
}

// key names the fault's pod (ns/pod) or workload (ns/workload:name) as the
// istioctl messages are filed.
func (f *catFault) key() string {
	if f.workload {
		return f.ns + "/workload:" + f.name
	}
	return f.ns + "/" + f.pod
}

// catPoll polls cond every 500ms until it holds or ctx ends; last says
// what was seen last, for the error.
func catPoll(ctx context.Context, what string, cond func(ctx context.Context) (bool, string)) error {
	last := ""
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, seen := cond(ctx)
		last = seen
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %v; last seen: %s", what, err, last)
	}
	return nil
}

// catPodState is a pod's phase and its containers' states, in one line.
func catPodState(p *corev1.Pod) string {
	var parts []string
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		st := "?"
		switch {
		case s.State.Running != nil:
			st = "running"
		case s.State.Waiting != nil:
			st = "waiting:" + s.State.Waiting.Reason
		case s.State.Terminated != nil:
			st = fmt.Sprintf("terminated:%s(%d)", s.State.Terminated.Reason, s.State.Terminated.ExitCode)
		}
		parts = append(parts, fmt.Sprintf("%s=%s,ready=%v,restarts=%d", s.Name, st, s.Ready, s.RestartCount))
	}
	return fmt.Sprintf("phase %s node %q [%s]", p.Status.Phase, p.Spec.NodeName, strings.Join(parts, " "))
}

// catStatus is the status of the (init) container named name.
func catStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// catFailedAgain: the container failed and was restarted (a crash loop,
// whichever phase of it the container is in now).
func catFailedAgain(s *corev1.ContainerStatus) bool {
	return s != nil && s.RestartCount >= 1 && s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.ExitCode != 0
}

// catRunningFor: the container runs, started at least d ago.
func catRunningFor(s *corev1.ContainerStatus, d time.Duration) bool {
	return s != nil && s.State.Running != nil && time.Since(s.State.Running.StartedAt.Time) >= d
}

func catWaitPod(ctx context.Context, c *testcluster.Cluster, ns, name, what string, cond func(p *corev1.Pod) bool) (*corev1.Pod, error) {
	var last *corev1.Pod
	err := catPoll(ctx, "pod "+name+": "+what, func(ctx context.Context) (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		last = p
		return cond(p), catPodState(p)
	})
	return last, err
}

// catPodOf waits for the first pod matching selector and returns its name.
func catPodOf(ctx context.Context, c *testcluster.Cluster, ns, selector string) (string, error) {
	name := ""
	err := catPoll(ctx, "a pod "+selector, func(ctx context.Context) (bool, string) {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(l.Items) == 0 {
			return false, fmt.Sprint("no pod ", err)
		}
		name = l.Items[0].Name
		return true, ""
	})
	return name, err
}

// catWaitEvent waits for an event of reason about an object named object
// (or object-…) whose message holds what, and returns the message.
func catWaitEvent(ctx context.Context, c *testcluster.Cluster, ns, reason, object, what string) (string, error) {
	found := ""
	err := catPoll(ctx, fmt.Sprintf("event %s on %s naming %q", reason, object, what), func(ctx context.Context) (bool, string) {
		evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			n := e.InvolvedObject.Name
			if (n == object || strings.HasPrefix(n, object+"-")) && strings.Contains(e.Message, what) {
				found = e.Message
				return true, ""
			}
			seen = append(seen, n+": "+e.Message)
		}
		return false, fmt.Sprint(seen)
	})
	return found, err
}

// catDryRun creates a plain pod in ns as a server-side dry run: what the
// apiserver and its webhooks would make of a pod created there now.
func catDryRun(ctx context.Context, c *testcluster.Cluster, ns string) (*corev1.Pod, error) {
	p := appPod("dry-run", nil, nil)
	p.Spec.SchedulerName = "kmesh-unscheduled"
	return c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
}

// catWaitInjectedBy waits until a pod created in ns now is injected by
// revision rev.
func catWaitInjectedBy(ctx context.Context, c *testcluster.Cluster, ns, rev string) error {
	return catPoll(ctx, "pods created in "+ns+" now to be injected by revision "+rev, func(ctx context.Context) (bool, string) {
		p, err := catDryRun(ctx, c, ns)
		if err != nil {
			return false, err.Error()
		}
		var st injectionStatus
		raw := p.Annotations["sidecar.istio.io/status"]
		_ = json.Unmarshal([]byte(raw), &st)
		return st.Revision == rev, "status " + raw
	})
}

// catRelabel sets (value non-empty) or removes namespace labels.
func catRelabel(ctx context.Context, c *testcluster.Cluster, ns string, set map[string]string) error {
	nsObj, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	for k, v := range set {
		if v == "" {
			delete(nsObj.Labels, k)
		} else {
			nsObj.Labels[k] = v
		}
	}
	_, err = c.Client.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	return err
}

// catEphemeral runs command in an ephemeral container of the test image
// with NET_ADMIN and NET_RAW, as root, and returns its log.
func catEphemeral(ctx context.Context, c *testcluster.Cluster, ns, pod, name string, command ...string) (string, error) {
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	root, no := int64(0), false
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: testImage, ImagePullPolicy: corev1.PullNever, Command: command,
		SecurityContext: &corev1.SecurityContext{RunAsUser: &root, RunAsNonRoot: &no,
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}},
	}})
	if _, err := c.Client.CoreV1().Pods(ns).UpdateEphemeralContainers(ctx, pod, p, metav1.UpdateOptions{}); err != nil {
		return "", err
	}
	if _, err := catWaitPod(ctx, c, ns, pod, "ephemeral container "+name+" to finish", func(p *corev1.Pod) bool {
		for _, s := range p.Status.EphemeralContainerStatuses {
			if s.Name == name && s.State.Terminated != nil {
				return true
			}
		}
		return false
	}); err != nil {
		return "", err
	}
	b, err := c.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: name}).DoRaw(ctx)
	return string(b), err
}

// catRun runs a command and returns its output and exit code; err only
// when it could not be run.
func catRun(name string, args ...string) (result, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return result{stdout: out.String(), stderr: errOut.String(), code: exit.ExitCode()}, nil
	}
	return result{stdout: out.String(), stderr: errOut.String()}, err
}

// catDiagnose runs `kubectl-mesh diagnose -n NS -o json` (and more args)
// and decodes its document.
func catDiagnose(bin, kubeconfig, ns string, more ...string) (catDoc, result, error) {
	r, err := catRun(bin, append([]string{"--kubeconfig", kubeconfig, "diagnose", "-n", ns, "-o", "json"}, more...)...)
	var d catDoc
	if err == nil {
		err = json.Unmarshal([]byte(r.stdout), &d)
	}
	if err == nil && (d.APIVersion != "kubectl-mesh.io/v1alpha1" || d.Kind != "Diagnosis" && d.Kind != "DiagnosisList") {
		err = fmt.Errorf("apiVersion %q kind %q", d.APIVersion, d.Kind)
	}
	if err != nil {
		return d, r, fmt.Errorf("diagnose -n %s %s: %v (exit %d)\n%s\n%s", ns, strings.Join(more, " "), err, r.code, catShort(r.stdout), r.stderr)
	}
	return d, r, nil
}

// catAnalyze runs the built istioctl's analyze on namespace ns.
func catAnalyze(c *testcluster.Cluster, ns string) ([]catMessage, error) {
	r, err := catRun(c.IstioctlPath, "analyze", "--kubeconfig", c.Kubeconfig, "--istioNamespace", "istio-system", "-n", ns, "-o", "json")
	if err != nil {
		return nil, err
	}
	out := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(out, "[") {
		if strings.Contains(out+r.stderr, "No validation issues") {
			return nil, nil
		}
		return nil, fmt.Errorf("istioctl analyze -n %s: exit %d, not a JSON list:\n%s\n%s", ns, r.code, out, r.stderr)
	}
	var msgs []catMessage
	if err := json.Unmarshal([]byte(out), &msgs); err != nil {
		return nil, fmt.Errorf("istioctl analyze -n %s: %v\n%s", ns, err, out)
	}
	return msgs, nil
}

// catOrigin splits an istioctl message's origin ("Pod web.shop", "Service
// db.shop", "MutatingWebhookConfiguration x") into kind, namespace, name.
func catOrigin(origin, ns string) (kind, name string, inNS bool) {
	kind, rest, _ := strings.Cut(origin, " ")
	switch {
	case strings.HasSuffix(rest, "."+ns):
		return kind, strings.TrimSuffix(rest, "."+ns), true
	case strings.HasPrefix(rest, ns+"/"):
		return kind, strings.TrimPrefix(rest, ns+"/"), true
	}
	return kind, rest, false
}

// catLean: the pod's istio-proxy (and istio-init) request 10m CPU instead
// of Istio's default 100m, so that the ~40 injected pods of this test fit
// on the test bed's one node (2 CPUs) beside whatever else runs there.
func catLean(kv ...string) map[string]string {
	m := map[string]string{"sidecar.istio.io/proxyCPU": "10m"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// catService is a Service of ns selecting app=app with the ports given.
func catService(name, app string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app}, Ports: ports}}
}

func catPort(name string, port, target int32, proto corev1.Protocol) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: port, TargetPort: intstr.FromInt32(target), Protocol: proto}
}

// catPolicy is a NetworkPolicy of the namespace selecting app=app, of the
// types and rules given.
func catPolicy(app string, types []networkingv1.PolicyType, ingress []networkingv1.NetworkPolicyIngressRule, egress []networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			PolicyTypes: types, Ingress: ingress, Egress: egress}}
}

// catPolicyPorts are a NetworkPolicy rule's ports of one protocol.
func catPolicyPorts(proto corev1.Protocol, ports ...int32) []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for _, p := range ports {
		pr, v := proto, intstr.FromInt32(p)
		out = append(out, networkingv1.NetworkPolicyPort{Protocol: &pr, Port: &v})
	}
	return out
}

// catPodNames finds the pods a namespace message of istioctl names.
var catPodNames = regexp.MustCompile(`pod names: \[([^\]]*)\]`)

// catNotPlanted names the catalogue's codes this test does not plant, and
// where they are planted instead.
var catNotPlanted = map[string]string{
	"KM-INIT-006": "planted by TestAmbientCNIRace: the real istio-cni plugin fails a sandbox without its agent; diagnose names it",
}

// TestCheckCatalogue plants, on the real cluster, one fault for every code
// of diagnose's check catalogue (the catalogue (diagnose --list-checks)): each in a
// throwaway namespace (cat-…), with real istiod revisions injecting, the
// real kubelet running istio-init, istio-validation and the stand-in proxy,
// real istio-iptables, real admission (webhooks, ResourceQuota,
// PodSecurity). Every fault is planted at once, then waited for until it
// is in the state it is about; then `kubectl-mesh diagnose -n NS -o json`
// (with --rules --connections for the namespace of the live faults) must
// list, on the faulty pod (or on the workload whose pods are refused), a
// finding with the fault's code, and none that fails or warns on the
// healthy control pod. Side by side, `istioctl analyze` (built from the
// pinned Istio) on every namespace: each of its messages about a pod (or a
// Deployment or Service, mapped to their pods) must meet a finding of
// diagnose on that pod; the findings istioctl has no message for are logged.
func TestCheckCatalogue(t *testing.T) {
	c := testcluster.Get(t)
	c.InstallMesh(t)
	if c.IstioctlPath == "" {
		t.Fatal("no istioctl: hack/cluster/build-istio.sh builds it")
	}
	bin := meshBinary(t, c)
	contract := readCatalogueContract(t, c)
	start := time.Now()
	ctx := context.Background()
	checks, matched, istioMsgs := 0, 0, 0
	found := 0
	var planted int
	defer func() {
		testreport.Count(t, "check catalogue: %d of %d codes planted, %d found by diagnose; %d istioctl messages about their pods, %d met by a diagnose finding; %d checks (%s)",
			planted, len(contract), found, istioMsgs, matched, checks, time.Since(start).Round(time.Second))
	}()
	check := func(t *testing.T, ok bool, format string, args ...any) bool {
		t.Helper()
		checks++
		if !ok {
			t.Errorf(format, args...)
		}
		return ok
	}

	// The namespaces, each holding the faults its labels are part of.
	inj := c.Namespace(t, "cat-inj", map[string]string{"istio-injection": "enabled"})
	live := c.Namespace(t, "cat-live", map[string]string{"istio-injection": "enabled"})
	plain := c.Namespace(t, "cat-plain", nil)
	late := c.Namespace(t, "cat-late", nil)
	rev := c.Namespace(t, "cat-rev", map[string]string{"istio.io/rev": "canary"})
	conflict := c.Namespace(t, "cat-conflict", map[string]string{"istio-injection": "enabled", "istio.io/rev": "canary"})
	broken := c.Namespace(t, "cat-broken", map[string]string{"kmesh.test/catalogue-down": "yes"})
	dup := c.Namespace(t, "cat-dup", map[string]string{"istio-injection": "enabled", "kmesh.test/catalogue-dup": "yes"})
	quota := c.Namespace(t, "cat-quota", map[string]string{"istio-injection": "enabled"})
	psa := c.Namespace(t, "cat-psa", map[string]string{"istio-injection": "enabled", "pod-security.kubernetes.io/enforce": "baseline"})
	vap := c.Namespace(t, "cat-vap", map[string]string{"istio-injection": "enabled"})
	cni := c.Namespace(t, "cat-cni", map[string]string{"istio.io/rev": "cni"})
	amb := c.Namespace(t, "cat-amb", map[string]string{"istio.io/dataplane-mode": "ambient"})
	ambAgents := c.Namespace(t, "cat-amb-cni", nil) // the node agents' stand-ins: no fault of its own
	faultNamespaces := []string{inj, live, plain, late, rev, conflict, broken, dup, quota, psa, vap, cni, amb}
	// A MutatingAdmissionPolicy (served as v1 from Kubernetes 1.36) labels
	// one namespace's pods sidecar.istio.io/inject=false.
	notPlanted := maps.Clone(catNotPlanted)
	mapNS := ""
	if catServes(c, "admissionregistration.k8s.io/v1", "mutatingadmissionpolicies") {
		mapNS = c.Namespace(t, "cat-map", map[string]string{"istio-injection": "enabled"})
		faultNamespaces = append(faultNamespaces, mapNS)
	} else {
		notPlanted["KM-INJ-017"] = "this lane's apiserver serves no MutatingAdmissionPolicy (v1, Kubernetes 1.36 and later)"
	}

	// Webhook faults: copies of the default revision's namespace webhook
	// (the real istiod's CA), each in a configuration of its own whose
	// namespace selector matches one test namespace only, deleted at the
	// end.
	def, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "istio-sidecar-injector", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var orig *admissionv1.MutatingWebhook
	for i := range def.Webhooks {
		if def.Webhooks[i].Name == "namespace.sidecar-injector.istio.io" {
			orig = &def.Webhooks[i]
		}
	}
	if orig == nil || orig.NamespaceSelector == nil || orig.ClientConfig.URL == nil {
		t.Fatalf("the default revision has no namespace.sidecar-injector.istio.io webhook with a namespace selector and a URL: %+v", def.Webhooks)
	}
	webhookCopy := func(name string, edit func(w *admissionv1.MutatingWebhook)) {
		t.Helper()
		w := orig.DeepCopy()
		edit(w)
		if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"istio.io/rev": "default", "app": "sidecar-injector"}},
			Webhooks:   []admissionv1.MutatingWebhook{*w},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	// The default revision's webhook as it is once its istiod is gone
	// (failurePolicy Fail, its URL on loopback where nothing listens): the
	// only webhook that matches cat-broken, which has no injection label.
	webhookCopy("istio-sidecar-injector-down-"+broken, func(w *admissionv1.MutatingWebhook) {
		url := "https://127.0.0.1:1/inject"
		w.ClientConfig.URL = &url
		w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kmesh.test/catalogue-down": "yes", "kubernetes.io/metadata.name": broken}}
	})
	// A second copy of it, the real istiod's URL and failurePolicy Ignore,
	// as a stale second install leaves one, matching cat-dup (labelled
	// istio-injection=enabled) only: two Istio webhooks match its pods.
	webhookCopy("istio-sidecar-injector-dup-"+dup, func(w *admissionv1.MutatingWebhook) {
		ignore := admissionv1.Ignore
		w.FailurePolicy = &ignore
		w.NamespaceSelector.MatchLabels = map[string]string{"kmesh.test/catalogue-dup": "yes", "kubernetes.io/metadata.name": dup}
	})

	// Ambient mode as TestDiagnose sets it up: istio-cni's ConfigMap of the
	// ambient profile, its node agent's stand-in ready, ztunnel's never.
	_, templates := installAmbientCNI(t, c, ambAgents)
	standIn(t, c, ambAgents, appPod("istio-cni-node-standin", templates["istio-cni-node"].Labels, nil))
	ztunnel := appPod("ztunnel-standin", templates["ztunnel"].Labels, nil)
	ztunnel.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}}
	standIn(t, c, ambAgents, ztunnel)

	createPod := func(ctx context.Context, ns string, p *corev1.Pod) error {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		if p.Labels["app"] == "" {
			p.Labels["app"] = p.Name
		}
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	}
	createService := func(ctx context.Context, ns string, s *corev1.Service) error {
		_, err := c.Client.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
		return err
	}
	createPolicy := func(ctx context.Context, ns string, np *networkingv1.NetworkPolicy) error {
		_, err := c.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{})
		return err
	}
	runningReady := func(ctx context.Context, f *catFault, ns string, p *corev1.Pod) error {
		if err := createPod(ctx, ns, p); err != nil {
			return err
		}
		f.pod = p.Name
		f.state = "running and ready"
		_, err := catWaitPod(ctx, c, ns, p.Name, "running and ready", testcluster.Running)
		return err
	}
	failedAgain := func(ctx context.Context, f *catFault, ns string, p *corev1.Pod, container string) error {
		if err := createPod(ctx, ns, p); err != nil {
			return err
		}
		f.pod = p.Name
		f.state = container + " failed and was restarted"
		_, err := catWaitPod(ctx, c, ns, p.Name, f.state, func(p *corev1.Pod) bool { return catFailedAgain(catStatus(p, container)) })
		return err
	}
	refused := func(ctx context.Context, f *catFault, ns string, annotations map[string]string, edit func(*corev1.PodSpec), what string) error {
		d := appDeployment(ns, f.name, 1, annotations)
		if edit != nil {
			edit(&d.Spec.Template.Spec)
		}
		if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return err
		}
		msg, err := catWaitEvent(ctx, c, ns, "FailedCreate", f.name, what)
		f.state = "FailedCreate: " + catShort(msg)
		return err
	}
	classic := func(kv ...string) map[string]string {
		return catLean(append([]string{"sidecar.istio.io/nativeSidecar", "false"}, kv...)...)
	}
	readyDelay := func(d string) string { return `{"proxyMetadata": {"STANDIN_READY_DELAY": "` + d + `"}}` }
	root := int64(0)
	netAdmin := &corev1.SecurityContext{RunAsUser: &root, Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN", "NET_RAW"}}}
	backendDone, backendIP := make(chan struct{}), "" // closed once the backend runs (its IP set) or failed

	faults := []*catFault{
		// ---- injection ----
		{code: "KM-INJ-001", ns: late, name: "late", how: "a Deployment's pod created in an unlabelled namespace, which is then labelled istio-injection=enabled",
			plant: func(ctx context.Context, f *catFault) error {
				if _, err := c.Client.AppsV1().Deployments(late).Create(ctx, appDeployment(late, "late", 1, nil), metav1.CreateOptions{}); err != nil {
					return err
				}
				pod, err := catPodOf(ctx, c, late, "app=late")
				if err != nil {
					return err
				}
				f.pod = pod
				if _, err := catWaitPod(ctx, c, late, pod, "running and ready", testcluster.Running); err != nil {
					return err
				}
				if err := catRelabel(ctx, c, late, map[string]string{"istio-injection": "enabled"}); err != nil {
					return err
				}
				f.state = "running without a sidecar; a pod created now is injected by revision default"
				return catWaitInjectedBy(ctx, c, late, "default")
			}},
		{code: "KM-INJ-002", ns: rev, name: "old-rev", how: "injected by revision canary (namespace istio.io/rev=canary), then the namespace relabelled istio.io/rev=default",
			plant: func(ctx context.Context, f *catFault) error {
				if err := runningReady(ctx, f, rev, appPod("old-rev", nil, catLean())); err != nil {
					return err
				}
				if err := catRelabel(ctx, c, rev, map[string]string{"istio.io/rev": "default"}); err != nil {
					return err
				}
				f.state = "running, injected by canary; a pod created now is injected by revision default"
				return catWaitInjectedBy(ctx, c, rev, "default")
			}},
		{code: "KM-INJ-003", ns: conflict, name: "conflicted", how: "a pod in a namespace labelled both istio-injection=enabled and istio.io/rev=canary",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, conflict, appPod("conflicted", nil, catLean()))
			}},
		{code: "KM-INJ-004", ns: broken, name: "web", workload: true, how: "the default revision's namespace webhook copied for this namespace only with its istiod gone (failurePolicy Fail, URL https://127.0.0.1:1/inject); a Deployment",
			plant: func(ctx context.Context, f *catFault) error {
				// The apiserver calls the new webhook from the moment a dry run is refused.
				if err := catPoll(ctx, "the dead webhook to refuse pods in "+broken, func(ctx context.Context) (bool, string) {
					_, err := catDryRun(ctx, c, broken)
					return err != nil && strings.Contains(err.Error(), "failed calling webhook"), fmt.Sprint(err)
				}); err != nil {
					return err
				}
				return refused(ctx, f, broken, nil, nil, "failed calling webhook")
			}},
		{code: "KM-INJ-005", ns: dup, name: "two-webhooks", how: "a pod in a namespace that a copy of the default revision's namespace webhook (real istiod, failurePolicy Ignore) also matches",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, dup, appPod("two-webhooks", nil, catLean()))
			}},
		{code: "KM-INJ-006", ns: plain, name: "image-auto", how: "a container istio-proxy with image auto (imagePullPolicy Never) in a namespace no webhook injects",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("image-auto", nil, nil)
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: "auto", ImagePullPolicy: corev1.PullNever})
				if err := createPod(ctx, plain, p); err != nil {
					return err
				}
				f.pod = p.Name
				f.state = "istio-proxy cannot start: image auto"
				_, err := catWaitPod(ctx, c, plain, p.Name, f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "istio-proxy")
					return s != nil && s.State.Waiting != nil && s.State.Waiting.Reason != "" && s.State.Waiting.Reason != "ContainerCreating"
				})
				return err
			}},
		{code: "KM-INJ-007", ns: inj, name: "bad-cidr", workload: true, how: "a Deployment whose template has traffic.sidecar.istio.io/excludeOutboundIPRanges=10.0.0.0/33, which istiod refuses",
			plant: func(ctx context.Context, f *catFault) error {
				return refused(ctx, f, inj, catLean("traffic.sidecar.istio.io/excludeOutboundIPRanges", "10.0.0.0/33"), nil, "10.0.0.0/33")
			}},
		{code: "KM-INJ-008", ns: inj, name: "typo", how: "annotation traffic.sidecar.istio.io/excludeOutboundPort (no s): not one of Istio's",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, inj, appPod("typo", nil, catLean("traffic.sidecar.istio.io/excludeOutboundPort", "9090")))
			}},
		{code: "KM-INJ-009", ns: inj, name: "host-network", how: "hostNetwork: true, label sidecar.istio.io/inject=true, in an injection-enabled namespace",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("host-network", map[string]string{"sidecar.istio.io/inject": "true"}, nil)
				p.Spec.HostNetwork = true
				p.Spec.Containers[0].Command = []string{"sleep", "3600"}
				p.Spec.Containers[0].Ports = nil
				return runningReady(ctx, f, inj, p)
			}},
		{code: "KM-INJ-010", ns: plain, name: "inject-annotation", how: "annotation (not label) sidecar.istio.io/inject=true in a namespace without injection labels",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, plain, appPod("inject-annotation", nil, map[string]string{"sidecar.istio.io/inject": "true"}))
			}},
		{code: "KM-INJ-011", ns: quota, name: "quota-web", workload: true, how: "ResourceQuota limits.memory=512Mi in an injected namespace; a Deployment whose app has a 64Mi limit (the sidecar's 1Gi exceeds it)",
			plant: func(ctx context.Context, f *catFault) error {
				q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "memory"},
					Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceLimitsMemory: resource.MustParse("512Mi")}}}
				if _, err := c.Client.CoreV1().ResourceQuotas(quota).Create(ctx, q, metav1.CreateOptions{}); err != nil {
					return err
				}
				// Admission enforces the quota once its controller has counted it.
				if err := catPoll(ctx, "the quota's status", func(ctx context.Context) (bool, string) {
					q, err := c.Client.CoreV1().ResourceQuotas(quota).Get(ctx, "memory", metav1.GetOptions{})
					return err == nil && len(q.Status.Hard) > 0, fmt.Sprint(err)
				}); err != nil {
					return err
				}
				return refused(ctx, f, quota, nil, func(s *corev1.PodSpec) {
					s.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
				}, "exceeded quota")
			}},
		{code: "KM-INJ-014", ns: vap, name: "vap-web", workload: true, how: "a ValidatingAdmissionPolicy refusing init containers that add NET_ADMIN, bound to an injection-enabled namespace; a Deployment",
			plant: func(ctx context.Context, f *catFault) error {
				if err := noNetAdminPolicy(ctx, t, c, "cat-no-net-admin", vap); err != nil {
					return err
				}
				return refused(ctx, f, vap, catLean(), nil, "ValidatingAdmissionPolicy")
			}},
		{code: "KM-INJ-012", ns: psa, name: "psa-web", workload: true, how: "namespace pod-security.kubernetes.io/enforce=baseline and istio-injection=enabled; a Deployment",
			plant: func(ctx context.Context, f *catFault) error {
				return refused(ctx, f, psa, catLean(), nil, "violates PodSecurity")
			}},

		// ---- init ----
		{code: "KM-INIT-001", ns: inj, name: "no-netadmin", how: "istio-init customised (a pod init container istio-init, image auto) to add only NET_RAW: the real istio-iptables is refused",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("no-netadmin", nil, catLean())
				p.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: "auto", ImagePullPolicy: corev1.PullNever,
					SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_RAW"}, Drop: []corev1.Capability{"ALL"}}}}}
				return failedAgain(ctx, f, inj, p, "istio-init")
			}},
		// (Not "80,http": the image's /etc/services names port 80 http, and
		// iptables takes it.)
		{code: "KM-INIT-002", ns: inj, name: "bad-ports", how: `traffic.sidecar.istio.io/includeOutboundPorts="80,http-api" (a Service's port name: istiod admits it, iptables-restore refuses it)`,
			plant: func(ctx context.Context, f *catFault) error {
				return failedAgain(ctx, f, inj, appPod("bad-ports", nil, catLean("traffic.sidecar.istio.io/includeOutboundPorts", "80,http-api")), "istio-init")
			}},
		{code: "KM-INIT-003", ns: inj, name: "chain-exists", how: "classic sidecar; a user init container (istiod runs it before istio-init) leaves an ISTIO_INBOUND chain in both iptables backends: istio-init's restore fails",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("chain-exists", nil, classic())
				p.Spec.InitContainers = []corev1.Container{{Name: "net-setup", Image: testImage, ImagePullPolicy: corev1.PullNever, SecurityContext: netAdmin,
					Command: []string{"/bin/sh", "-c", "for v in nft legacy; do iptables-$v -t nat -N ISTIO_INBOUND && iptables-$v -t nat -A PREROUTING -p tcp -j ISTIO_INBOUND; done"}}}
				return failedAgain(ctx, f, inj, p, "istio-init")
			}},
		{code: "KM-INIT-004", ns: cni, name: "no-cni", how: "a pod the cni revision injects (istio-validation): Istio's CNI plugin is not in the node's chain, nothing redirects",
			plant: func(ctx context.Context, f *catFault) error {
				return failedAgain(ctx, f, cni, appPod("no-cni", nil, catLean()), "istio-validation")
			}},
		{code: "KM-INIT-005", ns: inj, name: "stuck-init", how: "a user init container waiting forever (sleep 3600): over 60s in init",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("stuck-init", nil, catLean())
				p.Spec.InitContainers = []corev1.Container{{Name: "wait-for-db", Image: testImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}}
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod = p.Name
				f.state = "initialising for over 65s, wait-for-db running"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "wait-for-db")
					return p.Status.Phase == corev1.PodPending && s != nil && s.State.Running != nil && time.Since(p.CreationTimestamp.Time) > 65*time.Second
				})
				return err
			}},
		// ---- the platform's own states, on meshed pods ----
		{code: "KM-INJ-013", ns: inj, name: "no-sa", workload: true, how: "a Deployment whose serviceAccountName does not exist: its ReplicaSet cannot create a single pod (FailedCreate)",
			plant: func(ctx context.Context, f *catFault) error {
				return refused(ctx, f, inj, catLean(), func(s *corev1.PodSpec) { s.ServiceAccountName = "no-such-account" }, `serviceaccount "no-such-account" not found`)
			}},
		{code: "KM-INJ-016", ns: inj, name: "envoy-volume", workload: true, how: "a Deployment with a ConfigMap volume named istio-envoy: merged with the injector's emptyDir of that name, the pod is invalid (FailedCreate)",
			plant: func(ctx context.Context, f *catFault) error {
				return refused(ctx, f, inj, catLean(), func(s *corev1.PodSpec) {
					s.Volumes = append(s.Volumes, corev1.Volume{Name: "istio-envoy", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}})
					s.Containers[0].VolumeMounts = append(s.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "istio-envoy", MountPath: "/etc/app-envoy"})
				}, "may not specify more than 1 volume type")
			}},
		{code: "KM-INJ-015", ns: plain, name: "label-on-deploy", how: "a Deployment labelled sidecar.istio.io/inject=true on its own metadata.labels, its pod template not, in a namespace with no injection label: its pod runs without a sidecar",
			plant: func(ctx context.Context, f *catFault) error {
				d := appDeployment(plain, "label-on-deploy", 1, catLean())
				d.Labels = map[string]string{"sidecar.istio.io/inject": "true"}
				if _, err := c.Client.AppsV1().Deployments(plain).Create(ctx, d, metav1.CreateOptions{}); err != nil {
					return err
				}
				pod, err := catPodOf(ctx, c, plain, "app=label-on-deploy")
				if err != nil {
					return err
				}
				f.pod = pod
				f.state = "running without a sidecar; the Deployment, not its template, has the inject label"
				_, err = catWaitPod(ctx, c, plain, pod, "running and ready", testcluster.Running)
				return err
			}},
		{code: "KM-INIT-008", ns: inj, name: "init-exits", how: "a user init container that prints why and exits 1 (a migration that cannot reach its database)",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("init-exits", nil, catLean())
				p.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: testImage, ImagePullPolicy: corev1.PullNever,
					Command: []string{"/bin/sh", "-c", "echo 'migrate: dial tcp db:5432: connection refused'; exit 1"}}}
				return failedAgain(ctx, f, inj, p, "migrate")
			}},
		{code: "KM-INIT-009", ns: inj, name: "init-no-image", how: "a user init container whose image is not on the node (pull policy Never): Init:ErrImageNeverPull",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("init-no-image", nil, catLean())
				p.Spec.InitContainers = []corev1.Container{{Name: "fetch-config", Image: "kmesh.local/no-such-image:v1", ImagePullPolicy: corev1.PullNever, Command: []string{"true"}}}
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "fetch-config waiting: ErrImageNeverPull"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "fetch-config")
					return s != nil && s.State.Waiting != nil && s.State.Waiting.Reason == "ErrImageNeverPull"
				})
				return err
			}},
		{code: "KM-INIT-010", ns: inj, name: "no-secret", how: "an injected pod whose volume is a Secret that does not exist: FailedMount, no container (istio-init included) runs",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("no-secret", nil, catLean())
				p.Spec.Volumes = []corev1.Volume{{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "no-such-secret"}}}}
				p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "creds", MountPath: "/creds"}}
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod = p.Name
				msg, err := catWaitEvent(ctx, c, inj, "FailedMount", p.Name, `"no-such-secret" not found`)
				f.state = "FailedMount: " + catShort(msg)
				return err
			}},
		{code: "KM-START-015", ns: inj, name: "job-fails", workload: true, how: "a Job (native sidecar) whose container exits 2, backoffLimit 0: Failed (BackoffLimitExceeded)",
			plant: func(ctx context.Context, f *catFault) error {
				zero := int32(0)
				tmpl := appPod("job-fails", map[string]string{"app": "job-fails"}, catLean())
				tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
				tmpl.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "echo 'migrate: password authentication failed'; exit 2"}
				j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "job-fails"}, Spec: batchv1.JobSpec{BackoffLimit: &zero,
					Template: corev1.PodTemplateSpec{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}}}
				if _, err := c.Client.BatchV1().Jobs(inj).Create(ctx, j, metav1.CreateOptions{}); err != nil {
					return err
				}
				f.state = "Job Failed"
				return catPoll(ctx, "job job-fails failed", func(ctx context.Context) (bool, string) {
					got, err := c.Client.BatchV1().Jobs(inj).Get(ctx, "job-fails", metav1.GetOptions{})
					if err != nil {
						return false, err.Error()
					}
					for _, cond := range got.Status.Conditions {
						if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
							return true, ""
						}
					}
					return false, fmt.Sprintf("%+v", got.Status.Conditions)
				})
			}},
		{code: "KM-START-014", ns: inj, name: "app-never-ready", how: "an injected pod whose app's readiness probe never passes (exec false): Running, not Ready for over 65s",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("app-never-ready", nil, catLean())
				p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 2, ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"false"}}}}
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod, f.state = p.Name, "running, not ready for over 65s"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					for _, cond := range p.Status.Conditions {
						if cond.Type == corev1.PodReady {
							return p.Status.Phase == corev1.PodRunning && cond.Status == corev1.ConditionFalse && time.Since(cond.LastTransitionTime.Time) > 65*time.Second
						}
					}
					return false
				})
				return err
			}},
		{code: "KM-START-013", ns: amb, name: "amb-pending", how: "ambient namespace; ztunnel's stand-in never ready; ambient.istio.io/redirection=pending written through pods/status as istio-cni's agent writes it",
			plant: func(ctx context.Context, f *catFault) error {
				if err := runningReady(ctx, f, amb, appPod("amb-pending", nil, nil)); err != nil {
					return err
				}
				if _, err := catWaitPod(ctx, c, ambAgents, "ztunnel-standin", "running, not ready", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }); err != nil {
					return err
				}
				patch := `{"metadata":{"annotations":{"ambient.istio.io/redirection":"pending"}}}`
				_, err := c.Client.CoreV1().Pods(amb).Patch(ctx, "amb-pending", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
				f.state = "running, redirection pending, ztunnel not ready"
				return err
			}},
		{code: "KM-INIT-007", ns: plain, name: "init-captured", how: "istiod's own injection (classic sidecar, dry run) with a user init container appended after istio-init, as a later webhook appends one; created labelled sidecar.istio.io/inject=false (manually injected)",
			plant: func(ctx context.Context, f *catFault) error {
				tmpl := appPod("init-captured", nil, classic())
				tmpl.Spec.SchedulerName = ""
				injected, err := c.Client.CoreV1().Pods(inj).Create(ctx, tmpl, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				if err != nil {
					return err
				}
				if injected.Annotations["sidecar.istio.io/status"] == "" {
					return fmt.Errorf("the dry run in %s was not injected", inj)
				}
				// The init container calls the node (the kubelet's port) from
				// inside the pod: captured, with no proxy to take it.
				fetch := corev1.Container{Name: "fetch-config", Image: testImage, ImagePullPolicy: corev1.PullNever,
					Env:     []corev1.EnvVar{{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}}},
					Command: []string{"/bin/sh", "-c", `if nc -w 3 "$HOST_IP" 10250 </dev/null; then echo reached; else echo refused; fi > /dev/termination-log`}}
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "init-captured", Annotations: injected.Annotations, Labels: injected.Labels}, Spec: injected.Spec}
				p.Labels["sidecar.istio.io/inject"] = "false"
				p.Spec.InitContainers = append(p.Spec.InitContainers, fetch)
				if err := createPod(ctx, plain, p); err != nil {
					return err
				}
				f.pod = p.Name
				f.state = "fetch-config ran after istio-init, its call refused (captured, no proxy)"
				pod, err := catWaitPod(ctx, c, plain, p.Name, "fetch-config to finish", func(p *corev1.Pod) bool {
					s := catStatus(p, "fetch-config")
					return s != nil && s.State.Terminated != nil
				})
				if err != nil {
					return err
				}
				if msg := catStatus(pod, "fetch-config").State.Terminated.Message; !strings.Contains(msg, "refused") {
					return fmt.Errorf("fetch-config's call to the node was not refused: %q (not captured?)", msg)
				}
				return nil
			}},

		// ---- start ----
		{code: "KM-START-001", ns: inj, name: "slow-proxy", how: "classic sidecar, no hold, the stand-in proxy ready 6s after it starts (STANDIN_READY_DELAY via proxyMetadata)",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, inj, appPod("slow-proxy", nil, classic("proxy.istio.io/config", readyDelay("6s"))))
			}},
		{code: "KM-START-002", ns: plain, name: "hold-timeout", how: "injected by canary (pod label istio.io/rev=canary: classic, holdApplicationUntilProxyStarts), proxy ready after 90s: pilot-agent wait gives up at 60s",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("hold-timeout", map[string]string{"istio.io/rev": "canary"}, catLean("proxy.istio.io/config", readyDelay("90s")))
				if err := createPod(ctx, plain, p); err != nil {
					return err
				}
				f.pod = p.Name
				msg, err := catWaitEvent(ctx, c, plain, "FailedPostStartHook", "hold-timeout", "")
				f.state = "FailedPostStartHook: " + catShort(msg)
				return err
			}},
		{code: "KM-START-003", ns: inj, name: "never-ready", how: "classic sidecar whose stand-in proxy is never ready (STANDIN_READY_DELAY=24h)",
			plant: func(ctx context.Context, f *catFault) error {
				if err := createPod(ctx, inj, appPod("never-ready", nil, classic("proxy.istio.io/config", readyDelay("24h")))); err != nil {
					return err
				}
				f.pod = "never-ready"
				f.state = "istio-proxy running, not ready, for over 35s"
				_, err := catWaitPod(ctx, c, inj, "never-ready", f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "istio-proxy")
					return catRunningFor(s, 35*time.Second) && !s.Ready
				})
				return err
			}},
		{code: "KM-START-004", ns: inj, name: "proxy-crash", how: "classic sidecar whose proxy exits at start on a bad setting (STANDIN_READY_DELAY=bogus): crash loop",
			plant: func(ctx context.Context, f *catFault) error {
				return failedAgain(ctx, f, inj, appPod("proxy-crash", nil, classic("proxy.istio.io/config", readyDelay("bogus"))), "istio-proxy")
			}},
		{code: "KM-START-005", ns: inj, name: "app-crash", how: "the app exits 1 at once: crash loop",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("app-crash", nil, catLean())
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "echo 'cannot read /etc/app/config' >&2; exit 1"}
				return failedAgain(ctx, f, inj, p, "app")
			}},
		{code: "KM-START-007", ns: inj, name: "classic-job", how: "a Job whose template asks for a classic sidecar (nativeSidecar=false): the job's container exits 0, istio-proxy runs on",
			plant: func(ctx context.Context, f *catFault) error {
				tmpl := appPod("classic-job", map[string]string{"app": "classic-job"}, classic())
				tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
				tmpl.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "echo job done"}
				tmpl.Spec.Containers[0].Ports = nil
				backoff := int32(0)
				job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "classic-job"},
					Spec: batchv1.JobSpec{BackoffLimit: &backoff, Template: corev1.PodTemplateSpec{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}}}
				if _, err := c.Client.BatchV1().Jobs(inj).Create(ctx, job, metav1.CreateOptions{}); err != nil {
					return err
				}
				pod, err := catPodOf(ctx, c, inj, "job-name=classic-job")
				if err != nil {
					return err
				}
				f.pod = pod
				f.state = "the job's container exited 0, istio-proxy still running"
				_, err = catWaitPod(ctx, c, inj, pod, f.state, func(p *corev1.Pod) bool {
					app, proxy := catStatus(p, "app"), catStatus(p, "istio-proxy")
					return app != nil && app.State.Terminated != nil && app.State.Terminated.ExitCode == 0 && proxy != nil && proxy.State.Running != nil
				})
				return err
			}},
		{code: "KM-START-008", ns: inj, name: "reserved-port", how: "the app declares containerPort 15021 and serves on it (the native proxy holds it: the app fails to bind)",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("reserved-port", nil, catLean())
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "mkdir -p /www && exec httpd -f -p 15021 -h /www"}
				p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http-status", ContainerPort: 15021}}
				return failedAgain(ctx, f, inj, p, "app")
			}},
		{code: "KM-START-009", ns: inj, name: "probe-kept", how: `sidecar.istio.io/rewriteAppHTTPProbers="false" and a tcpSocket readiness probe on port 9999, where nothing listens: the proxy's 15006 answers it`,
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("probe-kept", nil, catLean("sidecar.istio.io/rewriteAppHTTPProbers", "false"))
				p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9999)}}}
				return runningReady(ctx, f, inj, p)
			}},
		{code: "KM-START-010", ns: inj, name: "prestop", how: "classic sidecar; the app has a preStop hook (sleep 5), grace 15s, no EXIT_ON_ZERO_ACTIVE_CONNECTIONS",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("prestop", nil, classic())
				grace := int64(15)
				p.Spec.TerminationGracePeriodSeconds = &grace
				p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}}
				return runningReady(ctx, f, inj, p)
			}},
		{code: "KM-START-011", ns: inj, name: "dns-default", how: "dnsPolicy: Default on an injected pod",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("dns-default", nil, catLean())
				p.Spec.DNSPolicy = corev1.DNSDefault
				return runningReady(ctx, f, inj, p)
			}},
		{code: "KM-START-012", ns: inj, name: "unscheduled", how: "an injected pod no scheduler takes (schedulerName kmesh-unscheduled): Pending",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("unscheduled", nil, catLean())
				p.Spec.SchedulerName = "kmesh-unscheduled"
				if err := createPod(ctx, inj, p); err != nil {
					return err
				}
				f.pod = p.Name
				f.state = "Pending, not scheduled, injected"
				_, err := catWaitPod(ctx, c, inj, p.Name, f.state, func(p *corev1.Pod) bool {
					return p.Status.Phase == corev1.PodPending && p.Spec.NodeName == "" && p.Annotations["sidecar.istio.io/status"] != ""
				})
				return err
			}},

		// ---- capture ----
		{code: "KM-CAP-001", ns: live, name: "drift", how: "a running injected pod; a RETURN rule for port 5432 inserted into ISTIO_OUTPUT afterwards (ephemeral container)",
			plant: func(ctx context.Context, f *catFault) error {
				if err := runningReady(ctx, f, live, appPod("drift", nil, catLean())); err != nil {
					return err
				}
				plantRule := `for v in nft legacy; do
  if iptables-$v-save -t nat 2>/dev/null | grep -q '^:ISTIO_OUTPUT'; then
    iptables-$v -t nat -I ISTIO_OUTPUT 1 -p tcp --dport 5432 -j RETURN && echo planted-$v && exit 0
  fi
done
exit 1`
				out, err := catEphemeral(ctx, c, live, "drift", "plant-rule", "/bin/sh", "-c", plantRule)
				if err == nil && !strings.Contains(out, "planted-") {
					err = fmt.Errorf("the extra rule was not planted: %q", out)
				}
				f.state = "an extra rule in ISTIO_OUTPUT (" + strings.TrimSpace(out) + ")"
				return err
			}},
		{code: "KM-CAP-002", ns: inj, name: "as-proxy-uid", how: "the app container runs as uid 1337, the proxy's",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("as-proxy-uid", nil, catLean())
				uid := int64(1337)
				p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: &uid}
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "mkdir -p /tmp/www && echo hi > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"}
				return runningReady(ctx, f, inj, p)
			}},
		{code: "KM-CAP-009", ns: inj, name: "as-proxy-gid", how: "a Deployment whose app container runs as gid 1337 (runAsGroup), the proxy's",
			plant: func(ctx context.Context, f *catFault) error {
				d := appDeployment(inj, f.name, 1, catLean())
				gid := int64(1337)
				d.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsGroup: &gid}
				if _, err := c.Client.AppsV1().Deployments(inj).Create(ctx, d, metav1.CreateOptions{}); err != nil {
					return err
				}
				pod, err := catPodOf(ctx, c, inj, "app="+f.name)
				if err != nil {
					return err
				}
				f.pod, f.state = pod, "its pod running and ready"
				_, err = catWaitPod(ctx, c, inj, pod, "running and ready", testcluster.Running)
				return err
			}},
		{code: "KM-CAP-010", ns: inj, name: "own-istio-init", how: "a Deployment whose template has an init container of its own named istio-init (a command of its own), which the injector merges over Istio's",
			plant: func(ctx context.Context, f *catFault) error {
				d := appDeployment(inj, f.name, 1, catLean())
				d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "istio-init", Image: d.Spec.Template.Spec.Containers[0].Image,
					ImagePullPolicy: corev1.PullNever, Command: []string{"/bin/sh", "-c", "echo preparing config"}}}
				if _, err := c.Client.AppsV1().Deployments(inj).Create(ctx, d, metav1.CreateOptions{}); err != nil {
					return err
				}
				pod, err := catPodOf(ctx, c, inj, "app="+f.name)
				if err != nil {
					return err
				}
				f.pod, f.state = pod, "its pod running and ready, with no capture rules"
				_, err = catWaitPod(ctx, c, inj, pod, "running and ready", testcluster.Running)
				return err
			}},
		{code: "KM-CAP-011", ns: inj, name: "agent-only", how: "inject.istio.io/templates=grpc-agent on a plain HTTP app: the agent is injected, no istio-init, no capture",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, inj, appPod("agent-only", nil, catLean("inject.istio.io/templates", "grpc-agent")))
			}},
		{code: "KM-CAP-012", ns: inj, name: "nat-flush", how: "an app init container with NET_ADMIN that flushes the nat table after istio-init wrote the capture rules",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("nat-flush", nil, catLean())
				p.Spec.InitContainers = []corev1.Container{{Name: "net-setup", Image: p.Spec.Containers[0].Image, ImagePullPolicy: corev1.PullNever,
					Command: []string{"/bin/sh", "-c", "iptables -t nat -F"}, SecurityContext: netAdmin}}
				return runningReady(ctx, f, inj, p)
			}},
		{code: "KM-CAP-003", ns: inj, name: "excluded-inbound", how: "traffic.sidecar.istio.io/excludeInboundPorts=8080 on the port the app's container declares (8080), no Service",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, inj, appPod("excluded-inbound", nil, catLean("traffic.sidecar.istio.io/excludeInboundPorts", "8080")))
			}},
		{code: "KM-CAP-008", ns: inj, name: "excluded-cluster", how: "traffic.sidecar.istio.io/excludeOutboundIPRanges=10.0.0.0/8, which holds the test cluster's pod and Service ranges (10.213.77.0/24, 10.213.78.0/24 by default)",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, inj, appPod("excluded-cluster", nil, catLean("traffic.sidecar.istio.io/excludeOutboundIPRanges", "10.0.0.0/8")))
			}},
		{code: "KM-CAP-004", ns: inj, name: "no-interception", how: "sidecar.istio.io/interceptionMode=NONE: injected, no istio-init",
			plant: func(ctx context.Context, f *catFault) error {
				return runningReady(ctx, f, inj, appPod("no-interception", nil, catLean("sidecar.istio.io/interceptionMode", "NONE")))
			}},
		{code: "KM-CAP-005", ns: live, name: "proxy-gone", how: "classic sidecar whose istio-proxy image is replaced (a container istio-proxy in the pod, image mesh-test) by one that exits at once; istio-init (Istio's image) wrote the rules: 15001/15006 serve nothing",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("proxy-gone", nil, classic())
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy", Image: testImage, ImagePullPolicy: corev1.PullNever})
				if err := createPod(ctx, live, p); err != nil {
					return err
				}
				f.pod = p.Name
				f.state = "istio-init completed, istio-proxy exited and was restarted"
				_, err := catWaitPod(ctx, c, live, p.Name, f.state, func(p *corev1.Pod) bool {
					init := catStatus(p, "istio-init")
					return init != nil && init.State.Terminated != nil && init.State.Terminated.ExitCode == 0 && catFailedAgain(catStatus(p, "istio-proxy"))
				})
				return err
			}},
		{code: "KM-CAP-006", ns: amb, name: "amb-unset", how: "ambient namespace, istio-cni's agent stand-in ready, the pod never annotated ambient.istio.io/redirection",
			plant: func(ctx context.Context, f *catFault) error {
				if err := runningReady(ctx, f, amb, appPod("amb-unset", nil, nil)); err != nil {
					return err
				}
				f.state = "running, not set up by istio-cni whose agent is ready"
				_, err := catWaitPod(ctx, c, ambAgents, "istio-cni-node-standin", "ready", testcluster.Running)
				return err
			}},

		// ---- connections ----
		{code: "KM-CONN-001", ns: live, name: "bypass", how: "traffic.sidecar.istio.io/excludeOutboundPorts=9090; the app calls the backend on 8080 and 9090 every second",
			plant: func(ctx context.Context, f *catFault) error {
				select {
				case <-backendDone:
				case <-ctx.Done():
				}
				ip := backendIP
				if ip == "" {
					return errors.New("the backend it calls does not run")
				}
				p := appPod("bypass", nil, catLean("traffic.sidecar.istio.io/excludeOutboundPorts", "9090"))
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", fmt.Sprintf(
					"while true; do wget -q -O- http://%[1]s:8080/ >/dev/null; wget -q -O- http://%[1]s:9090/ >/dev/null; sleep 1; done", ip)}
				if err := createPod(ctx, live, p); err != nil {
					return err
				}
				f.pod = p.Name
				f.state = "running, calling " + ip + ":9090"
				_, err := catWaitPod(ctx, c, live, p.Name, "running", testcluster.Running)
				return err
			}},
		{code: "KM-CAP-007", ns: live, name: "dns-moved", how: "DNS capture on (proxyMetadata ISTIO_META_DNS_CAPTURE); the app, as root, points the pod's resolv.conf at another server after istio-init wrote the rules for the first",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("dns-moved", nil, catLean("proxy.istio.io/config", `{"proxyMetadata": {"ISTIO_META_DNS_CAPTURE": "true"}}`))
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "echo 'nameserver 10.96.0.99' > /etc/resolv.conf && mkdir -p /www && echo hi > /www/index.html && exec httpd -f -p 8080 -h /www"}
				return runningReady(ctx, f, live, p)
			}},
		{code: "KM-CONN-002", ns: live, name: "localhost-only", how: "the app serves on 127.0.0.1:8080 only, containerPort 8080, no Service",
			plant: func(ctx context.Context, f *catFault) error {
				p := appPod("localhost-only", nil, catLean())
				p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "mkdir -p /www && echo hi > /www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /www"}
				return runningReady(ctx, f, live, p)
			}},
		{code: "KM-CONN-003", ns: inj, name: "sniffed", how: "a Service port named db (5432 → 8080), no appProtocol",
			plant: func(ctx context.Context, f *catFault) error {
				if err := createService(ctx, inj, catService("sniffed", "sniffed", catPort("db", 5432, 8080, ""))); err != nil {
					return err
				}
				return runningReady(ctx, f, inj, appPod("sniffed", nil, catLean()))
			}},
		{code: "KM-CONN-006", ns: inj, name: "server-first", how: "a Service port named db (3306 → 3306), no appProtocol: MySQL's port",
			plant: func(ctx context.Context, f *catFault) error {
				if err := createService(ctx, inj, catService("server-first", "server-first", catPort("db", 3306, 3306, ""))); err != nil {
					return err
				}
				return runningReady(ctx, f, inj, appPod("server-first", nil, catLean()))
			}},
		{code: "KM-CONN-004", ns: inj, name: "proto", how: "a Deployment; Services proto-http (8080/TCP, http-web) and proto-udp (8080/UDP, udp-raw) select it",
			plant: func(ctx context.Context, f *catFault) error {
				for _, s := range []*corev1.Service{
					catService("proto-http", "proto", catPort("http-web", 8080, 8080, corev1.ProtocolTCP)),
					catService("proto-udp", "proto", catPort("udp-raw", 8080, 8080, corev1.ProtocolUDP)),
				} {
					if err := createService(ctx, inj, s); err != nil {
						return err
					}
				}
				return deploymentRunning(ctx, c, f, inj)
			}},
		{code: "KM-CONN-005", ns: inj, name: "twoports", how: "a Deployment; Services twoports-a (80 → 8080) and twoports-b (8080 → 8080) select it",
			plant: func(ctx context.Context, f *catFault) error {
				for _, s := range []*corev1.Service{
					catService("twoports-a", "twoports", catPort("http-a", 80, 8080, "")),
					catService("twoports-b", "twoports", catPort("http-b", 8080, 8080, "")),
				} {
					if err := createService(ctx, inj, s); err != nil {
						return err
					}
				}
				return deploymentRunning(ctx, c, f, inj)
			}},
		{code: "KM-CONN-007", ns: inj, name: "unnamed-target", how: "a Service port 8080 whose targetPort is the name web, while the pod's container declares http (8080)",
			plant: func(ctx context.Context, f *catFault) error {
				s := catService("unnamed-target", "unnamed-target", corev1.ServicePort{Name: "http", Port: 8080, TargetPort: intstr.FromString("web")})
				if err := createService(ctx, inj, s); err != nil {
					return err
				}
				return runningReady(ctx, f, inj, appPod("unnamed-target", nil, catLean()))
			}},
		{code: "KM-CONN-008", ns: amb, name: "hbone-blocked", how: "an ambient pod and a NetworkPolicy selecting it (app=hbone-blocked) that admits ingress on TCP 8080 only, not HBONE's 15008",
			plant: func(ctx context.Context, f *catFault) error {
				if err := createPolicy(ctx, amb, catPolicy(f.name, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
					[]networkingv1.NetworkPolicyIngressRule{{Ports: catPolicyPorts(corev1.ProtocolTCP, 8080)}}, nil)); err != nil {
					return err
				}
				return runningReady(ctx, f, amb, appPod(f.name, nil, nil))
			}},
		{code: "KM-START-016", ns: inj, name: "no-istiod", how: "a sidecar pod and a NetworkPolicy selecting it (app=no-istiod) with policyTypes Egress that admits DNS (UDP and TCP 53) only, not istiod's 15012",
			plant: func(ctx context.Context, f *catFault) error {
				if err := createPolicy(ctx, inj, catPolicy(f.name, []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}, nil,
					[]networkingv1.NetworkPolicyEgressRule{{Ports: append(catPolicyPorts(corev1.ProtocolUDP, 53), catPolicyPorts(corev1.ProtocolTCP, 53)...)}})); err != nil {
					return err
				}
				if err := createPod(ctx, inj, appPod(f.name, nil, catLean())); err != nil {
					return err
				}
				// Ready or not (a network plugin that enforces the policy
				// keeps the proxy from istiod): the proxy has started.
				f.pod, f.state = f.name, "istio-proxy started"
				_, err := catWaitPod(ctx, c, inj, f.name, f.state, func(p *corev1.Pod) bool {
					s := catStatus(p, "istio-proxy")
					return s != nil && s.State.Running != nil
				})
				return err
			}},
	}
	// The healthy control: one plain injected pod (Istio's default resources).
	healthy := &catFault{code: "", ns: inj, name: "healthy", how: "a plain injected pod",
		plant: func(ctx context.Context, f *catFault) error {
			return runningReady(ctx, f, inj, appPod("healthy", nil, nil))
		}}
	// The backend the bypassing pod calls, in the namespace without injection.
	backend := &catFault{code: "", ns: plain, name: "backend", how: "the backend (8080, 9090), not injected",
		plant: func(ctx context.Context, f *catFault) error {
			defer close(backendDone)
			p := appPod("backend", nil, nil)
			p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "mkdir -p /w && echo hi > /w/index.html && (httpd -f -p 9090 -h /w &) && exec httpd -f -p 8080 -h /w"}
			if err := runningReady(ctx, f, plain, p); err != nil {
				return err
			}
			got, err := c.Client.CoreV1().Pods(plain).Get(ctx, "backend", metav1.GetOptions{})
			if err != nil {
				return err
			}
			backendIP = got.Status.PodIP
			return nil
		}}

	// The catalogue covers the contract: every code planted once, or named
	// with the reason it is not.
	byCode := map[string]*catFault{}
	if mapNS != "" {
		faults = append(faults, &catFault{code: "KM-INJ-017", ns: mapNS, name: "opted-out", how: "a MutatingAdmissionPolicy bound to this namespace labels the pods of Deployment opted-out sidecar.istio.io/inject=false: they run without the sidecar their template and namespace ask for",
			plant: func(ctx context.Context, f *catFault) error {
				return catOptedOut(ctx, t, c, f, mapNS)
			}})
	}
	for _, f := range faults {
		if byCode[f.code] != nil {
			t.Fatalf("code %s planted twice", f.code)
		}
		byCode[f.code] = f
	}
	inContract := map[string]catContractCode{}
	for _, cc := range contract {
		inContract[cc.code] = cc
		_, skipped := notPlanted[cc.code]
		check(t, byCode[cc.code] != nil || skipped, "code %s (%s) of the catalogue (diagnose --list-checks) is neither planted nor named as not plantable", cc.code, cc.what)
	}
	for _, f := range faults {
		check(t, inContract[f.code].code != "", "planted code %s is not in the catalogue (diagnose --list-checks)", f.code)
	}

	// Plant everything at once, then wait for each fault's state.
	plantCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	all := append(append([]*catFault{}, faults...), healthy, backend)
	for _, f := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			f.err = f.plant(plantCtx, f)
			f.took = time.Since(t0)
			if f.pod == "" && !f.workload {
				f.pod = f.name
			}
		}()
	}
	wg.Wait()
	for _, f := range all {
		if f.err != nil {
			t.Errorf("%s %s/%s: not planted (%s): %v", f.code, f.ns, f.name, f.how, f.err)
			continue
		}
		if f.code != "" {
			planted++
		}
		t.Logf("planted %-12s %s in %s: %s", f.code, f.key(), f.took.Round(time.Second), f.state)
	}
	t.Logf("%s: every fault planted and in its state", time.Since(start).Round(time.Second))

	// diagnose, one namespace at a time, all at once; the live faults'
	// namespace with --rules --connections, read again until the bypassing
	// flows are seen (the app calls every second).
	docs := map[string]catDoc{}
	var mu sync.Mutex
	for _, ns := range faultNamespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d catDoc
			var err error
			switch {
			case ns != live:
				d, _, err = catDiagnose(bin, c.Kubeconfig, ns)
			case byCode["KM-CONN-001"].err != nil:
				d, _, err = catDiagnose(bin, c.Kubeconfig, ns, "--rules", "--connections")
			default:
				liveCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
				defer cancel()
				err = catPoll(liveCtx, "the bypassing flows of pod bypass", func(context.Context) (bool, string) {
					got, r, derr := catDiagnose(bin, c.Kubeconfig, ns, "--rules", "--connections")
					if derr != nil {
						return false, derr.Error()
					}
					d = got
					for _, it := range d.all() {
						if it.Name == "bypass" {
							return it.has("KM-CONN-001") || it.check("connections").Status == "fail", it.says()
						}
					}
					return false, "no item bypass: " + r.stderr
				})
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("%v", err)
			}
			docs[ns] = d
		}()
	}
	wg.Wait()
	t.Logf("%s: every namespace diagnosed", time.Since(start).Round(time.Second))

	// itemFor finds the diagnosis item of a pod, or of a workload (its
	// Deployment's or ReplicaSet's).
	itemFor := func(ns, name string, workload bool) (catItem, bool) {
		for _, it := range docs[ns].all() {
			if it.Namespace != ns {
				continue
			}
			if !workload && it.WorkloadKind == "Pod" && it.Name == name {
				return it, true
			}
			if workload && (it.WorkloadKind == "Deployment" || it.WorkloadKind == "ReplicaSet" || it.WorkloadKind == "Job") && (it.Name == name || strings.HasPrefix(it.Name, name+"-")) {
				return it, true
			}
		}
		return catItem{}, false
	}
	faultOf := map[string]*catFault{} // ns/pod (ns/workload:name) → its fault
	for _, f := range faults {
		if f.err == nil {
			faultOf[f.key()] = f
		}
	}

	var notFound []string
	for _, f := range faults {
		t.Run(f.code, func(t *testing.T) {
			if f.err != nil {
				t.Skipf("not planted: %v", f.err)
			}
			target := f.target()
			it, ok := itemFor(f.ns, target, f.workload)
			if !check(t, ok, "no diagnosis item for %s/%s (workload %v); items: %s", f.ns, target, f.workload, catNames(docs[f.ns])) {
				notFound = append(notFound, f.code+" (no item)")
				return
			}
			t.Logf("%s on %s/%s (%s; %s): diagnose says %s", f.code, f.ns, target, f.how, f.state, it.says())
			if check(t, it.has(f.code), "%s: %s/%s has no finding %s (%s); diagnose says: %s", f.code, f.ns, target, f.code, inContract[f.code].what, it.says()) {
				found++
			} else {
				notFound = append(notFound, fmt.Sprintf("%s (%s: %s)", f.code, target, it.codes()))
			}
		})
	}
	t.Run("healthy control", func(t *testing.T) {
		if healthy.err != nil {
			t.Skipf("not planted: %v", healthy.err)
		}
		it, ok := itemFor(inj, "healthy", false)
		if !check(t, ok, "no diagnosis item for the healthy pod") {
			return
		}
		for _, fd := range it.Findings {
			check(t, fd.Status != "fail" && fd.Status != "warning", "healthy pod: finding %s %s: %s", fd.Code, fd.Status, fd.Evidence)
		}
		check(t, it.Status == "pass", "healthy pod: %s", it.says())
	})
	if len(notFound) > 0 {
		t.Logf("codes not found on their planted pod: %s", strings.Join(notFound, "; "))
	}

	// istioctl analyze on every namespace: each message about a pod (or a
	// Deployment or Service, mapped to the pods they select) must meet a
	// finding of diagnose on that pod.
	t.Run("istioctl analyze", func(t *testing.T) {
		analyses := map[string][]catMessage{}
		for _, ns := range faultNamespaces {
			wg.Add(1)
			go func() {
				defer wg.Done()
				msgs, err := catAnalyze(c, ns)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("%v", err)
				}
				analyses[ns] = msgs
			}()
		}
		wg.Wait()
		onPod := map[string][]catMessage{} // ns/pod (or ns/workload:name) → istioctl's messages about it
		onNS := map[string][]catMessage{}  // ns → istioctl's messages about the namespace itself
		cluster := map[string]bool{}       // istioctl's messages about cluster-scoped objects (every run repeats them)
		for _, ns := range faultNamespaces {
			for _, m := range analyses[ns] {
				kind, name, inNS := catOrigin(m.Origin, ns)
				switch {
				case kind == "Namespace" && name == ns:
					onNS[ns] = append(onNS[ns], m)
					t.Logf("istioctl on namespace %s: %s", ns, catMessages([]catMessage{m}))
					// A message about the namespace that names its pods (IST0158
					// lists the pods whose proxy image is not the injector's) is
					// about those pods.
					if names := catPodNames.FindStringSubmatch(m.Message); names != nil {
						for _, p := range strings.Fields(names[1]) {
							onPod[ns+"/"+p] = append(onPod[ns+"/"+p], m)
						}
					}
					continue
				case !inNS:
					key := fmt.Sprintf("%s %s on %s: %s", m.Code, m.Level, m.Origin, catShort(m.Message))
					if !cluster[key] {
						cluster[key] = true
						t.Logf("istioctl, not about a pod: %s", key)
					}
					continue
				}
				var targets []string
				switch kind {
				case "Pod":
					targets = []string{name}
				case "Deployment":
					d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
					if err == nil && d.Spec.Selector != nil {
						targets = catSelected(ctx, t, c, ns, d.Spec.Selector.MatchLabels)
					}
					if len(targets) == 0 {
						targets = []string{"workload:" + name}
					}
				case "Service":
					s, err := c.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
					if err == nil {
						targets = catSelected(ctx, t, c, ns, s.Spec.Selector)
					}
				default:
					t.Logf("istioctl %s %s on %s (%s): not about a pod", m.Code, m.Level, m.Origin, catShort(m.Message))
					continue
				}
				for _, p := range targets {
					onPod[ns+"/"+p] = append(onPod[ns+"/"+p], m)
				}
			}
		}
		var keys []string
		for k := range onPod {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ns, p, _ := strings.Cut(k, "/")
			workload := strings.HasPrefix(p, "workload:")
			p = strings.TrimPrefix(p, "workload:")
			planted := "not planted"
			if f := faultOf[k]; f != nil {
				planted = "planted " + f.code
			}
			t.Logf("istioctl on %s/%s (%s): %s", ns, p, planted, catMessages(onPod[k]))
			for _, m := range onPod[k] {
				istioMsgs++
				it, ok := itemFor(ns, p, workload)
				if check(t, ok && len(it.Findings) > 0, "istioctl %s (%s) on %s/%s: diagnose has no finding there (item found %v): %s", m.Code, catShort(m.Message), ns, p, ok, it.says()) {
					matched++
				}
			}
		}
		// What diagnose finds that istioctl has no message for, pod by pod;
		// and whether istioctl reports the code the contract pairs with each
		// planted fault.
		for _, ns := range faultNamespaces {
			for _, it := range docs[ns].all() {
				key := ns + "/" + it.Name
				workload := it.WorkloadKind != "Pod"
				if workload {
					for _, f := range faults {
						if f.workload && f.ns == ns && (it.Name == f.name || strings.HasPrefix(it.Name, f.name+"-")) {
							key = ns + "/workload:" + f.name
						}
					}
				}
				reported := map[string]bool{}
				for _, m := range append(onPod[key], onNS[ns]...) {
					reported[m.Code] = true
				}
				var only []string
				for _, fd := range it.Findings {
					if !catAnyOf(inContract[fd.Code].istioctl, reported) {
						only = append(only, fd.Code+"("+fd.Status+")")
					}
				}
				if len(only) > 0 {
					t.Logf("diagnose only, on %s %s/%s: %s", it.WorkloadKind, ns, it.Name, strings.Join(only, " "))
				}
			}
		}
		for _, f := range faults {
			want := inContract[f.code].istioctl
			if len(want) == 0 || f.err != nil {
				continue
			}
			key := f.key()
			reported := map[string]bool{}
			for _, m := range append(onPod[key], onNS[f.ns]...) {
				reported[m.Code] = true
			}
			t.Logf("contract pairs %s with istioctl %s: reported on %s (or its namespace): %v", f.code, strings.Join(want, "/"), key, catAnyOf(want, reported))
		}
	})
}

// deploymentRunning creates a one-replica Deployment named f.name in ns and
// waits until its pod runs and is ready.
func deploymentRunning(ctx context.Context, c *testcluster.Cluster, f *catFault, ns string) error {
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, appDeployment(ns, f.name, 1, catLean()), metav1.CreateOptions{}); err != nil {
		return err
	}
	pod, err := catPodOf(ctx, c, ns, "app="+f.name)
	if err != nil {
		return err
	}
	f.pod = pod
	f.state = "its pod running and ready"
	_, err = catWaitPod(ctx, c, ns, pod, "running and ready", testcluster.Running)
	return err
}

// catSelected names the pods of ns a selector picks (none for an empty one).
func catSelected(ctx context.Context, t *testing.T, c *testcluster.Cluster, ns string, sel map[string]string) []string {
	if len(sel) == 0 {
		return nil
	}
	l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(sel).String()})
	if err != nil {
		t.Errorf("pods of %s selected by %v: %v", ns, sel, err)
		return nil
	}
	var out []string
	for _, p := range l.Items {
		out = append(out, p.Name)
	}
	return out
}

func catAnyOf(codes []string, set map[string]bool) bool {
	for _, c := range codes {
		if set[c] {
			return true
		}
	}
	return false
}

func catMessages(ms []catMessage) string {
	var out []string
	for _, m := range ms {
		out = append(out, fmt.Sprintf("%s %s %q", m.Code, m.Level, catShort(m.Message)))
	}
	return strings.Join(out, "; ")
}

func catNames(d catDoc) string {
	var out []string
	for _, it := range d.all() {
		out = append(out, it.WorkloadKind+"/"+it.Name)
	}
	return strings.Join(out, ", ")
}
