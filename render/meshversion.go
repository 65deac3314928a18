package render

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/engine/meshversion"
)

// MeshVersion prints what the cluster runs: the server's release, the
// mesh's revisions, its proxies by revision and version.
func MeshVersion(p *Printer, r *meshversion.Report) {
	fmt.Fprintf(p.Out, "\nServer Version: %s\n", Escape(r.Server))
	if len(r.Revisions) == 0 {
		fmt.Fprintln(p.Out, "Mesh: no Istio revision found (no injector ConfigMap istio-sidecar-injector[-REVISION])")
	} else {
		fmt.Fprintln(p.Out, "\nMesh (Istio control plane):")
		rows := make([][]string, 0, len(r.Revisions))
		for _, rv := range r.Revisions {
			modelled := "unknown"
			if rv.Modelled != nil {
				modelled = map[bool]string{true: "yes", false: "no"}[*rv.Modelled]
			}
			rows = append(rows, []string{Escape(rv.Name), Dash(Escape(rv.Version)), Dash(Escape(strings.Join(rv.Tags, ","))), modelled, Dash(Escape(rv.VersionSource))})
		}
		p.Table([]string{"REVISION", "VERSION", "TAGS", "MODELLED", "READ FROM"}, rows)
	}
	switch {
	case r.DataPlane == nil:
		fmt.Fprintln(p.Out, "\nData plane: unknown (the pods could not be listed)")
	case len(r.DataPlane) == 0:
		fmt.Fprintln(p.Out, "\nData plane: no pod has a sidecar")
	default:
		fmt.Fprintln(p.Out, "\nData plane (pods with a sidecar):")
		rows := make([][]string, 0, len(r.DataPlane))
		for _, g := range r.DataPlane {
			rows = append(rows, []string{Dash(Escape(g.Revision)), Dash(Escape(g.Version)), strconv.Itoa(g.Pods)})
		}
		p.Table([]string{"REVISION", "PROXY VERSION", "PODS"}, rows)
	}
}
