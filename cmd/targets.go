package cmd

import (
	"k8s.io/cli-runtime/pkg/genericclioptions"

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
