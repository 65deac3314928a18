package upgrade

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/explain/diagnose"
)

// Whether a workload's pods start after the move.
const (
	StartsYes     = "yes"
	StartsNo      = "no"
	StartsUnknown = "unknown"
	// StartsWarning: it starts, with a hazard a check names.
	StartsWarning = "yes, with warnings"
)

// Workload is one workload's plan: its pod now, the pod the target's
// injector makes of its template, what changes, and whether it starts.
type Workload struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Now is a current pod's mesh parts (nil: it has no pod now); NowPod
	// names that pod.
	Now    *Side  `json:"now"`
	NowPod string `json:"nowPod,omitempty"`
	// After is the pod the target's injector made (nil: unknown, see
	// AfterUnknown); Selected says which revision and webhook select it
	// after the move, or why none does.
	After        *Side  `json:"after"`
	AfterUnknown string `json:"afterUnknown,omitempty"`
	Selected     string `json:"selected"`
	// ProvedBy says how After was made ("injector of revision canary
	// (https://…/inject), then a dry-run create").
	ProvedBy string   `json:"provedBy,omitempty"`
	Changes  []Change `json:"changes"`
	Compared int      `json:"compared"`
	// Starts is StartsYes, StartsNo, StartsWarning or StartsUnknown;
	// Findings say why (the catalogue's codes).
	Starts   string             `json:"starts"`
	Findings []diagnose.Finding `json:"findings,omitempty"`
	// NowFindings are what is wrong with the pod as it is, whatever the
	// move: a proxy outside Istio's skew with its control plane, a revision
	// that no longer exists.
	NowFindings []diagnose.Finding `json:"nowFindings,omitempty"`
	// Restart is the command that re-creates its pods under the target.
	Restart string `json:"restart"`
}

// Plan is the answer for a target revision over a set of workloads.
type Plan struct {
	// To is what was asked (a revision or a tag), Revision the revision it
	// is; "" when each workload keeps what selects it now.
	To       string `json:"to,omitempty"`
	Revision string `json:"revision,omitempty"`
	// Relabels are the label changes that move namespaces (and pod
	// templates) to the target: run first.
	Relabels  []string   `json:"relabels"`
	Workloads []Workload `json:"workloads"`
	// Steps are every command in a safe order: the relabels, then the
	// restarts, those that will not start first with their fix.
	Steps []string `json:"steps"`
	// Skipped counts the workloads in scope that are not in the mesh now
	// and will not be after.
	Skipped int `json:"skipped"`
	// Compared is how many fields were compared in all.
	Compared int `json:"compared"`
	// Incomplete names what could not be read.
	Incomplete []string `json:"incomplete,omitempty"`
}

// rank orders workloads for the plan: those that will not start first,
// then unknown, then with warnings, then the rest.
func rank(s string) int {
	switch s {
	case StartsNo:
		return 0
	case StartsUnknown:
		return 1
	case StartsWarning:
		return 2
	}
	return 3
}

// Finish orders the workloads (those that will not start first) and writes
// the steps: relabels, then each restart, a failing one with its fix
// before it.
func (p *Plan) Finish() {
	sort.SliceStable(p.Workloads, func(i, j int) bool {
		a, b := p.Workloads[i], p.Workloads[j]
		if rank(a.Starts) != rank(b.Starts) {
			return rank(a.Starts) < rank(b.Starts)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Kind+"/"+a.Name < b.Kind+"/"+b.Name
	})
	p.Steps = append([]string(nil), p.Relabels...)
	p.Compared = 0
	for _, w := range p.Workloads {
		p.Compared += w.Compared
		if w.Starts == StartsNo {
			for _, f := range w.Findings {
				if f.Status == diagnose.Fail && f.Fix != "" {
					step := fmt.Sprintf("# %s/%s -n %s will not start (%s): fix it first", strings.ToLower(w.Kind), w.Name, w.Namespace, f.Code)
					if slices.Contains(p.Steps, f.Fix) {
						step = fmt.Sprintf("# %s/%s -n %s will not start (%s): the fix above", strings.ToLower(w.Kind), w.Name, w.Namespace, f.Code)
						p.Steps = append(p.Steps, step)
						break
					}
					fix := f.Fix
					if !strings.HasPrefix(fix, "kubectl ") {
						fix = "# " + fix // words, not a command
					}
					p.Steps = append(p.Steps, step, fix)
					break
				}
			}
		}
		if w.Restart != "" {
			p.Steps = append(p.Steps, w.Restart)
		}
	}
}

// Worst is the plan's status for --fail-on: fail when a workload will not
// start, unknown when whether one starts is unknown, warning when one has
// a hazard or changes, pass otherwise.
func (p *Plan) Worst() string {
	worst := diagnose.Pass
	for _, w := range p.Workloads {
		switch w.Starts {
		case StartsNo:
			return diagnose.Fail
		case StartsUnknown:
			worst = diagnose.Unknown
		case StartsWarning:
			if worst == diagnose.Pass {
				worst = diagnose.Warning
			}
		}
	}
	return worst
}
