package diagnose

import (
	"regexp"
	"strings"
)

// podDelete is a fix whose first line deletes one pod for its controller
// to make it again ("kubectl delete pod web-0 -n shop   # its StatefulSet
// web re-creates it, …").
var podDelete = regexp.MustCompile(`^kubectl delete pod ([a-z0-9][-a-z0-9.]*) -n ([a-z0-9][-a-z0-9]*)(   # .*)?$`)

// MergePodDeletes gives the pods of one named workload whose first finding
// is the same, each fixed by deleting that pod, one fix that deletes them
// all: a StatefulSet held by a partition or a DaemonSet under OnDelete
// replaces none of them on its own, and a fix pasted for the first pod
// would leave the others as they are.
func MergePodDeletes(ds []*Diagnosis) {
	type group struct {
		ns, comment string
		names       []string
		ds          []*Diagnosis
	}
	groups := map[string]*group{}
	var order []string
	for _, d := range ds {
		if d.First == "" || d.Code == "" {
			continue
		}
		first, _, _ := strings.Cut(d.Fix, "\n")
		m := podDelete.FindStringSubmatch(first)
		if m == nil {
			continue
		}
		key := d.Code + "\x00" + m[2] + "\x00" + m[3]
		g := groups[key]
		if g == nil {
			g = &group{ns: m[2], comment: m[3]}
			groups[key] = g
			order = append(order, key)
		}
		g.names = append(g.names, m[1])
		g.ds = append(g.ds, d)
	}
	for _, key := range order {
		g := groups[key]
		if len(g.names) < 2 {
			continue
		}
		line := "kubectl delete pod " + strings.Join(g.names, " ") + " -n " + g.ns + strings.Replace(g.comment, "re-creates it", "re-creates them", 1)
		for _, d := range g.ds {
			_, rest, more := strings.Cut(d.Fix, "\n")
			d.Fix = line
			if more {
				d.Fix += "\n" + rest
			}
		}
	}
}
