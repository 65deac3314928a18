// Package upgrade is the upgrade-plan engine: for each workload in scope it
// reads the pod it has now, asks the target revision's real injector what
// its template becomes, proves the result with a dry-run create through the
// apiserver's admission chain, and hands both pods to explain/upgrade. It
// changes nothing.
package upgrade

import (
	"context"
	"fmt"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/explain/upgrade"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Request says what to plan: a namespace ("" with AllNamespaces for every
// one), a label selector on the pods, named workloads (kind/name), and the
// target (a revision or a tag; "" keeps what selects each now).
type Request struct {
	Namespace     string
	AllNamespaces bool
	Selector      string
	Names         []string
	To            string
}

// Engine plans; it keeps nothing between calls.
type Engine struct {
	Client *inspect.Client
}

// candidate is one workload to plan: its template (nil for a bare pod with
// no applied manifest) and its newest pod.
type candidate struct {
	kind, namespace, name string
	template              *corev1.PodTemplateSpec
	pod                   *corev1.Pod
	// done: a Job that has finished (nothing to restart).
	done bool
	// deletesFirst: its rollout deletes an old pod before creating its
	// replacement.
	deletesFirst bool
	// paused: a paused Deployment (a rollout restart is refused); held
	// says why a rollout restart replaces no pod (OnDelete, a partition,
	// a ReplicaSet), selector its pods' selector.
	paused         bool
	held, selector string
}

// Plan plans the move of req's workloads to req.To.
func (e *Engine) Plan(ctx context.Context, req Request) (*upgrade.Plan, error) {
	facts, err := e.Client.MeshFacts(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the mesh's configuration: %w", err)
	}
	plan := &upgrade.Plan{To: req.To}
	if req.To != "" {
		if plan.Revision, err = resolveTarget(facts, req.To); err != nil {
			return nil, err
		}
	}
	ns := req.Namespace
	if req.AllNamespaces {
		ns = ""
	}
	cands, err := e.candidates(ctx, ns, req)
	if err != nil {
		return nil, err
	}
	var nsNames []string
	for _, c := range cands {
		nsNames = append(nsNames, c.namespace)
	}
	if err := e.Client.ResolveNamespaces(ctx, facts, nsNames...); err != nil {
		return nil, err
	}
	relabels := map[string]string{}
	proofs := map[string]*proof{}
	for _, c := range cands {
		w, ok := e.planOne(ctx, facts, req.To, c, relabels, proofs) // labelled as asked: a tag keeps the namespace on the tag
		if !ok {
			plan.Skipped++
			continue
		}
		plan.Workloads = append(plan.Workloads, w)
	}
	if unread := e.pinnedServices(ctx, ns, cands, relabels); unread != "" {
		plan.Incomplete = append(plan.Incomplete, unread)
	}
	keys := make([]string, 0, len(relabels))
	for k := range relabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		plan.Relabels = append(plan.Relabels, relabels[k])
	}
	plan.Finish()
	return plan, nil
}

// resolveTarget is the revision a revision name or a tag stands for: the
// one whose injector webhook configuration carries it.
func resolveTarget(f *injection.ClusterFacts, to string) (string, error) {
	var known []string
	for _, c := range f.Webhooks {
		rev, tag := c.Labels[istio.LabelRev], c.Labels[istio.LabelTag]
		if !hasIstioWebhook(c) {
			continue
		}
		if tag != "" {
			known = append(known, "tag "+tag+" (revision "+rev+")")
			if tag == to {
				return rev, nil
			}
			continue
		}
		if rev == "" {
			rev = "default"
		}
		known = append(known, "revision "+rev)
		if rev == to {
			return rev, nil
		}
	}
	sort.Strings(known)
	return "", fmt.Errorf("no revision or tag %q: the cluster's injectors are %s", to, strings.Join(known, ", "))
}

