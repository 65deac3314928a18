package diagnose

import (
	"fmt"
	"sort"
	"strings"
)

// CodeProtocolConflict: Services that select the pod give one port two
// protocols.
const CodeProtocolConflict = "KM-CONN-004"

func init() {
	register(&Spec{Code: CodeProtocolConflict, Title: "Services disagree on a port's protocol", Stage: CheckConnections, Kind: Static, Status: Warning,
		Istioctl: []string{"IST0116"}, Reads: []Fact{FactPod, FactServices},
		Means:   "Two Services that select the pod declare different protocols for one port: the same Service port, or the same target port on the pod. The proxy's inbound listener for a target port serves it with one protocol, so one Service's traffic is handled as the other's (HTTP parsed as TCP loses its routes and policy; raw TCP parsed as HTTP fails).",
		Detects: "The Services selecting the pod: each port's protocol (appProtocol, else the name's prefix, else sniffed), grouped by Service port and by the target port it resolves to on the pod.",
		Fixes:   "A kubectl patch that sets appProtocol on the ports that disagree with the protocol most ports declare (HTTP's family first on a tie); the comment says it is a choice, the protocol the app speaks on that port, and gives the other way.",
		Source:  "istioctl analyze IST0116; Istio docs, application requirements (a pod in several Services: the same port with different protocols is not supported); istio/istio#31885",
		Planted: "two Services on port 8080, one named http-web and one tcp-raw",
		run:     protocolConflict})
}

// portProto is one Service port's protocol as the proxy reads it.
type portProto struct {
	sp    svcPort
	idx   int // the port's index in its Service's spec.ports
	ns    string
	proto string
}

func (p portProto) label() string {
	return fmt.Sprintf("%s port %d (%s)", p.sp.svc, p.sp.port.Port, p.proto)
}

func protocolConflict(in *Input) []Finding {
	if in.Pod == nil || !in.injected() {
		return nil
	}
	if in.ServicesUnknown != "" {
		return servicesUnread(in)
	}
	var all []portProto
	for _, s := range in.Services {
		for i, sp := range s.Spec.Ports {
			proto := protocolOf(sp)
			if proto == "" {
				proto = "unnamed " + strings.ToLower(string(sp.Protocol))
				if sp.Protocol == "" {
					proto = "unnamed tcp"
				}
			}
			all = append(all, portProto{sp: svcPort{svc: s.Name, port: sp, target: targetOf(in.Pod, sp)}, idx: i, ns: s.Namespace, proto: proto})
		}
	}
	type group struct {
		what  string
		ports []portProto
	}
	var groups []group
	byPort, byTarget := map[int32][]portProto{}, map[int32][]portProto{}
	for _, p := range all {
		byPort[p.sp.port.Port] = append(byPort[p.sp.port.Port], p)
		if p.sp.target != 0 && tcp(p.sp.port) {
			byTarget[p.sp.target] = append(byTarget[p.sp.target], p)
		}
	}
	seen := map[string]bool{}
	add := func(what string, ps []portProto) {
		protos := map[string]bool{}
		var labels []string
		for _, p := range ps {
			protos[p.proto] = true
			labels = append(labels, p.label())
		}
		sort.Strings(labels)
		key := strings.Join(labels, "|")
		if len(protos) < 2 || seen[key] {
			return
		}
		seen[key] = true
		groups = append(groups, group{what: what, ports: ps})
	}
	for _, port := range sortedKeys(byPort) {
		add(fmt.Sprintf("Service port %d", port), byPort[port])
	}
	for _, t := range sortedKeys(byTarget) {
		add(fmt.Sprintf("target port %d on the pod", t), byTarget[t])
	}
	if len(groups) == 0 {
		return nil
	}
	var hits, fixes []string
	for _, g := range groups {
		var labels []string
		for _, p := range g.ports {
			labels = append(labels, p.label())
		}
		sort.Strings(labels)
		hits = append(hits, g.what+": "+quoteList(labels))
		fixes = append(fixes, protocolFix(g.what, g.ports)...)
	}
	if len(fixes) == 0 {
		fixes = []string{"give one of the Services another port: kubectl edit service -n " + in.Pod.Namespace + "   # a TCP and a UDP port share the number; only the TCP one goes through the proxy"}
	}
	return []Finding{{Evidence: "Services that select the pod give one port different protocols: " + strings.Join(hits, "; ") + "; the proxy serves a port with one protocol",
		Fix: strings.Join(fixes, "\n")}}
}

// protocolFix patches the ports that disagree with the protocol most of
// them declare, and names the other way as a comment: which protocol is
// right is what the app speaks, a choice.
func protocolFix(what string, ps []portProto) []string {
	count := map[string]int{}
	for _, p := range ps {
		if !strings.HasPrefix(p.proto, "unnamed") {
			count[p.proto]++
		}
	}
	protos := make([]string, 0, len(count))
	for p := range count {
		protos = append(protos, p)
	}
	sort.Slice(protos, func(i, j int) bool {
		a, b := protos[i], protos[j]
		if count[a] != count[b] {
			return count[a] > count[b]
		}
		if httpLike[a] != httpLike[b] {
			return httpLike[a]
		}
		return a < b
	})
	if len(protos) == 0 || count[protos[0]] == 0 {
		return nil
	}
	patch := func(proto string) []string {
		var out []string
		for _, p := range ps {
			if p.proto == proto || !tcp(p.sp.port) {
				continue
			}
			out = append(out, fmt.Sprintf(`kubectl patch service %s -n %s --type=json -p '[{"op":"add","path":"/spec/ports/%d/appProtocol","value":"%s"}]'`, p.sp.svc, p.ns, p.idx, proto))
		}
		return out
	}
	first := patch(protos[0])
	if len(first) == 0 {
		return nil
	}
	note := fmt.Sprintf("   # a choice: the protocol the app speaks on %s is %s", what, protos[0])
	if len(protos) > 1 {
		if other := patch(protos[1]); len(other) > 0 {
			note += fmt.Sprintf("; if it speaks %s: %s", protos[1], strings.Join(other, "; "))
		}
	}
	first[len(first)-1] += note
	return first
}

// sortedKeys are a port map's keys, in order.
func sortedKeys[V any](m map[int32]V) []int32 {
	out := make([]int32, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
