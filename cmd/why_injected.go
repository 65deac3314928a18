package cmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// WhyInjectedOptions holds the flags and state of `kubectl mesh why-injected`.
type WhyInjectedOptions struct {
	configFlags *genericclioptions.ConfigFlags

	Filenames     []string
	Selector      string
	AllNamespaces bool
	Output        string
	// All lists every factor, those with no effect too.
	All bool
	// Verify proves each answer with a server-side dry-run create.
	Verify bool
	Args   []string

	namespace         string
	explicitNamespace bool
	client            *inspect.Client
	mesh              injection.Mesh
	// sources are what each report's pod would be created from, for --verify.
	sources map[*injection.InjectionReport]verifySource
	genericiooptions.IOStreams
}

// A list of reports is printed (streamed) as
//
//	{apiVersion, kind: InjectionReportList, items: [InjectionReport…],
//	 summary: [NamespaceSummary…] (namespace and cluster sweeps), incomplete: [string…]}

// NewWhyInjectedCmd builds `kubectl mesh why-injected`.
func NewWhyInjectedCmd(configFlags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &WhyInjectedOptions{configFlags: configFlags, IOStreams: streams, mesh: injection.Istio{}}
	c := &cobra.Command{
		Use:   "why-injected [POD | TYPE/NAME | -f FILE | -l SELECTOR | -A]",
		Short: "Explain whether pods are (or will be) injected with a sidecar, and why",
		Long: `Explain whether a pod was injected with the mesh's sidecar, whether it would be
if it were created now, and every factor that decides it: the namespace's and
the pod's labels as Istio's webhook selectors see them, which webhook the
apiserver calls, the injector's own checks (hostNetwork, ignored namespaces,
sidecar.istio.io/inject as the running Istio version parses it, never/always
inject selectors, policy), the webhook's backend, and ambient mode.

A pod, a workload (its pod template and its pods), or manifests before they are
applied (-f). Without a target: every pod of the namespace (-n, -l) or of the
cluster (-A), one row each, pods whose state differs from what they would get
if re-created first.`,
		Example: `  # Why is (or isn't) this pod injected?
  kubectl mesh why-injected reviews-v1-5f4d8b7c9-x2x8z -n bookinfo

  # A deployment's pod template and its pods
  kubectl mesh why-injected deploy/reviews -n bookinfo

  # Manifests before they are applied
  kubectl mesh why-injected -f deployment.yaml

  # Every pod in the cluster: which ones need a restart?
  kubectl mesh why-injected -A`,
		RunE: func(c *cobra.Command, args []string) error {
			if err := o.Complete(args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(c.Context())
		},
		ValidArgsFunction: completePodsAndWorkloads(configFlags),
	}
	c.Flags().StringSliceVarP(&o.Filenames, "filename", "f", nil, "Manifest file(s) to explain before they are applied (- for standard input)")
	c.Flags().StringVarP(&o.Selector, "selector", "l", "", "Explain the pods matching this label selector")
	c.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "Explain every pod in the cluster")
	c.Flags().StringVarP(&o.Output, "output", "o", "", "Output format: json or yaml")
	c.Flags().BoolVar(&o.All, "all", false, "List every factor, also those with no effect (by default they are counted in one line per kind)")
	c.Flags().BoolVar(&o.Verify, "verify", false, "Prove each answer: create the pod as a server-side dry run (nothing is persisted) and show what admission did beside the prediction (needs create pods)")
	_ = c.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{render.JSON, render.YAML}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.MarkFlagFilename("filename", "yaml", "yml", "json")
	return c
}

// Complete fills the options from the flags and the kubeconfig.
func (o *WhyInjectedOptions) Complete(args []string) error {
	o.Args = args
	var err error
	o.namespace, o.explicitNamespace, o.client, err = connect(o.configFlags)
	return err
}

