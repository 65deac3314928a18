package istio

import "testing"

// A misspelt key is put down to the field it nearly is; a field, by either
// name, is not; a key near none is left alone.
func TestProxyConfigNearMiss(t *testing.T) {
	for key, want := range map[string]string{
		"holdApplicationUntilProxyStart":      "holdApplicationUntilProxyStarts",
		"holdApplicationUntilProxyStarts":     "",
		"hold_application_until_proxy_starts": "",
		"terminationDrainDurations":           "terminationDrainDuration",
		"proxyMetaData":                       "proxyMetadata",
		"somethingNewEntirely":                "",
	} {
		if got := ProxyConfigNearMiss(key); got != want {
			t.Errorf("%s: %q, want %q", key, got, want)
		}
	}
}
