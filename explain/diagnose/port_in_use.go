package diagnose

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubectl-mesh/kubectl-mesh/explain/startup"
	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// undeclaredInUse are the proxy's ports that container c's command or args
// name without declaring them, when its log says it could not bind a port
// ("address already in use"): the app tried one of the proxy's, which the
// proxy holds. None when its log says nothing of the kind.
func undeclaredInUse(in *Input, c corev1.Container) []int32 {
	if !logSaysInUse(in, c.Name) {
		return nil
	}
	words := strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
	var out []int32
	for _, port := range istio.ReservedPorts {
		if slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == port }) {
			continue // declared: reservedPorts names it already
		}
		if wordPort(port).MatchString(words) {
			out = append(out, port)
		}
	}
	return out
}

// logSaysInUse: the last run's log of container name (this run's or the
// one before) says a bind failed because the address is in use.
func logSaysInUse(in *Input, name string) bool {
	if in.Startup == nil {
		return false
	}
	for _, list := range [][]startup.ContainerStartup{in.Startup.Containers, in.Startup.InitContainers} {
		for _, c := range list {
			if c.Name != name || c.Log == nil {
				continue
			}
			for _, l := range append(slices.Clone(c.Log.Current), c.Log.Previous...) {
				l = strings.ToLower(l)
				if strings.Contains(l, "address already in use") || strings.Contains(l, "address in use") || strings.Contains(l, "eaddrinuse") {
					return true
				}
			}
		}
	}
	return false
}
