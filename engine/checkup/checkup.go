// Package checkup is the diagnose engine: it composes the injection,
// startup and rules engines into each pod's checklist (explain/diagnose),
// for named targets (Targets) or every pod of a namespace or the cluster
// (Sweep).
package checkup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/engine"
	"github.com/kubectl-mesh/kubectl-mesh/engine/inject"
	"github.com/kubectl-mesh/kubectl-mesh/engine/podstart"
	"github.com/kubectl-mesh/kubectl-mesh/engine/rules"
	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/internal/strs"
	"github.com/kubectl-mesh/kubectl-mesh/nsexec"
)

// Engine diagnoses pods with the engines it is given.
type Engine struct {
	Inject *inject.Engine
	Starts *podstart.Engine
	Client *inspect.Client
	// Verify proves the injection answers with dry runs; Rules reads the
	// pods' live rules, Connections their flows too.
	Verify, Rules, Connections bool
	// How the rules are read: Via (ViaSet: asked for), the image, the node
	// pods' namespace and the timeout of a dump.
	Via, Image, NodeNamespace string
	ViaSet                    bool
	Timeout                   time.Duration
	// Progress, when set, is told how many nodes and pods the rules are
	// read of; it returns what to tell as each node is done, and what to
	// do once all are.
	Progress func(nodes, pods int) (done func(pods int), finish func())
	// Announce, when set, is told what the rules' reading is about to
	// create (an ephemeral container, node pods), before it does.
	Announce func(string)
	// DryRun, when set, is given what reading the rules would create (the
	// ephemeral container, each node pod), in the order a real run creates
	// them, instead of creating it: the rules are then not read, and the
	// diagnoses say nothing of them (the caller prints none).
	DryRun func(obj any) error

	// workloads are the workloads read in this run (a named target's, its
	// pods' owner), each read once.
	workloads inspect.WorkloadCache
}

// workload reads a workload once per run.
func (e *Engine) workload(ctx context.Context, namespace, kind, name string) (inspect.Workload, bool, error) {
	return e.workloads.Reader(e.Client)(ctx, namespace, kind, name)
}

// dash is s, or "-" when it is empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// item is one diagnosis with what it was made from, kept until every fact
// it needs is read.
type item struct {
	facts diagnose.Facts
	pod   *corev1.Pod
}

