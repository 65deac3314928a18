// Package meshversion is the engine of `kubectl mesh version`: the
// server's Kubernetes release, the mesh's control-plane revisions and the
// releases its proxies run.
package meshversion

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/injection"
	"github.com/kubectl-mesh/kubectl-mesh/inspect"
)

// Report is what the cluster runs.
type Report struct {
	// Server is the apiserver's gitVersion.
	Server string `json:"serverVersion"`
	// Revisions are the mesh's control-plane revisions.
	Revisions []injection.RevisionInfo `json:"revisions"`
	// DataPlane counts the injected pods by revision and proxy version;
	// null when the pods could not be listed (Incomplete says why).
	DataPlane  []injection.ProxyGroup `json:"dataPlane"`
	Incomplete []string               `json:"incomplete,omitempty"`
}

// Engine reads it: the server's version, the mesh's facts and the pods
// Istio's injector labelled (security.istio.io/tlsMode), page by page.
type Engine struct {
	Client *inspect.Client
}

// Run reads what the cluster runs.
func (e *Engine) Run(ctx context.Context) (*Report, error) {
	v, err := e.Client.Kube.Discovery().ServerVersion()
	if err != nil {
		return nil, err
	}
	r := &Report{Server: v.GitVersion}
	facts, err := e.Client.MeshFacts(ctx)
	if err != nil {
		return nil, err
	}
	r.Revisions = injection.Revisions(facts)
	for k, why := range facts.Unknown {
		r.Incomplete = append(r.Incomplete, k+": "+why)
	}
	groups := map[[2]string]int{}
	err = e.Client.EachPodPage(ctx, "", "security.istio.io/tlsMode", func(pods []corev1.Pod) error {
		injection.Proxies(groups, pods)
		return nil
	})
	if err != nil {
		r.Incomplete = append(r.Incomplete, inspect.ExplainAPIError(err, "list pods (all namespaces)").Error())
		return r, nil
	}
	r.DataPlane = injection.ProxyGroups(groups)
	return r, nil
}
