package cmd

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

func (o *WhyInjectedOptions) record(r *injection.InjectionReport, src verifySource) {
	if !o.Verify {
		return
	}
	if o.sources == nil {
		o.sources = map[*injection.InjectionReport]verifySource{}
	}
	o.sources[r] = src
}

// recordLive keeps what a live pod's proof needs: its namespace, name and
// controller reference (not the whole pod: a sweep may hold many).
func (o *WhyInjectedOptions) recordLive(r *injection.InjectionReport, p *corev1.Pod) {
	if !o.Verify {
		return
	}
	meta := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, OwnerReferences: p.OwnerReferences}}
	o.record(r, verifySource{namespace: p.Namespace, base: p.Name, live: meta})
}

// verify proves each report with a server-side dry-run create of the pod it
// would be created from: one dry run per distinct template and namespace,
// one read per distinct controller, one access check per namespace.
func (o *WhyInjectedOptions) verify(ctx context.Context, reports []*injection.InjectionReport) error {
	allowed := map[string]error{}    // namespace → why not (nil: allowed)
	owners := map[string]ownerRead{} // namespace/kind/name → template
	proofs := map[string]proof{}     // template key → result

	// The access checks and the controller reads first, several at once.
	var namespaces []string
	var ownerPods []*corev1.Pod
	seenNS, seenOwner := map[string]bool{}, map[string]bool{}
	for _, r := range reports {
		src, ok := o.sources[r]
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
		can, err := o.client.CanCreatePods(ctx, namespaces[i])
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
		return firstErr
	}
	inParallel(len(ownerPods), func(i int) {
		p := ownerPods[i]
		ref := metav1.GetControllerOf(p)
		mu.Lock()
		can := allowed[p.Namespace] == nil
		mu.Unlock()
		if !can {
			return
		}
		t, owner, found, err := o.client.OwnerTemplate(ctx, p)
		mu.Lock()
		owners[p.Namespace+"/"+ref.Kind+"/"+ref.Name] = ownerRead{tmpl: t, owner: owner, found: found, err: err}
		mu.Unlock()
	})

	// Then each report finds its template; the dry runs run after, several at once.
	type pending struct {
		ns, base string
		tmpl     *corev1.PodTemplateSpec
	}
	jobs := map[string]pending{}
	keys := map[*injection.InjectionReport]string{}
	for _, r := range reports {
		src, ok := o.sources[r]
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
		key, err := templateKey(src.namespace, tmpl)
		if err != nil {
			return err
		}
		if _, ok := jobs[key]; !ok {
			jobs[key] = pending{ns: src.namespace, base: base, tmpl: tmpl}
		}
		keys[r] = key
	}
	order := make([]string, 0, len(jobs))
	for k := range jobs {
		order = append(order, k)
	}
	inParallel(len(order), func(i int) {
		j := jobs[order[i]]
		pr := o.dryRun(ctx, j.ns, j.base, j.tmpl)
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
		v.Compare(r)
		r.Verified = &v
	}
	return nil
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
func (o *WhyInjectedOptions) dryRun(ctx context.Context, ns, base string, tmpl *corev1.PodTemplateSpec) proof {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: base + "-", Namespace: ns, Labels: tmpl.Labels, Annotations: tmpl.Annotations},
		Spec:       *tmpl.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = "" // a re-created pod is scheduled again
	admitted, err := o.client.DryRunCreate(ctx, pod)
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
	case apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err),
		apierrors.IsInternalError(err) && !strings.Contains(err.Error(), "admission webhook"):
		// The apiserver could not answer: no proof, and not a refusal.
		return proof{err: fmt.Errorf("dry-run create in namespace %s: %w", ns, err)}
	case apierrors.ReasonForError(err) == metav1.StatusReasonUnknown && !strings.Contains(err.Error(), "admission"):
		return proof{err: fmt.Errorf("dry-run create in namespace %s: %w", ns, err)}
	}
	// Admission refused it: a webhook denied it or could not be called,
	// PodSecurity, a quota, a missing service account, … — as it would a real pod.
	return proof{v: injection.RefusedPod(err.Error())}
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
