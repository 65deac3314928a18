// Package inject is the injection engine (why-injected): it reads the
// mesh's configuration and the targets — pods, workloads, manifests, a
// namespace or the cluster — explains each with explain/injection, and
// proves answers with server-side dry runs (--verify).
package inject

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
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

// workloadOnlyLabels are the injection labels on a manifest object's own
// metadata that its pod template lacks.
func workloadOnlyLabels(content map[string]any, tmpl map[string]string) map[string]string {
	own := (&unstructured.Unstructured{Object: content}).GetLabels()
	var out map[string]string
	for _, k := range []string{istio.KeyInject, "istio.io/rev"} {
		if v, ok := own[k]; ok {
			if _, set := tmpl[k]; !set {
				if out == nil {
					out = map[string]string{}
				}
				out[k] = v
			}
		}
	}
	return out
}

// servicePods explains the pods a Service selects.
func (e *Engine) servicePods(ctx context.Context, facts *injection.ClusterFacts, svc *corev1.Service) ([]*injection.InjectionReport, error) {
	pods, err := target.ServicePods(ctx, e.Client, svc)
	if err != nil {
		return nil, err
	}
	reports := make([]*injection.InjectionReport, 0, len(pods))
	for i := range pods {
		r := e.Mesh.Explain(facts, inspect.PodWorkload(&pods[i], facts))
		e.recordLive(r, &pods[i])
		e.keepLive(r, &pods[i])
		reports = append(reports, r)
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
	if svc, ok := typed.(*corev1.Service); ok && live {
		return e.servicePods(ctx, facts, svc)
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
		r.WorkloadOnlyLabels = workloadOnlyLabels(content, tmpl.Labels)
		if sts, ok := typed.(*appsv1.StatefulSet); ok {
			tmpl = target.WithClaimVolumes(sts) // its pods' volumes, as its controller makes them: --verify's dry run sees them
		}
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
	tr := e.explainRefused(ctx, facts, w)
	if tr.RefusedBy != nil {
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
	var pods []corev1.Pod
	err = e.Client.EachPodPage(ctx, ns, sel.String(), func(page []corev1.Pod) error {
		pods = append(pods, page...)
		return nil
	})
	if err != nil {
		return nil, inspect.ExplainAPIError(err, "list pods")
	}
	for _, p := range target.Current(pods) {
		r := e.Mesh.Explain(facts, inspect.PodWorkload(p, facts))
		e.recordLive(r, p)
		e.keepLive(r, p)
		reports = append(reports, r)
	}
	return reports, nil
}

// FromFiles explains manifests before they are applied.
func (e *Engine) FromFiles(ctx context.Context, facts *injection.ClusterFacts) ([]*injection.InjectionReport, error) {
	var objs []map[string]any
	var fileOf []string // the file of each of objs
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
				fileOf = append(fileOf, name)
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
	fileAdmission(facts, objs, fileOf)
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
		if l, inFile := fileNamespaces[ns]; inFile {
			for _, r := range rs {
				r.FileNamespaceLabels = l
				if r.FileNamespaceLabels == nil {
					r.FileNamespaceLabels = map[string]string{}
				}
			}
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

// any template.
func (e *Engine) ExplainTemplate(ctx context.Context, facts *injection.ClusterFacts, kind, ns, name string, tmpl *corev1.PodTemplateSpec, events []corev1.Event) *injection.InjectionReport {
	w := &injection.Workload{Kind: kind, Namespace: ns, Name: name, NamespaceSource: injection.NamespaceFromCluster, Events: events}
	if tmpl != nil {
		w.Labels, w.Annotations, w.Spec = tmpl.Labels, tmpl.Annotations, tmpl.Spec
	}
	r := e.explainRefused(ctx, facts, w)
	if tmpl != nil {
		e.record(r, verifySource{namespace: ns, base: name, template: tmpl})
	}
	if !e.KeepFactors {
		r.Factors = injection.DecidingFactors(r.Factors)
	}
	return r
}
