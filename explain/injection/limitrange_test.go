package injection

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLimitRangeBy(t *testing.T) {
	lr := func(name string, typ corev1.LimitType, min, max, ratio corev1.ResourceList) corev1.LimitRange {
		return corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: typ, Min: min, Max: max, MaxLimitRequestRatio: ratio}}}}
	}
	cpu := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
	mem := func(q string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(q)}
	}
	floor := lr("floor", corev1.LimitTypeContainer, cpu("150m"), nil, nil)
	ceiling := lr("ceiling", corev1.LimitTypePod, nil, mem("1Gi"), nil)
	ratio := lr("burst", corev1.LimitTypeContainer, nil, nil, cpu("4"))
	other := lr("other", corev1.LimitTypeContainer, cpu("50m"), nil, nil)
	read := &ClusterFacts{LimitRanges: map[string][]corev1.LimitRange{"ns": {other, floor, ceiling, ratio}}}
	cases := []struct {
		name string
		f    *ClusterFacts
		msg  string
		want string
	}{
		{"minimum", read, `pods "a" is forbidden: minimum cpu usage per Container is 150m, but request is 100m`, "LimitRange floor (its min cpu per Container, 150m)"},
		{"pod maximum", read, `pods "a" is forbidden: maximum memory usage per Pod is 1Gi, but limit is 2Gi`, "LimitRange ceiling (its max memory per Pod, 1Gi)"},
		{"ratio", read, `pods "a" is forbidden: cpu max limit to request ratio per Container is 4, but provided ratio is 20.000000`, "LimitRange burst (its maxLimitRequestRatio cpu per Container, 4)"},
		{"two rules, two objects", read, `forbidden: [minimum cpu usage per Container is 150m, but request is 100m, cpu max limit to request ratio per Container is 4, but provided ratio is 20]`,
			"LimitRange burst (its maxLimitRequestRatio cpu per Container, 4) and LimitRange floor (its min cpu per Container, 150m)"},
		{"value no object has", read, `minimum cpu usage per Container is 200m, but request is 100m`, "the namespace's LimitRange"},
		{"a type no object has", read, `minimum cpu usage per Pod is 150m, but request is 100m`, "the namespace's LimitRange"},
		{"not read", &ClusterFacts{}, `minimum cpu usage per Container is 150m, but request is 100m`, "the namespace's LimitRange"},
		{"forbidden", &ClusterFacts{LimitRangesUnknown: map[string]string{"ns": "forbidden: the user may not list limitranges in namespace ns"}},
			`minimum cpu usage per Container is 150m, but request is 100m`, "the namespace's LimitRange (which one is unknown: forbidden: the user may not list limitranges in namespace ns)"},
		{"another namespace's", &ClusterFacts{LimitRanges: map[string][]corev1.LimitRange{"elsewhere": {floor}}}, `minimum cpu usage per Container is 150m, but request is 100m`, "the namespace's LimitRange"},
	}
	checked := 0
	for _, c := range cases {
		if !CitesLimitRange(c.msg) {
			t.Errorf("%s: CitesLimitRange(%q) = false", c.name, c.msg)
		}
		if got := limitRangeBy(c.f, "ns", c.msg); got != c.want {
			t.Errorf("%s: limitRangeBy = %q, want %q", c.name, got, c.want)
		}
		checked++
	}
	for _, msg := range []string{`exceeded quota: compute, requested: cpu=100m`, `pods "a" is forbidden: violates PodSecurity "baseline:latest"`} {
		if CitesLimitRange(msg) {
			t.Errorf("CitesLimitRange(%q) = true: not a LimitRange's refusal", msg)
		}
		checked++
	}
	t.Logf("%d refusals attributed", checked)
}
