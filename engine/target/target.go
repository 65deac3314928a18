// Package target resolves what a command is asked about — POD, TYPE/NAME,
// TYPE NAME — as kubectl does, into objects and pods: one resolver for every
// command.
package target

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubectl-mesh/kubectl-mesh/engine"
	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// Args looks up POD, TYPE/NAME or TYPE NAME as kubectl does (short
// names included); a single bare word is a pod.
func Args(flags *genericclioptions.ConfigFlags, namespace string, args []string) ([]*resource.Info, error) {
	words := args
	if len(words) == 1 && !strings.Contains(words[0], "/") {
		words = []string{"pod", words[0]}
	}
	infos, err := resource.NewBuilder(flags).Unstructured().
		NamespaceParam(namespace).DefaultNamespace().
		ResourceTypeOrNameArgs(true, words...).SingleResourceType().Flatten().
		Do().Infos()
	if apierrors.IsNotFound(err) {
		hint := ""
		if w := strings.ToLower(words[0]); w == "pod" || w == "pods" || w == "po" || strings.HasPrefix(w, "pod/") || strings.HasPrefix(w, "pods/") || strings.HasPrefix(w, "po/") {
			// No controller records a refused pod: its manifest is what is left.
			hint = "; a pod that admission refused was never created: kubectl mesh diagnose -f MANIFEST --verify dry-runs its manifest and names what refuses it"
		}
		return nil, fmt.Errorf("%s not found in namespace %q%s", strings.Join(args, " "), namespace, hint)
	}
	return infos, err
}

// Pods turns POD, TYPE/NAME or TYPE NAME into pods (a workload's:
// those its selector picks); single is set for one pod named.
func Pods(ctx context.Context, flags *genericclioptions.ConfigFlags, client *inspect.Client, namespace string, args []string) ([]corev1.Pod, bool, error) {
	infos, err := Args(flags, namespace, args)
	if err != nil {
		return nil, false, err
	}
	var pods []corev1.Pod
	for _, info := range infos {
		u := info.Object.(*unstructured.Unstructured)
		typed, err := scheme.Scheme.New(u.GroupVersionKind())
		if err != nil {
			return nil, false, &engine.InputError{Err: fmt.Errorf("%s creates no pods", Describe(u.Object))}
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			return nil, false, err
		}
		if p, ok := typed.(*corev1.Pod); ok {
			pods = append(pods, *p)
			continue
		}
		if svc, ok := typed.(*corev1.Service); ok {
			if pods, err = ServicePods(ctx, client, svc); err != nil {
				return nil, false, err
			}
			return pods, false, nil
		}
		kind, name, _, _, selector, ok := PodTemplate(typed)
		if !ok {
			return nil, false, &engine.InputError{Err: fmt.Errorf("%s creates no pods: give a pod or a workload with a pod template", Describe(u.Object))}
		}
		if selector == nil {
			return nil, false, fmt.Errorf("%s %s has no pod selector: name one of its pods", kind, name)
		}
		sel, err := metav1.LabelSelectorAsSelector(selector)
		if err != nil {
			return nil, false, err
		}
		err = client.EachPodPage(ctx, info.Namespace, sel.String(), func(page []corev1.Pod) error {
			pods = append(pods, page...)
			return nil
		})
		if err != nil {
			return nil, false, inspect.ExplainAPIError(err, "list pods")
		}
		if len(pods) == 0 {
			return nil, false, fmt.Errorf("%s %s has no pods: nothing of it has started; kubectl mesh diagnose %s/%s -n %s says why", kind, name, strings.ToLower(kind), name, info.Namespace)
		}
		cur := Current(pods)
		out := make([]corev1.Pod, 0, len(cur))
		for _, p := range cur {
			out = append(out, *p)
		}
		return out, false, nil
	}
	return pods, len(pods) == 1, nil
}

// Current are a workload's pods but those being deleted, a rollout's old
// ones on their way out, unless every pod is (then they are all there is
// to say).
func Current(pods []corev1.Pod) []*corev1.Pod {
	var live, going []*corev1.Pod
	for i := range pods {
		if pods[i].DeletionTimestamp != nil {
			going = append(going, &pods[i])
		} else {
			live = append(live, &pods[i])
		}
	}
	if len(live) == 0 {
		return going
	}
	return live
}

