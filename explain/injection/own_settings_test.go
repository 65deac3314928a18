package injection

import "testing"

// A template that opts its pods out (label or annotation) gets one
// candidate that takes every opt-out off; one that does not, none.
func TestOptOutCandidates(t *testing.T) {
	off := map[string]string{"sidecar.istio.io/inject": "false"}
	for _, tc := range []struct {
		name                string
		labels, annotations map[string]string
		wantLabels, wantSet int
	}{
		{"label", off, nil, 1, 0},
		{"annotation", nil, off, 0, 1},
		{"both", off, off, 1, 1},
		{"opted in", map[string]string{"sidecar.istio.io/inject": "true"}, nil, -1, -1},
		{"neither", map[string]string{"app": "x"}, nil, -1, -1},
	} {
		got := OptOutCandidates(tc.labels, tc.annotations)
		if tc.wantLabels < 0 {
			if len(got) != 0 {
				t.Errorf("%s: %+v, want none", tc.name, got)
			}
			continue
		}
		if len(got) != 1 || len(got[0].Labels) != tc.wantLabels || len(got[0].Set) != tc.wantSet {
			t.Errorf("%s: %+v", tc.name, got)
			continue
		}
		if l := got[0].ApplyLabels(tc.labels); l["sidecar.istio.io/inject"] != "" {
			t.Errorf("%s: the opt-out stays: %v", tc.name, l)
		}
	}
}