func hasIstioWebhook(c admissionregistrationv1.MutatingWebhookConfiguration) bool {
	for _, w := range c.Webhooks {
		if strings.HasSuffix(w.Name, "sidecar-injector.istio.io") {
			return true
		}
	}
	return false
}

// candidates lists the workloads in scope with a template, and bare pods:
// one LIST per kind and one of pods.
func (e *Engine) candidates(ctx context.Context, ns string, req Request) ([]candidate, error) {
	sel := labels.Everything()
	if req.Selector != "" {
		s, err := labels.Parse(req.Selector)
		if err != nil {
			return nil, err
		}
		sel = s
	}
	wls, _, err := e.Client.Workloads(ctx, ns)
	if err != nil {
		return nil, err
	}
	crons, err := e.Client.Proto.BatchV1().CronJobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, inspect.ExplainAPIError(err, "list cronjobs")
	}
	var pods []corev1.Pod
	if err := e.Client.EachPodPage(ctx, ns, "", func(page []corev1.Pod) error {
		pods = append(pods, page...)
		return nil
	}); err != nil {
		return nil, err
	}
	newest := map[string]*corev1.Pod{}
	var bare []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		o := inspect.OwnerOf(p)
		if o == nil {
			bare = append(bare, p)
			continue
		}
		k := p.Namespace + "/" + o.Kind + "/" + o.Name
		if cur := newest[k]; cur == nil || p.CreationTimestamp.After(cur.CreationTimestamp.Time) {
			newest[k] = p
		}
	}
	var out []candidate
	for i := range wls {
		w := &wls[i].WorkloadState
		if w.Template == nil || !sel.Matches(labels.Set(w.Template.Labels)) {
			continue
		}
		if cron, ok := strings.CutPrefix(w.Controller, "CronJob/"); ok && cron != "" {
			continue // its CronJob's template is planned
		}
		c := candidate{kind: w.Kind, namespace: w.Namespace, name: w.Name, template: w.Template, pod: newest[w.Namespace+"/"+w.Kind+"/"+w.Name], deletesFirst: w.DeletesFirst,
			paused: w.Paused, held: wls[i].Held, selector: wls[i].Selector}
		c.done = w.Kind == "Job" && w.Desired == 0
		out = append(out, c)
	}
	for i := range crons.Items {
		cj := &crons.Items[i]
		t := &cj.Spec.JobTemplate.Spec.Template
		if !sel.Matches(labels.Set(t.Labels)) {
			continue
		}
		out = append(out, candidate{kind: "CronJob", namespace: cj.Namespace, name: cj.Name, template: t, pod: cronPod(cj, newest)})
	}
	for _, p := range bare {
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, candidate{kind: "Pod", namespace: p.Namespace, name: p.Name, pod: p, template: appliedTemplate(p)})
		}
	}
	out = named(out, req.Names)
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].namespace+"/"+out[i].kind+"/"+out[i].name < out[j].namespace+"/"+out[j].kind+"/"+out[j].name
	})
	return out, nil
}

// cronPod is the newest pod of a CronJob's Jobs.
func cronPod(cj *batchv1.CronJob, newest map[string]*corev1.Pod) *corev1.Pod {
	var best *corev1.Pod
	for k, p := range newest {
		if !strings.HasPrefix(k, cj.Namespace+"/Job/"+cj.Name+"-") {
			continue
		}
		if best == nil || p.CreationTimestamp.After(best.CreationTimestamp.Time) {
			best = p
		}
	}
	return best
}

// named keeps the candidates the user named (kind/name, or a pod's name);
// all of them when none was.
func named(cands []candidate, names []string) []candidate {
	if len(names) == 0 {
		return cands
	}
	want := map[string]bool{}
	for _, n := range names {
		want[strings.ToLower(n)] = true
	}
	var out []candidate
	for _, c := range cands {
		if want[strings.ToLower(c.kind)+"/"+c.name] || c.kind == "Pod" && want[c.name] {
			out = append(out, c)
		}
	}
	return out
}
