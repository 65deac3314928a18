package injection

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A matchCondition that cannot be evaluated on the pod is put down to the
// webhook whose conditions hold the expression quoted and whose selectors
// take the pod (red team round 32's 06), fixed by removing that condition;
// one whose selectors leave the pod out, or another message, is not.
func TestConditionRefusal(t *testing.T) {
	rules := []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{"CREATE"},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}
	expr := "object.metadata.labels['workload-type'] != 'batch'"
	hook := func(config, ns string) admissionregistrationv1.MutatingWebhookConfiguration {
		return admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: config},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "rev.namespace.sidecar-injector.istio.io", Rules: rules,
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": ns}},
				MatchConditions:   []admissionregistrationv1.MatchCondition{{Name: "other", Expression: "true"}, {Name: "skip-batch", Expression: expr}}}}}
	}
	f := &ClusterFacts{Webhooks: []admissionregistrationv1.MutatingWebhookConfiguration{hook("tag-elsewhere", "other"), hook("tag-teal", "db")}}
	w := &Workload{Kind: "StatefulSet", Namespace: "db", Name: "db", Labels: map[string]string{"app": "db"}}
	msg := `Create Pod db-0 in StatefulSet db failed error: pods "db-0" is forbidden: expression '` + expr + `' resulted in error: no such key: workload-type`
	checks := 0
	pr, ok := conditionRefusal(f, w, map[string]string{"team": "db"}, msg)
	checks++
	if !ok || !pr.condition || !strings.Contains(pr.by, "MutatingWebhookConfiguration tag-teal") || strings.Contains(pr.by, "tag-elsewhere") || !strings.Contains(pr.by, "matchCondition skip-batch") ||
		!strings.HasPrefix(pr.fix, `kubectl patch mutatingwebhookconfiguration tag-teal --type=json -p '[{"op":"remove","path":"/webhooks/0/matchConditions/1"}]'`) {
		t.Errorf("%+v, %v", pr, ok)
	}
	for name, tc := range map[string]struct {
		ns  map[string]string
		msg string
	}{
		"not selected":  {map[string]string{"team": "web"}, msg},
		"other message": {map[string]string{"team": "db"}, `pods "db-0" is forbidden: exceeded quota`},
	} {
		checks++
		if _, ok := conditionRefusal(f, w, tc.ns, tc.msg); ok {
			t.Errorf("%s: attributed", name)
		}
	}
	t.Logf("%d checks", checks)
}
