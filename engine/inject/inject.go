// Package inject is the injection engine (why-injected): it reads the
// mesh's configuration and the targets — pods, workloads, manifests, a
// namespace or the cluster — explains each with explain/injection, and
// proves answers with server-side dry runs (--verify).
package inject

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubectl-mesh/kubectl-mesh/engine"
	"github.com/kubectl-mesh/kubectl-mesh/engine/target"
	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// Engine explains injection for what it is given.
type Engine struct {
	// Flags resolve TYPE/NAME as kubectl does.
	Flags  *genericclioptions.ConfigFlags
	Client *inspect.Client
	Mesh   injection.Mesh
	// Namespace is -n (or the kubeconfig's); ExplicitNamespace says -n was given.
	Namespace         string
	ExplicitNamespace bool
	// What to explain: manifests, POD or TYPE/NAME, or a sweep (-l, -A).
	Filenames     []string
	Args          []string
	Selector      string
	AllNamespaces bool
	// In is standard input (-f -).
	In io.Reader
	// templates are the controllers' templates read for InjectionTemplate
	// in this run, by namespace/Kind/name.
	templates sync.Map
	// workloads are the workloads InjectionTemplate read, once each.
	workloads inspect.WorkloadCache
	// live are the pods of a named target's reports, by report.
	live sync.Map
	// KeepFactors keeps a sweep's factors that decided something (JSON and
	// YAML show them; a table does not).
	KeepFactors bool
	// Verify records what each report's pod would be created from, for
	// VerifyReports.
	Verify bool
	// Progress, when set, is told how many dry runs VerifyReports makes; it
	// returns what to call as each is done, and once all are.
	Progress func(total int) (add func(int), finish func())
	// sources are what each report's pod would be created from, for --verify.
	sources map[*injection.InjectionReport]verifySource
	// facts are the mesh's facts MeshFacts read last (--verify's sharing
	// of dry runs reads the namespaces in them).
	facts *injection.ClusterFacts
}

// MeshFacts reads the mesh's configuration; no Istio injector at all is an
// error (unless the webhooks could not be read).
func (e *Engine) MeshFacts(ctx context.Context) (*injection.ClusterFacts, error) {
	facts, err := e.Client.MeshFacts(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the mesh's configuration: %w", err)
	}
	if _, unknown := facts.Unknown[injection.FactWebhooks]; !unknown && !e.Mesh.Installed(facts) {
		return nil, inspect.ErrNoMesh
	}
	e.facts = facts
	return facts, nil
}

// FactsIncomplete lists what of the mesh's configuration could not be read.
func FactsIncomplete(facts *injection.ClusterFacts) []string {
	var out []string
	for k, why := range facts.Unknown {
		out = append(out, k+": "+why)
	}
	sort.Strings(out)
	return out
}

// SweepReads are the reads a sweep starts before the mesh's configuration
// is known.
type SweepReads struct {
	pods      *inspect.PodStream
	events    map[string][]corev1.Event
	warnings  map[string][]corev1.Event
	eventsErr error
	unknown   *injection.ClusterFacts // what the events read could not read
	eventsIn  chan struct{}
	cancel    context.CancelFunc
}

// Warnings are the Warning events about the objects that are not pods
// (workloads, ReplicaSets), keyed by "namespace/kind/name", once read (nil
// when they could not be).
func (pre *SweepReads) Warnings() map[string][]corev1.Event {
	<-pre.eventsIn
	return pre.warnings
}

// close stops what is still being read and waits for it.
func (pre *SweepReads) Close() {
	pre.cancel()
	pre.pods.Close()
	<-pre.eventsIn
}

func (e *Engine) SweepNamespace() string {
	if e.AllNamespaces {
		return ""
	}
	return e.Namespace
}

func (e *Engine) StartSweep(ctx context.Context) *SweepReads {
	ns := e.SweepNamespace()
	ctx, cancel := context.WithCancel(ctx)
	pre := &SweepReads{pods: e.Client.StreamPods(ctx, ns, e.Selector), eventsIn: make(chan struct{}), cancel: cancel,
		unknown: &injection.ClusterFacts{Unknown: map[string]string{}}}
	go func() {
		defer close(pre.eventsIn)
		all, err := e.Client.WarningEvents(ctx, ns)
		if err != nil {
			pre.events, pre.eventsErr = map[string][]corev1.Event{}, inspect.UnknownEvents(pre.unknown, err)
			return
		}
		pre.warnings, pre.events = all, inspect.OnlyReason(all, "FailedCreate")
	}()
	return pre
}

