package injection

import (
	"slices"
	"testing"
)

// Overlapping webhooks: the configuration not of the revision the labels
// select is the extra one (a leftover revision's, matching the default's
// namespaces); a tag of the selected revision is not extra, and when no
// matching webhook is of that revision, none is named.
func TestOverlapExtra(t *testing.T) {
	leftover := func(f *ClusterFacts) {
		f.Webhooks = append(f.Webhooks, mwc("istio-sidecar-injector-1-30", map[string]string{"istio.io/rev": "canary"}, defaultHooks("istiod-canary", false)))
	}
	tagged := func(f *ClusterFacts) {
		f.Webhooks = append(f.Webhooks, mwc("istio-revision-tag-default", map[string]string{"istio.io/rev": "canary", "istio.io/tag": "default"},
			append(revHooks("default", "istiod-canary"), defaultHooks("istiod-canary", false)...)))
	}
	cases := []struct {
		name     string
		nsLabels map[string]string
		facts    func(f *ClusterFacts)
		want     []string
	}{
		{name: "a leftover revision's webhook on istio-injection=enabled", nsLabels: map[string]string{"istio-injection": "enabled"}, facts: leftover, want: []string{"istio-sidecar-injector-1-30"}},
		{name: "the default tag beside the default revision: a choice", nsLabels: map[string]string{"istio-injection": "enabled"}, facts: tagged},
		{name: "no overlap", nsLabels: map[string]string{"istio-injection": "enabled"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := withNamespace(meshFacts(), "app", tc.nsLabels)
			if tc.facts != nil {
				tc.facts(f)
			}
			r := Istio{}.Explain(f, template("app", nil, nil))
			if !slices.Equal(r.OverlapExtra, tc.want) {
				t.Errorf("OverlapExtra %q, want %q; warnings %q", r.OverlapExtra, tc.want, r.Warnings)
			}
		})
	}
}