// Validate checks that the flags make sense together.
func (o *WhyInjectedOptions) Validate() error {
	if err := validateOutput(o.Output); err != nil {
		return err
	}
	switch {
	case len(o.Filenames) > 0 && len(o.Args) > 0:
		return usageErrorf("give either -f or a POD / TYPE/NAME, not both")
	case len(o.Filenames) > 0 && (o.AllNamespaces || o.Selector != ""):
		return usageErrorf("-f cannot be combined with -A or -l")
	case len(o.Args) > 0 && o.AllNamespaces:
		return usageErrorf("-A explains every pod; it takes no POD or TYPE/NAME")
	case len(o.Args) > 0 && o.Selector != "":
		return usageErrorf("-l selects pods; it takes no POD or TYPE/NAME")
	case len(o.Args) > 2:
		return usageErrorf("expected POD, TYPE/NAME or TYPE NAME, got %d arguments", len(o.Args))
	}
	return nil
}

// Run reads the cluster once, explains the targets and prints the answer.
func (o *WhyInjectedOptions) Run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	// A sweep's pods and FailedCreate events are read while the mesh's
	// configuration is (none of them needs the others to be asked for).
	var pre *sweepReads
	if len(o.Filenames) == 0 && len(o.Args) == 0 {
		pre = o.startSweep(ctx)
		defer pre.close()
	}
	facts, err := o.meshFacts(ctx)
	if err != nil {
		return err
	}
	var reports []*injection.InjectionReport
	// One pod (or one object of a file) prints one report; a workload, its
	// template and its pods; a sweep, a list with a summary, keeping only
	// what it prints of each pod (but for --verify, which proves the
	// reports first).
	var kept *injectionSweep
	list := true
	switch {
	case len(o.Filenames) > 0:
		reports, err = o.fromFiles(ctx, facts)
		list = len(reports) != 1
	case len(o.Args) > 0:
		reports, err = o.fromArgs(ctx, facts)
		list = len(reports) != 1 || reports[0].Kind != "Pod"
	case o.Verify:
		err = o.sweep(ctx, facts, pre, func(r *injection.InjectionReport, _ *corev1.Pod) error {
			reports = append(reports, r)
			return nil
		})
	default:
		kept = o.newSweep(facts, false)
		err = o.sweep(ctx, facts, pre, func(r *injection.InjectionReport, _ *corev1.Pod) error { return kept.add(r) })
	}
	if err != nil {
		return err
	}
	if o.Verify {
		if err := o.verify(ctx, reports); err != nil {
			return err
		}
		if pre != nil {
			kept = o.newSweep(facts, anyVerified(reports))
			for _, r := range reports {
				if err := kept.add(r); err != nil {
					return err
				}
			}
		}
	}
	incomplete := factsIncomplete(facts)
	if kept != nil {
		err = kept.print(incomplete)
	} else {
		err = o.print(reports, list, incomplete)
	}
	if err != nil {
		return err
	}
	if len(incomplete) > 0 {
		return &IncompleteError{Err: fmt.Errorf("the answer is incomplete, some facts could not be read: %s", strings.Join(incomplete, "; "))}
	}
	return nil
}

// meshFacts reads the mesh's configuration; no Istio injector at all is an
// error (unless the webhooks could not be read).
func (o *WhyInjectedOptions) meshFacts(ctx context.Context) (*injection.ClusterFacts, error) {
	facts, err := o.client.MeshFacts(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the mesh's configuration: %w", err)
	}
	if _, unknown := facts.Unknown[injection.FactWebhooks]; !unknown && !o.mesh.Installed(facts) {
		return nil, inspect.ErrNoMesh
	}
	return facts, nil
}

// factsIncomplete lists what of the mesh's configuration could not be read.
func factsIncomplete(facts *injection.ClusterFacts) []string {
	var out []string
	for k, why := range facts.Unknown {
		out = append(out, k+": "+why)
	}
	sort.Strings(out)
	return out
}

// newSweep keeps a sweep's reports for o's output.
func (o *WhyInjectedOptions) newSweep(facts *injection.ClusterFacts, verified bool) *injectionSweep {
	var p *render.Printer
	if o.Output == "" {
		p = render.NewPrinter(o.Out)
	}
	return newInjectionSweep(o, p, facts, verified)
}

// sweepReads are the reads a sweep starts before the mesh's configuration
// is known.
type sweepReads struct {
	pods      *inspect.PodStream
	events    map[string][]corev1.Event
	eventsErr error
	unknown   *injection.ClusterFacts // what the events read could not read
	eventsIn  chan struct{}
	cancel    context.CancelFunc
}

// close stops what is still being read and waits for it.
func (pre *sweepReads) close() {
	pre.cancel()
	pre.pods.Close()
	<-pre.eventsIn
}