// sweep explains every pod of the namespace (or cluster) as the pods come
// in, and gives each report to keep with its pod (nil for a workload whose
// pods admission refuses); pods that share everything the answer
// depends on share one answer (injection.Memo).
func (e *Engine) Sweep(ctx context.Context, facts *injection.ClusterFacts, pre *SweepReads, keep func(*injection.InjectionReport, *corev1.Pod) error) error {
	ns := e.SweepNamespace()
	if ns != "" {
		if err := e.Client.ResolveNamespaces(ctx, facts, ns); err != nil {
			return err
		} else if !inspect.NamespaceExists(facts, ns) {
			return fmt.Errorf("namespace %q not found", ns)
		}
	}
	<-pre.eventsIn
	if pre.eventsErr != nil {
		return pre.eventsErr
	}
	for k, v := range pre.unknown.Unknown {
		facts.Unknown[k] = v
	}
	// The table shows one row per pod: no factors; JSON and YAML keep the
	// ones that decided something.
	memo := injection.NewMemo(e.Mesh, facts, true)
	err := pre.pods.Each(func(pods []corev1.Pod) error {
		if ns == "" && facts.Unknown[injection.FactNamespaces] != "" || facts.NamespacesByGet {
			if err := e.Client.ResolveNamespaces(ctx, facts, podNamespaces(pods)...); err != nil {
				return err
			}
			// Namespaces read meanwhile change the facts: answers before
			// them are not reused.
			memo = injection.NewMemo(e.Mesh, facts, true)
		}
		for i := range pods {
			r := memo.Explain(inspect.PodWorkload(&pods[i], facts))
			e.recordLive(r, &pods[i])
			if !e.KeepFactors {
				r.Factors = nil
			}
			if err := keep(r, &pods[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return inspect.ExplainAPIError(err, "list pods")
	}
	if e.Selector == "" {
		owners, err := e.blockedOwners(ctx, facts, pre.events)
		if err != nil {
			return err
		}
		for _, r := range owners {
			if err := keep(r, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// podNamespaces lists the distinct namespaces of pods, in order of appearance.
func podNamespaces(pods []corev1.Pod) []string {
	var out []string
	seen := map[string]bool{}
	for i := range pods {
		if ns := pods[i].Namespace; !seen[ns] {
			seen[ns] = true
			out = append(out, ns)
		}
	}
	return out
}

// FromArgs explains POD, TYPE/NAME or TYPE NAME.
func (e *Engine) FromArgs(ctx context.Context, facts *injection.ClusterFacts) ([]*injection.InjectionReport, error) {
	infos, err := target.Args(e.Flags, e.Namespace, e.Args)
	if err != nil {
		return nil, err
	}
	var reports []*injection.InjectionReport
	for _, info := range infos {
		if err := e.Client.ResolveNamespaces(ctx, facts, info.Namespace); err != nil {
			return nil, err
		}
		u, ok := info.Object.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("unexpected object %T", info.Object)
		}
		rs, err := e.explainObject(ctx, facts, u.Object, info.Namespace, injection.NamespaceFromCluster, nil, true)
		if err != nil {
			return nil, err
		}
		reports = append(reports, rs...)
	}
	return reports, nil
}

// explainObject explains one object given as unstructured content: a pod,
// or a workload's template (and, when live, its pods).
func (e *Engine) explainObject(ctx context.Context, facts *injection.ClusterFacts, content map[string]any, namespace, nsSource string, nsLabels map[string]string, live bool) ([]*injection.InjectionReport, error) {
	typed, err := scheme.Scheme.New(target.SchemaGVK(content))
	if err != nil {
		return nil, fmt.Errorf("%s is not a kind kubectl mesh can explain: %v", target.Describe(content), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, typed); err != nil {
		return nil, fmt.Errorf("%s: %v", target.Describe(content), err)
	}
	if pod, ok := typed.(*corev1.Pod); ok {
		if pod.Namespace == "" {
			pod.Namespace = namespace
		}
		if live {
			r := e.Mesh.Explain(facts, inspect.PodWorkload(pod, facts))
			e.recordLive(r, pod)
			e.keepLive(r, pod)
			return []*injection.InjectionReport{r}, nil
		}
		w := &injection.Workload{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, Labels: pod.Labels, Annotations: pod.Annotations,
			Spec: pod.Spec, NamespaceSource: nsSource, NamespaceLabels: nsLabels, Manifest: true}
		r := e.Mesh.Explain(facts, w)
		e.record(r, verifySource{namespace: pod.Namespace, base: pod.Name,
			template:  &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels, Annotations: pod.Annotations}, Spec: pod.Spec},
			nsMissing: nsSource != injection.NamespaceFromCluster})
		return []*injection.InjectionReport{r}, nil
	}
	kind, name, ns, tmpl, selector, ok := target.PodTemplate(typed)
	if !ok {
		return nil, &engine.InputError{Err: fmt.Errorf("%s creates no pods: why-injected explains pods and workloads with a pod template (pod, deployment, statefulset, daemonset, replicaset, job, cronjob, replicationcontroller)", target.Describe(content))}
	}
	if ns == "" {
		ns = namespace
	}
	w := &injection.Workload{Kind: kind, Namespace: ns, Name: name, Labels: tmpl.Labels, Annotations: tmpl.Annotations, Spec: tmpl.Spec,
		NamespaceSource: nsSource, NamespaceLabels: nsLabels}
	if !live {
		w.Manifest = true
		r := e.Mesh.Explain(facts, w)
		e.record(r, verifySource{namespace: ns, base: name, template: tmpl, nsMissing: nsSource != injection.NamespaceFromCluster})
		return []*injection.InjectionReport{r}, nil
	}
	events, err := e.Client.FailedCreateEvents(ctx, facts, ns)
	if err != nil {
		return nil, err
	}
	w.Events = e.currentRefusals(ctx, inspect.EventsForOwner(events, ns, kind, name))
	var jobs []inspect.Workload
	if kind == "CronJob" {
		if jobs, err = e.Client.CronJobJobs(ctx, ns, name); err != nil {
			return nil, err
		}
		w.Events = pastCompleted(w.Events, jobs)
	}
	tr := e.Mesh.Explain(facts, w)
	if tr.RefusedBy != nil && !tr.CreationBlocked {
		// Refused now by something else: whether it is what the injector
		// adds that it refuses, the dry runs say (as diagnose's).
		e.ProveWithoutSidecar(ctx, tr, tmpl)
	}
	e.record(tr, verifySource{namespace: ns, base: name, template: tmpl})
	reports := []*injection.InjectionReport{tr}
	if kind == "CronJob" {
		return e.cronJobPods(ctx, facts, ns, jobs, reports)
	}
	if selector == nil {
		return reports, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("%s %s: selector: %v", kind, name, err)
	}
	err = e.Client.EachPodPage(ctx, ns, sel.String(), func(pods []corev1.Pod) error {
		for i := range pods {
			r := e.Mesh.Explain(facts, inspect.PodWorkload(&pods[i], facts))
			e.recordLive(r, &pods[i])
			e.keepLive(r, &pods[i])
			reports = append(reports, r)
		}
		return nil
	})
	if err != nil {
		return nil, inspect.ExplainAPIError(err, "list pods")
	}
	return reports, nil
}

// FromFiles explains manifests before they are applied.
func (e *Engine) FromFiles(ctx context.Context, facts *injection.ClusterFacts) ([]*injection.InjectionReport, error) {
	var objs []map[string]any
	fileNamespaces := map[string]map[string]string{}
	for _, name := range e.Filenames {
		var data []byte
		var err error
		data, err = engine.ReadInput(name, e.In)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for doc := 1; ; doc++ {
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, &engine.InputError{Err: fmt.Errorf("%s: document %d is not valid YAML or JSON: %v", name, doc, err)}
			}
			if len(obj) == 0 {
				continue
			}
			u := unstructured.Unstructured{Object: obj}
			if u.GetKind() == "" || u.GetAPIVersion() == "" {
				return nil, &engine.InputError{Err: fmt.Errorf("%s: document %d has no apiVersion or kind", name, doc)}
			}
			items := []*unstructured.Unstructured{&u}
			if u.IsList() {
				// kubectl get ns,deploy -o yaml: a List, its Namespaces included.
				items = nil
				_ = u.EachListItem(func(item runtime.Object) error {
					items = append(items, item.(*unstructured.Unstructured))
					return nil
				})
			}
			for _, it := range items {
				if it.GetKind() == "Namespace" && it.GetAPIVersion() == "v1" {
					fileNamespaces[it.GetName()] = it.GetLabels()
				}
				objs = append(objs, it.Object)
			}
		}
	}
	var namespaces []string
	for _, obj := range objs {
		u := unstructured.Unstructured{Object: obj}
		ns := u.GetNamespace()
		if ns == "" {
			ns = e.Namespace
		}
		if _, inFile := fileNamespaces[ns]; !inFile {
			namespaces = append(namespaces, ns)
		}
	}
	if err := e.Client.ResolveNamespaces(ctx, facts, namespaces...); err != nil {
		return nil, err
	}
	// Which bindings act on a manifest's pods is the policies' to say.
	e.Client.ValidatingPolicies(ctx, facts)
	var reports []*injection.InjectionReport
	skipped := 0
	for _, obj := range objs {
		u := unstructured.Unstructured{Object: obj}
		typed, err := scheme.Scheme.New(u.GroupVersionKind())
		if err != nil {
			skipped++
			continue
		}
		if _, _, _, _, _, ok := target.PodTemplate(typed); !ok {
			if _, isPod := typed.(*corev1.Pod); !isPod {
				skipped++
				continue
			}
		}
		ns := u.GetNamespace()
		if ns == "" {
			ns = e.Namespace
		}
		source, labels := injection.NamespaceFromCluster, map[string]string(nil)
		if !inspect.NamespaceExists(facts, ns) {
			if l, inFile := fileNamespaces[ns]; inFile {
				source, labels = injection.NamespaceFromFile, l
			} else {
				source = injection.NamespaceMissing
			}
		}
		rs, err := e.explainObject(ctx, facts, obj, ns, source, labels, false)
		if err != nil {
			return nil, err
		}
		reports = append(reports, rs...)
	}
	if len(reports) == 0 {
		return nil, &engine.InputError{Err: fmt.Errorf("%s: no pod or workload with a pod template found (%d other objects)", strings.Join(e.Filenames, ", "), skipped)}
	}
	for _, r := range reports {
		// What its admission meets could not all be read: the answer is
		// incomplete, and says which read would settle it.
		if r.UnverifiedAdmissionUnknown != "" {
			if facts.Unknown == nil {
				facts.Unknown = map[string]string{}
			}
			facts.Unknown["validating admission"] = r.UnverifiedAdmissionUnknown
		}
	}
	return reports, nil
}

// verifySource is what a report's pod would be created from now: a template
// (a workload's, a manifest's pod), or, for a live pod, its controller's.
type verifySource struct {
	namespace string
	// base names the dry-run pod (generateName base-).
	base     string
	template *corev1.PodTemplateSpec
	// live is a live pod (its metadata): its controller's template is read.
	live *corev1.Pod
	// nsMissing: the namespace does not exist yet (a manifest's).
	nsMissing bool
}

func (e *Engine) record(r *injection.InjectionReport, src verifySource) {
	if !e.Verify {
		return
	}
	if e.sources == nil {
		e.sources = map[*injection.InjectionReport]verifySource{}
	}
	e.sources[r] = src
}

// recordLive keeps what a live pod's proof needs: its namespace, name and
// controller reference (not the whole pod: a sweep may hold many).
func (e *Engine) recordLive(r *injection.InjectionReport, p *corev1.Pod) {
	if !e.Verify {
		return
	}
	meta := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, OwnerReferences: p.OwnerReferences}}
	e.record(r, verifySource{namespace: p.Namespace, base: p.Name, live: meta})
}

// verify proves each report with a server-side dry-run create of the pod it
// would be created from: one dry run per distinct template and namespace,
// one read per distinct controller, one access check per namespace.
func (e *Engine) VerifyReports(ctx context.Context, reports []*injection.InjectionReport) error {
	namespaces, allowed, owners, err := e.verifyReads(ctx, reports)
	if err != nil {
		return err
	}
	proofs := map[string]proof{} // template key → result
	var mu sync.Mutex
	var firstErr error

	// Then each report finds its template; the dry runs run after, several at once.
	type pending struct {
		ns, base string
		tmpl     *corev1.PodTemplateSpec
	}
	jobs := map[string]pending{}
	keys := map[*injection.InjectionReport]string{}
	nsOf := map[*injection.InjectionReport]string{}
	// Namespaces admission cannot tell apart share their dry runs.
	var allowedNS []string
	for _, ns := range namespaces {
		if allowed[ns] == nil {
			allowedNS = append(allowedNS, ns)
		}
	}
	share := e.sharedDryRuns(ctx, e.facts, allowedNS)
	for _, r := range reports {
		src, ok := e.sources[r]
		if !ok {
			r.NotVerified = "nothing to create it from (a workload known only from its events)"
			continue
		}
		if src.nsMissing {
			r.NotVerified = "namespace " + src.namespace + " does not exist yet: admission cannot be asked"
			continue
		}
		if why := allowed[src.namespace]; why != nil {
			r.NotVerified = why.Error()
			continue
		}
		tmpl, base := src.template, src.base
		if src.live != nil {
			ref := metav1.GetControllerOf(src.live)
			if ref == nil {
				r.NotVerified = "a pod no controller re-creates: nothing to create it from (verify its manifest with -f)"
				continue
			}
			or := owners[src.namespace+"/"+ref.Kind+"/"+ref.Name]
			switch {
			case or.err != nil && apierrors.IsNotFound(or.err):
				r.NotVerified = "its " + or.owner + " is gone"
				continue
			case or.err != nil && strings.HasPrefix(or.err.Error(), "forbidden:"):
				r.NotVerified = or.err.Error()
				continue
			case or.err != nil:
				return or.err
			case !or.found:
				r.NotVerified = "its controller " + or.owner + " has no pod template kubectl-mesh can read"
				continue
			}
			tmpl, base = or.tmpl, strings.ToLower(ref.Name)
		}
		scope := src.namespace
		if like := share[src.namespace]; like != "" {
			scope = like
		}
		key, err := templateKey(scope, tmpl)
		if err != nil {
			return err
		}
		nsOf[r] = src.namespace
		if _, ok := jobs[key]; !ok {
			jobs[key] = pending{ns: src.namespace, base: base, tmpl: tmpl}
		}
		keys[r] = key
	}
	order := make([]string, 0, len(jobs))
	for k := range jobs {
		order = append(order, k)
	}
	add := func(int) {}
	if e.Progress != nil {
		var finish func()
		add, finish = e.Progress(len(order))
		defer finish()
	}
	inParallel(len(order), func(i int) {
		j := jobs[order[i]]
		pr := e.dryRun(ctx, j.ns, j.base, j.tmpl)
		add(1)
		mu.Lock()
		proofs[order[i]] = pr
		if pr.err != nil && firstErr == nil {
			firstErr = pr.err
		}
		mu.Unlock()
	})
	if firstErr != nil {
		return firstErr
	}
	for r, key := range keys {
		pr := proofs[key]
		if pr.notVerified != "" {
			r.NotVerified = pr.notVerified
			continue
		}
		v := *pr.v
		if ns := jobs[key].ns; ns != nsOf[r] {
			v.SharedFrom = ns
		}
		v.Compare(r)
		if v.Refused {
			e.attributeRefusal(ctx, &v, r, nsOf[r], jobs[key].tmpl)
		}
		r.Verified = &v
	}
	return nil
}

// verifyReads makes the reads --verify's dry runs need, several at once:
// whether the user may create pods in each namespace of the reports, and
// the templates of the live pods' controllers.
func (e *Engine) verifyReads(ctx context.Context, reports []*injection.InjectionReport) (namespaces []string, allowed map[string]error, owners map[string]ownerRead, err error) {
	allowed = map[string]error{}    // namespace → why not (nil: allowed)
	owners = map[string]ownerRead{} // namespace/kind/name → template

	// The access checks and the controller reads first, several at once.
	var ownerPods []*corev1.Pod
	seenNS, seenOwner := map[string]bool{}, map[string]bool{}
	for _, r := range reports {
		src, ok := e.sources[r]
		if !ok || src.nsMissing {
			continue
		}
		if !seenNS[src.namespace] {
			seenNS[src.namespace] = true
			namespaces = append(namespaces, src.namespace)
		}
		if src.live != nil {
			if ref := metav1.GetControllerOf(src.live); ref != nil && !seenOwner[src.namespace+"/"+ref.Kind+"/"+ref.Name] {
				seenOwner[src.namespace+"/"+ref.Kind+"/"+ref.Name] = true
				ownerPods = append(ownerPods, src.live)
			}
		}
	}
	var mu sync.Mutex
	var firstErr error
	inParallel(len(namespaces), func(i int) {
		can, err := e.Client.CanCreatePods(ctx, namespaces[i])
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			firstErr = err
		case !can:
			allowed[namespaces[i]] = fmt.Errorf("the user may not create pods in namespace %s (a dry run needs that permission): the prediction stands alone", namespaces[i])
		default:
			allowed[namespaces[i]] = nil
		}
	})
	if firstErr != nil {
		return nil, nil, nil, firstErr
	}
	// Many ReplicaSets: their templates come from one list, not a GET each
	// (a ReplicaSet not in it, or a list refused, is read by itself).
	listed := e.listReplicaSets(ctx, ownerPods, namespaces)
	inParallel(len(ownerPods), func(i int) {
		p := ownerPods[i]
		ref := metav1.GetControllerOf(p)
		mu.Lock()
		can := allowed[p.Namespace] == nil
		mu.Unlock()
		if !can {
			return
		}
		if t, ok := listed[p.Namespace+"/"+ref.Name]; ok && ref.Kind == "ReplicaSet" {
			mu.Lock()
			owners[p.Namespace+"/"+ref.Kind+"/"+ref.Name] = ownerRead{tmpl: t, owner: ref.Kind + "/" + ref.Name, found: true}
			mu.Unlock()
			return
		}
		t, owner, found, err := e.Client.OwnerTemplate(ctx, p)
		mu.Lock()
		owners[p.Namespace+"/"+ref.Kind+"/"+ref.Name] = ownerRead{tmpl: t, owner: owner, found: found, err: err}
		mu.Unlock()
	})
	return namespaces, allowed, owners, nil
}

// attributeRefusal reads a dry run's refusal as a FailedCreate event of the
// template it was made from: what acted on the pod and the fix, as the
// explanation of a workload whose pods are refused says them.
// A refusal put down to a policy or webhook that is not the mesh's is
// proved once more without the sidecar: admitted so, it is what the
// injector adds that is refused.
func (e *Engine) attributeRefusal(ctx context.Context, v *injection.Verification, r *injection.InjectionReport, ns string, tmpl *corev1.PodTemplateSpec) {
	if e.facts == nil || tmpl == nil {
		return
	}
	w := &injection.Workload{Kind: r.Kind, Namespace: ns, Name: r.Name, NamespaceSource: injection.NamespaceFromCluster,
		Labels: tmpl.Labels, Annotations: tmpl.Annotations, Spec: tmpl.Spec,
		Events: []corev1.Event{{Type: corev1.EventTypeWarning, Reason: "FailedCreate", Message: v.Message,
			InvolvedObject: corev1.ObjectReference{Kind: "dry run of", Name: r.Name}}}}
	switch a := e.Mesh.Explain(e.facts, w); {
	case a.CreationBlocked:
		v.BlockedBy, v.Fix = a.BlockedBy, a.Fix
	case a.RefusedBy != nil:
		v.RefusedBy, v.Fix = a.RefusedBy.By, a.RefusedBy.Fix
		e.ProveWithoutSidecar(ctx, a, tmpl)
		v.WithoutSidecar, v.MeshSide = a.RefusedBy.WithoutSidecar, a.RefusedBy.MeshSide
	}
}

// verifyWorkers is how many of --verify's requests run at once.
const verifyWorkers = 8

// inParallel runs fn for 0..n-1, at most verifyWorkers at once.
func inParallel(n int, fn func(i int)) {
	sem := make(chan struct{}, verifyWorkers)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}(i)
	}
	wg.Wait()
}

