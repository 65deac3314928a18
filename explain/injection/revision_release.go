package injection

// RevisionRelease is what the model read of revision rev: whether an
// injector of it is installed (exists), its Istio release ("1.31") when
// known, and where the release was read from.
func RevisionRelease(f *ClusterFacts, rev string) (release string, exists, known bool, from string) {
	r, ok := istioModelOf(f).revisions[rev]
	if !ok {
		return "", false, false, ""
	}
	if !r.verKnown {
		return "", true, false, r.unmodelled
	}
	return r.ver.MinorString(), true, true, r.verFrom
}
