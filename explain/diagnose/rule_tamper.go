package diagnose

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ruleCommand is a shell command segment that runs a netfilter tool.
var ruleCommand = regexp.MustCompile(`^(sudo\s+|exec\s+)?(iptables|ip6tables|iptables-legacy|iptables-nft|ip6tables-legacy|ip6tables-nft|iptables-restore|ip6tables-restore|nft)(\s|$)`)

// shellSeparator splits a script into commands: ;, &&, || and new lines.
var shellSeparator = regexp.MustCompile(`\s*(;|&&|\|\||\n)\s*`)

// undoesCapture says what a netfilter command does to the capture rules,
// "" when it leaves them alone as far as its words show: a jump to an
// ISTIO_* chain deleted, the nat table or an ISTIO_* chain flushed or
// deleted, an ACCEPT or RETURN put in the nat table's PREROUTING, OUTPUT or
// ISTIO_* chains (connections it takes never reach the proxy).
func undoesCapture(cmd string) string {
	f := strings.Fields(cmd)
	has := func(words ...string) bool {
		for _, x := range f {
			for _, w := range words {
				if x == w {
					return true
				}
			}
		}
		return false
	}
	nat := has("nat") && has("-t", "--table") || strings.Contains(cmd, "ISTIO_")
	switch {
	case has("nft"):
		if (has("flush") || has("delete")) && (strings.Contains(cmd, "nat") || strings.Contains(strings.ToLower(cmd), "istio")) {
			return "deletes or flushes nft's nat rules"
		}
	case !nat:
	case has("-D", "--delete") && strings.Contains(cmd, "ISTIO_"):
		return "deletes a jump to the capture chains"
	case has("-F", "--flush", "-X", "--delete-chain"):
		return "flushes or deletes the nat table's capture rules"
	case has("-I", "--insert", "-A", "--append") && has("ACCEPT", "RETURN") && (has("PREROUTING", "OUTPUT") || strings.Contains(cmd, "ISTIO_")):
		return "puts an ACCEPT or RETURN rule among the capture rules: what it takes skips the proxy"
	}
	return ""
}

// captureTamper is what a container's command does to the capture rules,
// and its command without the netfilter calls that do it: where in the
// container it is (command or args, index) and the new value. ok is false
// when its command does nothing of the kind as far as its words show, or
// the calls cannot be taken out of a shell script of its own (said is still
// set when they undo the capture).
func captureTamper(c corev1.Container) (said, field string, index int, value string, ok bool) {
	for _, part := range []struct {
		field string
		list  []string
	}{{"command", c.Command}, {"args", c.Args}} {
		for i, s := range part.list {
			kept, what, found := dropRuleCalls(s)
			if what == "" {
				continue
			}
			said = what
			if found && strings.TrimSpace(kept) != "" && !strings.Contains(kept, "'") {
				return said, part.field, i, kept, true
			}
		}
	}
	return said, "", 0, "", false
}

// dropRuleCalls is a script without its netfilter commands that undo the
// capture; what they do; found when there was one to take out of several.
func dropRuleCalls(script string) (kept, what string, found bool) {
	parts := shellSeparator.Split(script, -1)
	seps := shellSeparator.FindAllString(script, -1)
	var out strings.Builder
	first := true
	for i, p := range parts {
		seg := strings.TrimSpace(p)
		if ruleCommand.MatchString(seg) {
			if w := undoesCapture(seg); w != "" {
				if what == "" {
					what = w
				}
				found = true
				continue
			}
		}
		if !first && i > 0 {
			out.WriteString(seps[i-1])
		}
		out.WriteString(p)
		first = false
	}
	if !found {
		return script, "", false
	}
	return out.String(), what, len(parts) > 1
}

// tamperFix is the JSON patch of what makes the pod that takes the calls
// out of the container's command (tc is the container as the template has
// it, at idx of list), and its NET_ADMIN when nothing left in the script
// runs a netfilter tool ("" when it cannot be written).
func tamperFix(in *Input, owner, list string, idx int, tc corev1.Container, field string, index int, value string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // && and > read as written
	if err := enc.Encode(value); err != nil || strings.Contains(b.String(), "'") {
		return ""
	}
	v := strings.TrimSpace(b.String())
	base := fmt.Sprintf("/spec/%s%s/%d", jobPath(owner), list, idx)
	ops := []string{fmt.Sprintf(`{"op":"replace","path":"%s/%s/%d","value":%s}`, base, field, index, v)}
	said := "the netfilter calls that undo the capture taken out of " + tc.Name + "'s " + field + " (the rest kept)"
	if sc := tc.SecurityContext; sc != nil && sc.Capabilities != nil && !ruleCall(value) {
		for i := len(sc.Capabilities.Add) - 1; i >= 0; i-- {
			if a := sc.Capabilities.Add[i]; a == "NET_ADMIN" || a == "CAP_NET_ADMIN" {
				ops = append(ops, fmt.Sprintf(`{"op":"remove","path":"%s/securityContext/capabilities/add/%d"}`, base, i))
				said += ", and its NET_ADMIN, which nothing left in it uses"
			}
		}
	}
	return overridePatch(in, owner, "["+strings.Join(ops, ",")+"]", said+"; a choice: or keep "+tc.Name+" as it is and let it leave Istio's rules alone")
}

// ruleCall says a script still runs a netfilter tool.
func ruleCall(script string) bool {
	for _, p := range shellSeparator.Split(script, -1) {
		if ruleCommand.MatchString(strings.TrimSpace(p)) {
			return true
		}
	}
	return false
}
