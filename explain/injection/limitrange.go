package injection

import (
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// limitRangeRule is one rule of a LimitRange the apiserver's LimitRanger
// cites in its refusal: "minimum cpu usage per Container is 150m, but
// request is 100m", "maximum memory usage per Pod is 1Gi, but limit is
// 2Gi", "cpu max limit to request ratio per Container is 4, but …".
var limitRangeRule = regexp.MustCompile(`(?:(minimum|maximum) (\S+) usage per (Container|Pod|PersistentVolumeClaim) is ([0-9][0-9.]*[a-zA-Z]*)|(\S+) max limit to request ratio per (Container|Pod) is ([0-9][0-9.]*))`)

// CitesLimitRange says a refusal's message is a LimitRange's (its
// namespace's LimitRanges then say which one).
func CitesLimitRange(msg string) bool {
	return limitRangeRule.MatchString(msg)
}

// limitRangeBy names the LimitRanges of namespace ns whose rules the
// refusal msg cites (the rule's type, resource and value equal): "the
// namespace's LimitRange" when they were not read or none has that value,
// with why it is unknown.
func limitRangeBy(f *ClusterFacts, ns, msg string) string {
	if f != nil {
		if why, ok := f.LimitRangesUnknown[ns]; ok {
			return "the namespace's LimitRange (which one is unknown: " + why + ")"
		}
	}
	if f == nil || f.LimitRanges == nil {
		return "the namespace's LimitRange"
	}
	var names []string
	seen := map[string]bool{}
	for _, m := range limitRangeRule.FindAllStringSubmatch(msg, -1) {
		for _, lr := range f.LimitRanges[ns] {
			if rule, ok := citedRule(lr, m); ok && !seen[lr.Name] {
				seen[lr.Name] = true
				names = append(names, "LimitRange "+lr.Name+" ("+rule+")")
			}
		}
	}
	if len(names) == 0 {
		return "the namespace's LimitRange"
	}
	sort.Strings(names)
	return strings.Join(names, " and ")
}

// citedRule says lr has the rule m (a limitRangeRule match) cites, and
// which: "its min cpu per Container, 150m".
func citedRule(lr corev1.LimitRange, m []string) (string, bool) {
	field, res, typ, value := "", m[2], m[3], m[4]
	switch m[1] {
	case "minimum":
		field = "min"
	case "maximum":
		field = "max"
	default:
		field, res, typ, value = "maxLimitRequestRatio", m[5], m[6], m[7]
	}
	want, err := resource.ParseQuantity(value)
	if err != nil {
		return "", false
	}
	for _, item := range lr.Spec.Limits {
		if string(item.Type) != typ {
			continue
		}
		list := item.Min
		switch field {
		case "max":
			list = item.Max
		case "maxLimitRequestRatio":
			list = item.MaxLimitRequestRatio
		}
		if q, ok := list[corev1.ResourceName(res)]; ok && q.Cmp(want) == 0 {
			return "its " + field + " " + res + " per " + typ + ", " + value, true
		}
	}
	return "", false
}