// ServicePods are the pods a Service selects (its selector, in its
// namespace): an error when it has no selector or selects no pod.
func ServicePods(ctx context.Context, client *inspect.Client, svc *corev1.Service) ([]corev1.Pod, error) {
	if len(svc.Spec.Selector) == 0 {
		return nil, &engine.InputError{Err: fmt.Errorf("service/%s has no selector: its endpoints are set by hand, so it has no pods of its own; name the pods", svc.Name)}
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector).String()
	var pods []corev1.Pod
	err := client.EachPodPage(ctx, svc.Namespace, sel, func(page []corev1.Pod) error {
		pods = append(pods, page...)
		return nil
	})
	if err != nil {
		return nil, inspect.ExplainAPIError(err, "list pods")
	}
	if len(pods) == 0 {
		// A selector that reads a label Istio's injector sets, or one the
		// pods' controller sets per template: the pods its other keys
		// select are the ones meant, and their diagnosis says why the
		// Service misses them (diagnose.InjectedLabelMiss, TemplateLabelMiss).
		if meant := diagnose.WithoutTemplateLabels(diagnose.WithoutInjectedLabels(svc.Spec.Selector)); len(meant) > 0 && len(meant) < len(svc.Spec.Selector) {
			err := client.EachPodPage(ctx, svc.Namespace, labels.SelectorFromSet(meant).String(), func(page []corev1.Pod) error {
				pods = append(pods, page...)
				return nil
			})
			if err != nil {
				return nil, inspect.ExplainAPIError(err, "list pods")
			}
			if len(pods) > 0 {
				return pods, nil
			}
		}
		return nil, fmt.Errorf("service/%s selects no pods (selector %s) in namespace %q", svc.Name, sel, svc.Namespace)
	}
	return pods, nil
}

// Pick picks the pod of a workload a one-pod command looks at, as
// kubectl logs TYPE/NAME does: running on a node first, then ready, then
// the oldest, then by name.
func Pick(pods []corev1.Pod) *corev1.Pod {
	rank := func(p *corev1.Pod) int {
		r := 0
		if p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning {
			r += 2
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				r++
			}
		}
		return r
	}
	best := -1
	for i := range pods {
		p := &pods[i]
		if best < 0 {
			best = i
			continue
		}
		b := &pods[best]
		switch rp, rb := rank(p), rank(b); {
		case rp != rb:
			if rp > rb {
				best = i
			}
		case !p.CreationTimestamp.Equal(&b.CreationTimestamp):
			if p.CreationTimestamp.Before(&b.CreationTimestamp) {
				best = i
			}
		case p.Name < b.Name:
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	return &pods[best]
}

// PodTemplate extracts the pod template and pod selector of a pod-bearing
// object; ok is false for kinds that create no pods.
func PodTemplate(obj runtime.Object) (kind, name, namespace string, tmpl *corev1.PodTemplateSpec, selector *metav1.LabelSelector, ok bool) {
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

// SchemaGVK is an object's group, version and kind.
func SchemaGVK(content map[string]any) schema.GroupVersionKind {
	u := unstructured.Unstructured{Object: content}
	return u.GroupVersionKind()
}

// Describe names an object as "Kind name".
func Describe(content map[string]any) string {
	u := unstructured.Unstructured{Object: content}
	if u.GetName() == "" {
		return u.GetKind()
	}
	return u.GetKind() + " " + u.GetName()
}

// WithClaimVolumes is a StatefulSet's pod template as its controller makes
// its pods: a volume for each claim template (replacing a volume of the
// same name), the first pod's claim.
func WithClaimVolumes(s *appsv1.StatefulSet) *corev1.PodTemplateSpec {
	if len(s.Spec.VolumeClaimTemplates) == 0 {
		return &s.Spec.Template
	}
	t := s.Spec.Template.DeepCopy()
	for _, c := range s.Spec.VolumeClaimTemplates {
		v := corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name + "-" + s.Name + "-0"}}}
		replaced := false
		for i := range t.Spec.Volumes {
			if t.Spec.Volumes[i].Name == c.Name {
				t.Spec.Volumes[i], replaced = v, true
			}
		}
		if !replaced {
			t.Spec.Volumes = append(t.Spec.Volumes, v)
		}
	}
	return t
}