// Targets diagnoses what the injection engine's Filenames or Args name;
// list says whether the answer is a list (anything but one pod).
func (e *Engine) Targets(ctx context.Context) (ds []*diagnose.Diagnosis, list bool, incomplete []string, err error) {
	facts, err := e.Inject.MeshFacts(ctx)
	if err != nil {
		return nil, false, nil, err
	}
	var reports []*injection.InjectionReport
	if len(e.Inject.Filenames) > 0 {
		reports, err = e.Inject.FromFiles(ctx, facts)
	} else {
		reports, err = e.Inject.FromArgs(ctx, facts)
	}
	if err != nil {
		return nil, false, nil, err
	}
	incomplete = inject.FactsIncomplete(facts)

	// The pods of the reports: their startup, and with --rules their rules.
	var podReports []*injection.InjectionReport
	for _, r := range reports {
		if r.Kind == "Pod" && len(e.Inject.Filenames) == 0 {
			podReports = append(podReports, r)
		}
	}
	pods, err := e.podsOf(ctx, podReports)
	if err != nil {
		return nil, false, nil, err
	}
	single := len(e.Inject.Filenames) == 0 && len(reports) == 1 && reports[0].Kind == "Pod"
	var items []*item
	if len(podReports) > 0 {
		name := ""
		if single {
			name = podReports[0].Name
		}
		events, evIncomplete, err := e.Starts.Events(ctx, podReports[0].Namespace, name)
		if err != nil {
			return nil, false, nil, err
		}
		incomplete = append(incomplete, evIncomplete...)
		svcs := readServices(ctx, e.Client, podReports[0].Namespace)
		svcs.ranges = e.clusterRanges(ctx)
		svcs.policies = readPolicies(ctx, e.Client, podReports[0].Namespace)
		svcs.quotas = e.quotas(ctx)
		ns := podReports[0].Namespace
		svcs.list = func() ([]corev1.Pod, error) { return e.namespacePods(ctx, ns) }
		for i, r := range podReports {
			it := &item{pod: pods[i], facts: diagnose.Facts{Injection: r}}
			if pods[i] == nil {
				it.facts.NoPod = "the pod was deleted meanwhile"
			} else {
				svcs.of(&it.facts, pods[i])
				// Named pods: the logs of their failing containers are read,
				// so that the finding names the cause.
				it.facts.Startup = e.Starts.Analyze(ctx, pods[i], events, evIncomplete, true)
				svcs.quotas.of(&it.facts, pods[i])
				svcs.peersOf(&it.facts)
			}
			items = append(items, it)
		}
		more, err := e.readOwners(ctx, items)
		if err != nil {
			return nil, false, nil, err
		}
		incomplete = append(incomplete, more...)
	}
	for _, r := range reports {
		switch {
		case len(e.Inject.Filenames) > 0:
			noPod := "a manifest, not created yet: --verify checks the pod admission makes of it; else its pods are checked once they run"
			if e.Verify {
				noPod = "a manifest, not created yet: its pods are checked once they run"
			}
			items = append(items, &item{facts: diagnose.Facts{Injection: r, Files: e.Inject.Filenames, NoPod: noPod}})
		case r.Kind != "Pod" && r.CreationBlocked:
			// Its new pods are refused (its old ones, if any, are above).
			items = append(items, &item{facts: diagnose.Facts{Injection: r, NoPod: "admission refuses the pods of its template: none was created from it"}})
		case r.Kind != "Pod":
			// A workload that lacks pods: its controller's account.
			failures := newPodFailures()
			for _, pit := range items {
				if pit.pod != nil {
					failures.add(pit.pod, &pit.facts)
				}
			}
			it, why, more, err := e.workloadItem(ctx, facts, r, pods, failures)
			if err != nil {
				return nil, false, nil, err
			}
			incomplete = append(incomplete, more...)
			switch {
			case it != nil:
				items = append(items, it)
			case len(podReports) == 0 && why != "":
				items = append(items, &item{facts: diagnose.Facts{Injection: r, NoPod: "it has no pods: " + why}})
			case len(podReports) == 0:
				items = append(items, &item{facts: diagnose.Facts{Injection: r, NoPod: "it has no pods"}})
			}
		}
	}
	// --via ephemeral reads one pod: refused for several before any dry
	// run, ephemeral container or node pod.
	if running := runningPods(items); e.Rules && e.ViaSet && e.Via == nsexec.ViaEphemeral && running > 1 {
		return nil, false, nil, &engine.InputError{Err: fmt.Errorf("--via ephemeral reads one pod; %d running pods are selected: without --via, one node pod per node reads them all", running)}
	}
	if e.Verify {
		if err := e.Inject.VerifyReports(ctx, reports); err != nil {
			return nil, false, nil, err
		}
	}
	if e.Rules {
		if err := e.readRules(ctx, items, single); err != nil {
			return nil, false, nil, err
		}
	}
	ds = make([]*diagnose.Diagnosis, 0, len(items))
	for _, it := range items {
		d := diagnose.Diagnose(it.facts)
		if len(e.Inject.Filenames) > 0 {
			// A manifest is not in the cluster: why-injected reads the file.
			d.Checks[0].Detail = "kubectl mesh why-injected -f " + strings.Join(e.Inject.Filenames, " -f ")
		}
		ds = append(ds, d)
	}
	if !single && len(e.Inject.Filenames) == 0 {
		// A workload's pods fixed one delete each: one fix for them all.
		diagnose.MergePodDeletes(ds)
	}
	return ds, !single, strs.Dedupe(incomplete), nil
}

// rulesSkipped says why --rules reads no rules of an item's pod, "" when
// it reads them.
func rulesSkipped(it *item) string {
	p := it.pod
	switch {
	case p.Spec.HostNetwork:
		return "the pod uses the node's network (hostNetwork): it has no rules of its own"
	case rules.MeshOf(p) == "none" && (it.facts.Injection == nil || !it.facts.Injection.Ambient):
		return "not in the mesh (no sidecar, not in ambient mode): no capture rules are called for"
	case p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "":
		return fmt.Sprintf("the pod is %s, not Running: its rules are read once it runs", dash(string(p.Status.Phase)))
	}
	return ""
}

// runningPods counts the items' pods whose rules --rules reads.
func runningPods(items []*item) int {
	n := 0
	for _, it := range items {
		if it.pod != nil && rulesSkipped(it) == "" {
			n++
		}
	}
	return n
}

// podsOf reads the pods the reports are about, in their order: one GET for
// one pod, else one list of their namespace.
func (e *Engine) podsOf(ctx context.Context, reports []*injection.InjectionReport) ([]*corev1.Pod, error) {
	if len(reports) == 0 {
		return nil, nil
	}
	ns := reports[0].Namespace
	if live := e.Inject.LivePods(reports); live != nil {
		return live, nil // read with the reports
	}
	if len(reports) == 1 {
		p, err := e.Client.Kube.CoreV1().Pods(ns).Get(ctx, reports[0].Name, metav1.GetOptions{})
		if err != nil {
			return nil, inspect.ExplainAPIError(err, "get pods")
		}
		return []*corev1.Pod{p}, nil
	}
	byName := map[string]*corev1.Pod{}
	err := e.Client.EachPodPage(ctx, ns, "", func(page []corev1.Pod) error {
		for i := range page {
			byName[page[i].Name] = &page[i]
		}
		return nil
	})
	if err != nil {
		return nil, inspect.ExplainAPIError(err, "list pods")
	}
	out := make([]*corev1.Pod, 0, len(reports))
	for _, r := range reports {
		out = append(out, byName[r.Name]) // nil: deleted meanwhile
	}
	return out, nil
}

