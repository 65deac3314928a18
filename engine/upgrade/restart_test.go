package upgrade

import (
	"strings"
	"testing"
)

// The restart step re-creates a workload's pods: a rollout restart where
// it replaces them; their deletion by its selector where it does not
// (OnDelete, a partition, a ReplicaSet of its own); a paused Deployment
// resumed first.
func TestRestartReplacesThePods(t *testing.T) {
	for _, tc := range []struct {
		c    candidate
		want string
	}{
		{candidate{kind: "Deployment", namespace: "shop", name: "web"}, "kubectl rollout restart deployment/web -n shop"},
		{candidate{kind: "Deployment", namespace: "shop", name: "web", paused: true}, "kubectl rollout resume deployment/web -n shop && kubectl rollout restart deployment/web -n shop"},
		{candidate{kind: "DaemonSet", namespace: "shop", name: "agent", held: "its update strategy is OnDelete", selector: "app=agent"}, "kubectl delete pods -n shop -l 'app=agent'"},
		{candidate{kind: "StatefulSet", namespace: "shop", name: "db", held: "its rolling update has partition 1", selector: "app=db"}, "kubectl delete pods -n shop -l 'app=db'"},
		{candidate{kind: "ReplicaSet", namespace: "shop", name: "catalog", held: "a ReplicaSet replaces a pod only when it is deleted", selector: "app=catalog"}, "kubectl delete pods -n shop -l 'app=catalog'"},
		{candidate{kind: "StatefulSet", namespace: "shop", name: "db"}, "kubectl rollout restart statefulset/db -n shop"},
	} {
		if got := restart(tc.c); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s/%s: %q, want %q", tc.c.kind, tc.c.name, got, tc.want)
		}
	}
}
