package inject

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
)

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
	switch a := e.explainRefused(ctx, e.facts, w); {
	case a.CreationBlocked:
		v.BlockedBy, v.Fix = a.BlockedBy, a.Fix
		if a.RefusedBy != nil {
			// A policy refusing what the injector adds: which part, and
			// the mesh's knob it admits.
			e.ProveWithoutSidecar(ctx, a, tmpl)
			v.WithoutSidecar, v.MeshSide = a.RefusedBy.WithoutSidecar, a.RefusedBy.MeshSide
		}
	case a.RefusedBy != nil:
		v.RefusedBy, v.Fix, v.Condition = a.RefusedBy.By, a.RefusedBy.Fix, a.RefusedBy.Condition
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
