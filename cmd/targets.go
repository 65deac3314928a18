package cmd

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/resource"

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