type ownerRead struct {
	tmpl  *corev1.PodTemplateSpec
	owner string
	found bool
	err   error
}

type proof struct {
	v           *injection.Verification
	notVerified string
	err         error
}

// dryRun creates a pod from tmpl with dryRun=All and reads what admission did.
func (e *Engine) dryRun(ctx context.Context, ns, base string, tmpl *corev1.PodTemplateSpec) proof {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: base + "-", Namespace: ns, Labels: tmpl.Labels, Annotations: tmpl.Annotations},
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = "" // a re-created pod is scheduled again
	admitted, err := e.Client.DryRunCreate(ctx, pod)
	switch {
	case err == nil:
		return proof{v: injection.AdmittedPod(admitted)}
	case apierrors.IsNotFound(err):
		return proof{notVerified: "namespace " + ns + " does not exist: admission cannot be asked"}
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return proof{notVerified: "namespace " + ns + " is being deleted: admission cannot be asked"}
	case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot create resource"):
		return proof{notVerified: "the user may not create pods in namespace " + ns}
	case ctx.Err() != nil:
		return proof{err: ctx.Err()}
	case admissionRefusal(err):
		// Admission said no (below), whatever status it was wrapped in: a
		// webhook that could not be called answers 500 Internal error.
	case apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err),
		apierrors.IsInternalError(err), apierrors.ReasonForError(err) == metav1.StatusReasonUnknown:
		// The apiserver could not answer for this template: no proof, and
		// not a refusal; the other workloads are still verified.
		return proof{notVerified: fmt.Sprintf("the apiserver did not answer the dry-run create in namespace %s: %v", ns, err)}
	}
	// Admission refused it: a webhook denied it or could not be called,
	// PodSecurity, a quota, a missing service account, … — as it would a real pod.
	return proof{v: injection.RefusedPod(err.Error())}
}