// namespacePods lists the pods of a namespace.
func (e *Engine) namespacePods(ctx context.Context, ns string) ([]corev1.Pod, error) {
	var out []corev1.Pod
	err := e.Client.EachPodPage(ctx, ns, "", func(page []corev1.Pod) error {
		out = append(out, page...)
		return nil
	})
	if err != nil {
		return nil, inspect.ExplainAPIError(err, "list pods")
	}
	return out, nil
}

// Sweep diagnoses every pod of the namespace (-n, -l) or the cluster (-A)
// and gives each diagnosis to keep, in no order: one list of the pods
// shared by both subjects, the FailedCreate events (injection) and the
// pods' events (startup) read meanwhile. It returns what could not be read.
func (e *Engine) Sweep(ctx context.Context, keep func(*diagnose.Diagnosis) error) (incomplete []string, err error) {
	pre := e.Inject.StartSweep(ctx)
	defer pre.Close()
	ns := e.Inject.SweepNamespace()
	pending := e.Starts.EventsAsync(ctx, ns)
	defer pending.Stop()

	facts, err := e.Inject.MeshFacts(ctx)
	if err != nil {
		return nil, err
	}
	svcs := readServices(ctx, e.Client, ns)
	svcs.ranges = e.clusterRanges(ctx)
	svcs.policies = readPolicies(ctx, e.Client, ns)
	svcs.quotas = e.quotas(ctx)
	// The workloads are listed meanwhile: those that lack pods get rows of
	// their own (with -l, the pods counted would be only the selected ones).
	var workloads *pendingWorkloads
	if e.Inject.Selector == "" {
		workloads = e.startWorkloads(ctx, ns)
	}
	counts, failures := podCounts{}, newPodFailures()
	var refused, proved []*injection.InjectionReport
	// Verify and --rules diagnose once every report and rule is read;
	// otherwise each pod's diagnosis is made as it comes, and only it is kept.
	keepFacts := e.Verify || e.Rules
	var items []*item
	// Pods whose workload's own labels their diagnosis reads wait for the
	// workloads' list (with -l there is none: they are not held).
	var held []*item
	err = e.Inject.Sweep(ctx, facts, pre, func(r *injection.InjectionReport, p *corev1.Pod) error {
		it := item{facts: diagnose.Facts{Injection: r}}
		if p == nil && !r.CreationBlocked {
			// Refused by something else (its dry runs say whether for
			// what the injector adds): its workload's row says it, read
			// with the workload's state as a named one is, and the
			// proof made for it goes there.
			proved = append(proved, r)
			return nil
		}
		if p == nil {
			it.facts.NoPod = "admission refuses its pods: none was created"
			refused = append(refused, r)
		} else {
			counts.add(p)
			events, evIncomplete, err := pending.Wait()
			if err != nil {
				return err
			}
			it.facts.Startup = e.Starts.Analyze(ctx, p, events, evIncomplete, false)
			svcs.of(&it.facts, p)
			svcs.seen(p, it.facts.Services)
			svcs.quotas.of(&it.facts, p)
			failures.add(p, &it.facts)
		}
		// A pod outside the mesh that a Service selects waits for the
		// sweep's other pods: whether that Service's are in the mesh.
		hold := workloads != nil && ownerWanted(r, p) || diagnose.MixedCandidate(p, len(it.facts.Services))
		if keepFacts || hold {
			if p != nil {
				pod := *p
				it.facts.Pod = &pod
				if e.Rules {
					it.pod = &pod
				}
			}
			if keepFacts {
				items = append(items, &it)
			} else {
				held = append(held, &it)
			}
			return nil
		}
		return keep(diagnose.Diagnose(it.facts))
	})
	if err != nil {
		return nil, err
	}
	_, evIncomplete, err := pending.Wait()
	if err != nil {
		return nil, err
	}
	if workloads != nil {
		<-workloads.done
		if workloads.err != nil {
			return nil, workloads.err
		}
		evIncomplete = append(evIncomplete, workloads.unread...)
		index := ownerIndex(workloads.list)
		for _, it := range append(append([]*item(nil), items...), held...) {
			if it.facts.Pod != nil {
				setOwner(it, it.facts.Pod, index)
			}
		}
		unread := ""
		if why, ok := facts.Unknown[injection.FactEvents]; ok {
			unread = why
		}
		short, err := e.shortItems(ctx, facts, workloads.list, counts, failures, refused, proved, pre.Warnings(), unread)
		if err != nil {
			return nil, err
		}
		for _, it := range short {
			if keepFacts {
				items = append(items, it)
			} else if err := keep(diagnose.Diagnose(it.facts)); err != nil {
				return nil, err
			}
		}
	}
	for _, it := range held {
		svcs.peersOf(&it.facts)
		if err := keep(diagnose.Diagnose(it.facts)); err != nil {
			return nil, err
		}
	}
	if e.Verify {
		reports := make([]*injection.InjectionReport, 0, len(items))
		for _, it := range items {
			reports = append(reports, it.facts.Injection)
		}
		if err := e.Inject.VerifyReports(ctx, reports); err != nil {
			return nil, err
		}
	}
	if e.Rules {
		if err := e.readRules(ctx, items, false); err != nil {
			return nil, err
		}
	}
	for _, it := range items {
		svcs.peersOf(&it.facts)
		if err := keep(diagnose.Diagnose(it.facts)); err != nil {
			return nil, err
		}
	}
	return strs.Dedupe(append(inject.FactsIncomplete(facts), evIncomplete...)), nil
}

