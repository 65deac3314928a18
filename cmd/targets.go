package cmd

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// connect returns the namespace a command works in (from -n or the
// kubeconfig), whether it was given explicitly, and a client.
func connect(flags *genericclioptions.ConfigFlags) (string, bool, *inspect.Client, error) {
	ns, explicit, err := flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", false, nil, err
	}
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return "", false, nil, err
	}
	client, err := inspect.New(cfg)
	return ns, explicit, client, err
}

// resolveArgs looks up POD, TYPE/NAME or TYPE NAME as kubectl does (short
// names included); a single bare word is a pod.
func resolveArgs(flags *genericclioptions.ConfigFlags, namespace string, args []string) ([]*resource.Info, error) {
	words := args
	if len(words) == 1 && !strings.Contains(words[0], "/") {
		words = []string{"pod", words[0]}
	}
	infos, err := resource.NewBuilder(flags).Unstructured().
		NamespaceParam(namespace).DefaultNamespace().
		ResourceTypeOrNameArgs(true, words...).SingleResourceType().Flatten().
		Do().Infos()
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s not found in namespace %q", strings.Join(args, " "), namespace)
	}
	return infos, err
}

// resolvePods turns POD, TYPE/NAME or TYPE NAME into pods (a workload's:
// those its selector picks); single is set for one pod named.
func resolvePods(ctx context.Context, flags *genericclioptions.ConfigFlags, client *inspect.Client, namespace string, args []string) ([]corev1.Pod, bool, error) {
	infos, err := resolveArgs(flags, namespace, args)
	if err != nil {
		return nil, false, err
	}
	var pods []corev1.Pod
	for _, info := range infos {
		u := info.Object.(*unstructured.Unstructured)
		typed, err := scheme.Scheme.New(u.GroupVersionKind())
		if err != nil {
			return nil, false, &UsageError{Err: fmt.Errorf("%s creates no pods", describe(u.Object))}
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			return nil, false, err
		}
		if p, ok := typed.(*corev1.Pod); ok {
			pods = append(pods, *p)
			continue
		}
		kind, name, _, _, selector, ok := podTemplate(typed)
		if !ok {
			return nil, false, &UsageError{Err: fmt.Errorf("%s creates no pods: give a pod or a workload with a pod template", describe(u.Object))}
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
			return nil, false, fmt.Errorf("%s %s has no pods", kind, name)
		}
		return pods, false, nil
	}
	return pods, len(pods) == 1, nil
}

// pickPod picks the pod of a workload a one-pod command looks at, as
// kubectl logs TYPE/NAME does: running on a node first, then ready, then
// the oldest, then by name.
func pickPod(pods []corev1.Pod) *corev1.Pod {
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