// admissionRefusal: an error that an admission step produced — a webhook
// that denied the pod or could not be called, a policy, PodSecurity, a
// quota or LimitRange — and not the apiserver failing to answer.
func admissionRefusal(err error) bool {
	msg := err.Error()
	for _, w := range []string{"admission webhook", "failed calling webhook", "denied request", "denied the request",
		"violates PodSecurity", "exceeded quota", "ValidatingAdmissionPolicy", "usage per Container", "usage per Pod", "must specify limits", "must specify requests"} {
		if strings.Contains(msg, w) {
			return true
		}
	}
	return false
}

// templateKey identifies a template in a namespace: pods from the same one
// share one dry run.
func templateKey(ns string, t *corev1.PodTemplateSpec) (string, error) {
	b, err := json.Marshal(struct {
		L, A map[string]string
		S    corev1.PodSpec
	}{t.Labels, t.Annotations, t.Spec})
	if err != nil {
		return "", err
	}
	h := fnv.New64a()
	h.Write(b)
	return fmt.Sprintf("%s/%x", ns, h.Sum64()), nil
}

// ExplainTemplate explains the pod template of a workload that lacks pods
// (events: the FailedCreate events about it), recorded for --verify like
// any template.
func (e *Engine) ExplainTemplate(facts *injection.ClusterFacts, kind, ns, name string, tmpl *corev1.PodTemplateSpec, events []corev1.Event) *injection.InjectionReport {
	w := &injection.Workload{Kind: kind, Namespace: ns, Name: name, NamespaceSource: injection.NamespaceFromCluster, Events: events}
	if tmpl != nil {
		w.Labels, w.Annotations, w.Spec = tmpl.Labels, tmpl.Annotations, tmpl.Spec
	}
	r := e.Mesh.Explain(facts, w)
	if tmpl != nil {
		e.record(r, verifySource{namespace: ns, base: name, template: tmpl})
	}
	if !e.KeepFactors {
		r.Factors = injection.DecidingFactors(r.Factors)
	}
	return r
}