func (o *WhyInjectedOptions) sweepNamespace() string {
	if o.AllNamespaces {
		return ""
	}
	return o.namespace
}

func (o *WhyInjectedOptions) startSweep(ctx context.Context) *sweepReads {
	ns := o.sweepNamespace()
	ctx, cancel := context.WithCancel(ctx)
	pre := &sweepReads{pods: o.client.StreamPods(ctx, ns, o.Selector), eventsIn: make(chan struct{}), cancel: cancel,
		unknown: &injection.ClusterFacts{Unknown: map[string]string{}}}
	go func() {
		defer close(pre.eventsIn)
		pre.events, pre.eventsErr = o.client.FailedCreateEvents(ctx, pre.unknown, ns)
	}()
	return pre
}

// sweep explains every pod of the namespace (or cluster) as the pods come
// in, and gives each report to keep with its pod (nil for a workload whose
// pods admission refuses); pods that share everything the answer
// depends on share one answer (injection.Memo).
func (o *WhyInjectedOptions) sweep(ctx context.Context, facts *injection.ClusterFacts, pre *sweepReads, keep func(*injection.InjectionReport, *corev1.Pod) error) error {
	ns := o.sweepNamespace()
	if ns != "" {
		if err := o.client.ResolveNamespaces(ctx, facts, ns); err != nil {
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
	memo := injection.NewMemo(o.mesh, facts, true)
	err := pre.pods.Each(func(pods []corev1.Pod) error {
		if ns == "" && facts.Unknown[injection.FactNamespaces] != "" || facts.NamespacesByGet {
			if err := o.client.ResolveNamespaces(ctx, facts, podNamespaces(pods)...); err != nil {
				return err
			}
			// Namespaces read meanwhile change the facts: answers before
			// them are not reused.
			memo = injection.NewMemo(o.mesh, facts, true)
		}
		for i := range pods {
			r := memo.Explain(inspect.PodWorkload(&pods[i], facts))
			o.recordLive(r, &pods[i])
			if o.Output == "" {
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
	if o.Selector == "" {
		owners, err := o.blockedOwners(ctx, facts, pre.events)
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

// blockedOwners reports workloads whose pods the apiserver refuses to create
// because of an Istio webhook (FailedCreate events): they have no pod to list.
func (o *WhyInjectedOptions) blockedOwners(ctx context.Context, facts *injection.ClusterFacts, events map[string][]corev1.Event) ([]*injection.InjectionReport, error) {
	var out []*injection.InjectionReport
	keys := make([]string, 0, len(events))
	var namespaces []string
	for k := range events {
		keys = append(keys, k)
		namespaces = append(namespaces, strings.SplitN(k, "/", 2)[0])
	}
	sort.Strings(keys)
	if err := o.client.ResolveNamespaces(ctx, facts, namespaces...); err != nil {
		return nil, err
	}
	for _, k := range keys {
		evs := events[k]
		if !strings.Contains(evs[0].Message, "sidecar-injector.istio.io") {
			continue
		}
		parts := strings.SplitN(k, "/", 3)
		w := &injection.Workload{Kind: parts[1], Namespace: parts[0], Name: parts[2], NamespaceSource: injection.NamespaceFromCluster, Events: evs}
		// Its pods would come from the template of the object the events are
		// about: read (one GET per refused workload), it says why admission
		// refuses them, and what to change; unread, the events say it alone.
		yes := true
		owned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: parts[0], Name: parts[2],
			OwnerReferences: []metav1.OwnerReference{{Kind: parts[1], Name: parts[2], Controller: &yes}}}}
		if tmpl, _, ok, err := o.client.OwnerTemplate(ctx, owned); err == nil && ok {
			w.Labels, w.Annotations, w.Spec = tmpl.Labels, tmpl.Annotations, tmpl.Spec
		}
		r := o.mesh.Explain(facts, w)
		o.recordLive(r, owned)
		r.Factors = injection.DecidingFactors(r.Factors)
		out = append(out, r)
	}
	return out, nil
}

// fromArgs explains POD, TYPE/NAME or TYPE NAME.
func (o *WhyInjectedOptions) fromArgs(ctx context.Context, facts *injection.ClusterFacts) ([]*injection.InjectionReport, error) {
	infos, err := resolveArgs(o.configFlags, o.namespace, o.Args)
	if err != nil {
		return nil, err
	}
	var reports []*injection.InjectionReport
	for _, info := range infos {
		if err := o.client.ResolveNamespaces(ctx, facts, info.Namespace); err != nil {
			return nil, err
		}
		u, ok := info.Object.(*unstructured.Unstructured)
		if !ok {
			return nil, fmt.Errorf("unexpected object %T", info.Object)
		}
		rs, err := o.explainObject(ctx, facts, u.Object, info.Namespace, injection.NamespaceFromCluster, nil, true)
		if err != nil {
			return nil, err
		}
		reports = append(reports, rs...)
	}
	return reports, nil
}

// podTemplate extracts the pod template and pod selector of a pod-bearing
// object; ok is false for kinds that create no pods.
func podTemplate(obj runtime.Object) (kind, name, namespace string, tmpl *corev1.PodTemplateSpec, selector *metav1.LabelSelector, ok bool) {
	switch x := obj.(type) {
	case *appsv1.Deployment:
		return "Deployment", x.Name, x.Namespace, &x.Spec.Template, x.Spec.Selector, true
	case *appsv1.StatefulSet:
		return "StatefulSet", x.Name, x.Namespace, &x.Spec.Template, x.Spec.Selector, true
	case *appsv1.DaemonSet:
		return "DaemonSet", x.Name, x.Namespace, &x.Spec.Template, x.Spec.Selector, true
	case *appsv1.ReplicaSet:
		return "ReplicaSet", x.Name, x.Namespace, &x.Spec.Template, x.Spec.Selector, true
	case *batchv1.Job:
		return "Job", x.Name, x.Namespace, &x.Spec.Template, x.Spec.Selector, true
	case *batchv1.CronJob:
		return "CronJob", x.Name, x.Namespace, &x.Spec.JobTemplate.Spec.Template, nil, true
	case *corev1.ReplicationController:
		var sel *metav1.LabelSelector
		if x.Spec.Selector != nil {
			sel = &metav1.LabelSelector{MatchLabels: x.Spec.Selector}
		}
		if x.Spec.Template == nil {
			return "ReplicationController", x.Name, x.Namespace, &corev1.PodTemplateSpec{}, sel, true
		}
		return "ReplicationController", x.Name, x.Namespace, x.Spec.Template, sel, true
	}
	return "", "", "", nil, nil, false
}

// explainObject explains one object given as unstructured content: a pod,
// or a workload's template (and, when live, its pods).
func (o *WhyInjectedOptions) explainObject(ctx context.Context, facts *injection.ClusterFacts, content map[string]any, namespace, nsSource string, nsLabels map[string]string, live bool) ([]*injection.InjectionReport, error) {
	typed, err := scheme.Scheme.New(schemaGVK(content))
	if err != nil {
		return nil, fmt.Errorf("%s is not a kind kubectl mesh can explain: %v", describe(content), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(content, typed); err != nil {
		return nil, fmt.Errorf("%s: %v", describe(content), err)
	}
	if pod, ok := typed.(*corev1.Pod); ok {
		if pod.Namespace == "" {
			pod.Namespace = namespace
		}
		if live {
			r := o.mesh.Explain(facts, inspect.PodWorkload(pod, facts))
			o.recordLive(r, pod)
			return []*injection.InjectionReport{r}, nil
		}
		w := &injection.Workload{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, Labels: pod.Labels, Annotations: pod.Annotations,
			Spec: pod.Spec, NamespaceSource: nsSource, NamespaceLabels: nsLabels}
		r := o.mesh.Explain(facts, w)
		o.record(r, verifySource{namespace: pod.Namespace, base: pod.Name,
			template:  &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels, Annotations: pod.Annotations}, Spec: pod.Spec},
			nsMissing: nsSource != injection.NamespaceFromCluster})
		return []*injection.InjectionReport{r}, nil
	}
	kind, name, ns, tmpl, selector, ok := podTemplate(typed)
	if !ok {
		return nil, &UsageError{Err: fmt.Errorf("%s creates no pods: why-injected explains pods and workloads with a pod template (pod, deployment, statefulset, daemonset, replicaset, job, cronjob, replicationcontroller)", describe(content))}
	}
	if ns == "" {
		ns = namespace
	}
	w := &injection.Workload{Kind: kind, Namespace: ns, Name: name, Labels: tmpl.Labels, Annotations: tmpl.Annotations, Spec: tmpl.Spec,
		NamespaceSource: nsSource, NamespaceLabels: nsLabels}
	if !live {
		r := o.mesh.Explain(facts, w)
		o.record(r, verifySource{namespace: ns, base: name, template: tmpl, nsMissing: nsSource != injection.NamespaceFromCluster})
		return []*injection.InjectionReport{r}, nil
	}
	events, err := o.client.FailedCreateEvents(ctx, facts, ns)
	if err != nil {
		return nil, err
	}
	w.Events = inspect.EventsForOwner(events, ns, kind, name)
	tr := o.mesh.Explain(facts, w)
	o.record(tr, verifySource{namespace: ns, base: name, template: tmpl})
	reports := []*injection.InjectionReport{tr}
	if selector == nil {
		return reports, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, fmt.Errorf("%s %s: selector: %v", kind, name, err)
	}
	err = o.client.EachPodPage(ctx, ns, sel.String(), func(pods []corev1.Pod) error {
		for i := range pods {
			r := o.mesh.Explain(facts, inspect.PodWorkload(&pods[i], facts))
			o.recordLive(r, &pods[i])
			reports = append(reports, r)
		}
		return nil
	})
	if err != nil {
		return nil, inspect.ExplainAPIError(err, "list pods")
	}
	return reports, nil
}

func schemaGVK(content map[string]any) schema.GroupVersionKind {
	u := unstructured.Unstructured{Object: content}
	return u.GroupVersionKind()
}

func describe(content map[string]any) string {
	u := unstructured.Unstructured{Object: content}
	if u.GetName() == "" {
		return u.GetKind()
	}
	return u.GetKind() + " " + u.GetName()
}

// fromFiles explains manifests before they are applied.
func (o *WhyInjectedOptions) fromFiles(ctx context.Context, facts *injection.ClusterFacts) ([]*injection.InjectionReport, error) {
	var objs []map[string]any
	fileNamespaces := map[string]map[string]string{}
	for _, name := range o.Filenames {
		var data []byte
		var err error
		data, err = readInput(name, o.In)
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
				return nil, &UsageError{Err: fmt.Errorf("%s: document %d is not valid YAML or JSON: %v", name, doc, err)}
			}
			if len(obj) == 0 {
				continue
			}
			u := unstructured.Unstructured{Object: obj}
			if u.GetKind() == "" || u.GetAPIVersion() == "" {
				return nil, &UsageError{Err: fmt.Errorf("%s: document %d has no apiVersion or kind", name, doc)}
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
			ns = o.namespace
		}
		if _, inFile := fileNamespaces[ns]; !inFile {
			namespaces = append(namespaces, ns)
		}
	}
	if err := o.client.ResolveNamespaces(ctx, facts, namespaces...); err != nil {
		return nil, err
	}
	var reports []*injection.InjectionReport
	skipped := 0
	for _, obj := range objs {
		u := unstructured.Unstructured{Object: obj}
		typed, err := scheme.Scheme.New(u.GroupVersionKind())
		if err != nil {
			skipped++
			continue
		}
		if _, _, _, _, _, ok := podTemplate(typed); !ok {
			if _, isPod := typed.(*corev1.Pod); !isPod {
				skipped++
				continue
			}
		}
		ns := u.GetNamespace()
		if ns == "" {
			ns = o.namespace
		}
		source, labels := injection.NamespaceFromCluster, map[string]string(nil)
		if !inspect.NamespaceExists(facts, ns) {
			if l, inFile := fileNamespaces[ns]; inFile {
				source, labels = injection.NamespaceFromFile, l
			} else {
				source = injection.NamespaceMissing
			}
		}
		rs, err := o.explainObject(ctx, facts, obj, ns, source, labels, false)
		if err != nil {
			return nil, err
		}
		reports = append(reports, rs...)
	}
	if len(reports) == 0 {
		return nil, &UsageError{Err: fmt.Errorf("%s: no pod or workload with a pod template found (%d other objects)", strings.Join(o.Filenames, ", "), skipped)}
	}
	return reports, nil
}
