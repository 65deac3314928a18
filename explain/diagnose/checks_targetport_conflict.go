package diagnose

import (
	"fmt"
	"sort"
	"strings"
)

// CodeTargetPortConflict: Services send different Service ports to one
// target port of the pod.
const CodeTargetPortConflict = "KM-CONN-005"

func init() {
	register(&Spec{Code: CodeTargetPortConflict, Title: "one target port behind two Service ports", Stage: CheckConnections, Kind: Static, Status: Warning,
		Istioctl: []string{"IST0137"}, Reads: []Fact{FactPod, FactServices},
		Means:   "Services that select the pod send different Service ports to the same target port: the proxy's inbound listener for that port takes one port's protocol and routes.",
		Detects: "The Services selecting the pod, their ports and the target ports they resolve to on the pod.",
		Fixes:   "A kubectl patch that gives the other Services' ports the Service port most of them use, with a comment that it is a choice (their clients then use that port) and the other way (a target port of its own, which the app must serve).",
		Source:  "istioctl analyze IST0137 DeploymentConflictingPorts",
		Planted: "Service A 80→8080 and Service B 8080→8080",
		run:     targetPortConflict})
}

// targetUse is one Service port sending to a target port.
type targetUse struct {
	svc, ns string
	idx     int
	port    int32
}

func targetPortConflict(in *Input) []Finding {
	if in.Pod == nil || !in.injected() {
		return nil
	}
	byTarget := map[int32][]targetUse{}
	for _, s := range in.Services {
		for i, sp := range s.Spec.Ports {
			t := targetOf(in.Pod, sp)
			if t == 0 || !tcp(sp) {
				continue
			}
			byTarget[t] = append(byTarget[t], targetUse{svc: s.Name, ns: s.Namespace, idx: i, port: sp.Port})
		}
	}
	var hits, fixes []string
	for _, t := range sortedKeys(byTarget) {
		uses := byTarget[t]
		count := map[int32]int{}
		for _, u := range uses {
			count[u.port]++
		}
		if len(count) < 2 {
			continue
		}
		var parts []string
		for _, u := range uses {
			parts = append(parts, fmt.Sprintf("%s port %d", u.svc, u.port))
		}
		sort.Strings(parts)
		hits = append(hits, fmt.Sprintf("target port %d from %s", t, quoteList(parts)))
		ports := sortedKeys(count)
		sort.SliceStable(ports, func(i, j int) bool { return count[ports[i]] > count[ports[j]] })
		keep := ports[0]
		hasKeep := map[string]bool{} // the Services that already have a port numbered keep
		for _, u := range uses {
			if u.port == keep {
				hasKeep[u.svc] = true
			}
		}
		var patches []string
		for i := len(uses) - 1; i >= 0; i-- { // a Service's higher indexes first: a removal shifts the ones after it
			u := uses[i]
			switch {
			case u.port == keep:
			case hasKeep[u.svc]:
				// Two ports of one Service cannot share a number: this
				// one goes.
				patches = append(patches, fmt.Sprintf(`kubectl patch service %s -n %s --type=json -p '[{"op":"remove","path":"/spec/ports/%d"}]'`, u.svc, u.ns, u.idx))
			default:
				patches = append(patches, fmt.Sprintf(`kubectl patch service %s -n %s --type=json -p '[{"op":"replace","path":"/spec/ports/%d/port","value":%d}]'`, u.svc, u.ns, u.idx, keep))
				hasKeep[u.svc] = true
			}
		}
		patches[len(patches)-1] += fmt.Sprintf("   # a choice: their clients then use port %d; or give each Service port a target port of its own that the app serves", keep)
		fixes = append(fixes, patches...)
	}
	if len(hits) == 0 {
		return nil
	}
	return []Finding{{Evidence: strings.Join(hits, "; ") + ": the proxy's inbound listener for the target port takes one of them",
		Fix: strings.Join(fixes, "\n")}}
}
