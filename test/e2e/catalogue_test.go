package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
	Fix      string `json:"fix"`
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
	"KM-INJ-018":  "planted by TestManifestAdmissionUnverified: it is about a manifest (-f), which a namespace sweep does not read",
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
	k := &catTally{}
	defer func() {
		testreport.Count(t, "check catalogue: %d of %d codes planted, %d found by diagnose; %d istioctl messages about their pods, %d met by a diagnose finding; %d checks (%s)",
			k.planted, len(contract), k.found, k.istioMsgs, k.matched, k.checks, time.Since(start).Round(time.Second))
	}()
	b := newCatBed(t, c)
	faults, only := catOnly(t, b.faults())
	healthy, backend := b.controls()
	if only {
		// -run TestCheckCatalogue/CODE: only the faults it names are
		// planted, and the catalogue is not checked whole.
		contract = slices.DeleteFunc(contract, func(cc catContractCode) bool {
			return !slices.ContainsFunc(faults, func(f *catFault) bool { return f.code == cc.code })
		})
	}
	byCode, inContract := k.contract(t, contract, faults, b.notPlanted)
	k.plantAll(t, append(append([]*catFault{}, faults...), healthy, backend))
	t.Logf("%s: every fault planted and in its state", time.Since(start).Round(time.Second))
	docs := catDiagnoseAll(t, b, bin, byCode)
	t.Logf("%s: every namespace diagnosed", time.Since(start).Round(time.Second))
	k.findFaults(t, b, docs, faults, healthy, inContract)
	// istioctl analyze on every namespace: each message about a pod (or a
	// Deployment or Service, mapped to the pods they select) must meet a
	// finding of diagnose on that pod.
	t.Run("istioctl analyze", func(t *testing.T) { k.istioctl(t, b, docs, faults, inContract) })
}

// catOnly keeps the faults that go test's -run names after
// TestCheckCatalogue/ (make e2e RUN=TestCheckCatalogue/KM-CONN-006), and
// says whether -run named some; all of them when it names none.
func catOnly(t *testing.T, faults []*catFault) ([]*catFault, bool) {
	run := flag.Lookup("test.run")
	if run == nil {
		return faults, false
	}
	parts := strings.Split(run.Value.String(), "/")
	if len(parts) < 2 || parts[1] == "" {
		return faults, false
	}
	re, err := regexp.Compile(parts[1])
	if err != nil {
		t.Fatalf("-run %s: %v", run.Value.String(), err)
	}
	var out []*catFault
	for _, f := range faults {
		if re.MatchString(f.code) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		t.Fatalf("-run %s names no fault of the catalogue", run.Value.String())
	}
	return out, true
}

// catTally counts what TestCheckCatalogue checked and found.
type catTally struct {
	checks, matched, istioMsgs, found, planted int
}

// check counts a check, and fails the test when it does not hold.
func (k *catTally) check(t *testing.T, ok bool, format string, args ...any) bool {
	t.Helper()
	k.checks++
	if !ok {
		t.Errorf(format, args...)
	}
	return ok
}

// contract: the catalogue covers the contract, every code planted once,
// or named with the reason it is not.
func (k *catTally) contract(t *testing.T, contract []catContractCode, faults []*catFault, notPlanted map[string]string) (map[string]*catFault, map[string]catContractCode) {
	byCode := map[string]*catFault{}
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
		k.check(t, byCode[cc.code] != nil || skipped, "code %s (%s) of the catalogue (diagnose --list-checks) is neither planted nor named as not plantable", cc.code, cc.what)
	}
	for _, f := range faults {
		k.check(t, inContract[f.code].code != "", "planted code %s is not in the catalogue (diagnose --list-checks)", f.code)
	}
	return byCode, inContract
}

// plantAll plants everything at once, then waits for each fault's state.
func (k *catTally) plantAll(t *testing.T, all []*catFault) {
	plantCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
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
			k.planted++
		}
		t.Logf("planted %-12s %s in %s: %s", f.code, f.key(), f.took.Round(time.Second), f.state)
	}
}

// catDocs are diagnose's answers by namespace.
type catDocs map[string]catDoc

// catDiagnoseAll runs diagnose, one namespace at a time, all at once; the
// live faults' namespace with --rules --connections, read again until the
// bypassing flows are seen (the app calls every second).
func catDiagnoseAll(t *testing.T, b *catBed, bin string, byCode map[string]*catFault) catDocs {
	c := b.c
	docs := catDocs{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, ns := range b.namespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d catDoc
			var err error
			switch {
			case ns != b.live:
				d, _, err = catDiagnose(bin, c.Kubeconfig, ns)
			case byCode["KM-CONN-001"] == nil || byCode["KM-CONN-001"].err != nil:
				d, _, err = catDiagnose(bin, c.Kubeconfig, ns, "--rules", "--connections")
			default:
				liveCtx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
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
	return docs
}

// itemFor finds the diagnosis item of a pod, or of a workload (its
// Deployment's or ReplicaSet's).
func (docs catDocs) itemFor(ns, name string, workload bool) (catItem, bool) {
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

// findFaults: each planted fault's code is found on its pod (or
// workload), and the healthy control has no finding that fails or warns.
func (k *catTally) findFaults(t *testing.T, b *catBed, docs catDocs, faults []*catFault, healthy *catFault, inContract map[string]catContractCode) {
	var notFound []string
	for _, f := range faults {
		t.Run(f.code, func(t *testing.T) {
			if f.err != nil {
				t.Skipf("not planted: %v", f.err)
			}
			target := f.target()
			it, ok := docs.itemFor(f.ns, target, f.workload)
			if !k.check(t, ok, "no diagnosis item for %s/%s (workload %v); items: %s", f.ns, target, f.workload, catNames(docs[f.ns])) {
				notFound = append(notFound, f.code+" (no item)")
				return
			}
			t.Logf("%s on %s/%s (%s; %s): diagnose says %s", f.code, f.ns, target, f.how, f.state, it.says())
			if k.check(t, it.has(f.code), "%s: %s/%s has no finding %s (%s); diagnose says: %s", f.code, f.ns, target, f.code, inContract[f.code].what, it.says()) {
				k.found++
			} else {
				notFound = append(notFound, fmt.Sprintf("%s (%s: %s)", f.code, target, it.codes()))
			}
		})
	}
	t.Run("healthy control", func(t *testing.T) {
		if healthy.err != nil {
			t.Skipf("not planted: %v", healthy.err)
		}
		it, ok := docs.itemFor(b.inj, "healthy", false)
		if !k.check(t, ok, "no diagnosis item for the healthy pod") {
			return
		}
		for _, fd := range it.Findings {
			k.check(t, fd.Status != "fail" && fd.Status != "warning", "healthy pod: finding %s %s: %s", fd.Code, fd.Status, fd.Evidence)
		}
		k.check(t, it.Status == "pass", "healthy pod: %s", it.says())
	})
	if len(notFound) > 0 {
		t.Logf("codes not found on their planted pod: %s", strings.Join(notFound, "; "))
	}
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