// readRules reads the live rules (and with --connections the flows) of the
// items' running pods: of one pod through an ephemeral container (or a node
// pod with --via node), of many with one node pod per node.
func (e *Engine) readRules(ctx context.Context, items []*item, one bool) error {
	byNode := map[string][]*corev1.Pod{}
	itemOf := map[string]*item{}
	for _, it := range items {
		p := it.pod
		if p == nil {
			continue
		}
		if skipped := rulesSkipped(it); skipped != "" {
			it.facts.CaptureSkipped = skipped
		} else {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
			itemOf[p.Namespace+"/"+p.Name] = it
		}
		it.facts.Connections = e.Connections
	}
	if len(itemOf) == 0 {
		return nil
	}
	if len(itemOf) == 1 && (one || e.ViaSet) {
		for _, it := range itemOf {
			return e.readOne(ctx, it)
		}
	}
	if e.ViaSet && e.Via == nsexec.ViaEphemeral {
		return &engine.InputError{Err: fmt.Errorf("--via ephemeral reads one pod; %d running pods are selected: without --via, one node pod per node reads them all", len(itemOf))}
	}
	var done func(int)
	if e.Progress != nil && e.DryRun == nil {
		var finish func()
		done, finish = e.Progress(len(byNode), len(itemOf))
		defer finish()
	}
	lines, _, err := rules.Audit(ctx, e.Client, byNode, rules.AuditOptions{Image: e.Image, NodeNamespace: e.NodeNamespace, Timeout: e.Timeout,
		Connections: e.Connections, Listeners: true, Done: done, Announce: e.Announce, DryRun: e.DryRun})
	if err != nil {
		return err
	}
	for _, l := range lines {
		it := itemOf[l.Namespace+"/"+l.Pod]
		switch {
		case it == nil:
		case l.Error != "":
			it.facts.CaptureUnknown = "the rules could not be read: " + l.Error
			if l.Needs != "" {
				it.facts.CaptureNeeds = []string{l.Needs}
			}
		case l.Report == nil:
			// Read, and no table holds a rule.
			it.facts.Capture = rules.NoRules(it.pod, capture.CaptureInput{})
		default:
			it.facts.Capture = l.Report
		}
	}
	return nil
}

// readOne reads one pod's rules the way `kubectl mesh iptables POD` does.
func (e *Engine) readOne(ctx context.Context, it *item) error {
	read, err := rules.ReadPod(ctx, e.Client, rules.Request{Pod: it.pod, Via: e.Via, Image: e.Image, NodeNamespace: e.NodeNamespace,
		Timeout: e.Timeout, Connections: e.Connections, Announce: e.Announce, DryRun: e.DryRun})
	if errors.Is(err, nsexec.ErrDryRun) {
		return nil // printed, not created: nothing read
	}
	var rep *capture.CaptureReport
	if err == nil {
		rep, err = capture.ExplainCapture(read.Input)
	}
	var perm *nsexec.PermissionError
	switch {
	case ctx.Err() != nil:
		return err
	case errors.As(err, &perm):
		it.facts.CaptureUnknown, it.facts.CaptureNeeds = "the rules could not be read: "+perm.Msg, []string{perm.Need}
	case err != nil:
		it.facts.CaptureUnknown = "the rules could not be read: " + err.Error()
	default:
		rep.Live = &capture.LiveSource{Namespace: it.pod.Namespace, Pod: it.pod.Name, Via: read.Result.Via, Container: read.Result.Container, Backend: read.Backend}
		it.facts.Capture = rep
	}
	return nil
}
