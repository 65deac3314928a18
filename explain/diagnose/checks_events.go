package diagnose

import (
	"fmt"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// CodeHoldTimedOut: holdApplicationUntilProxyStarts' wait gave up.
const CodeHoldTimedOut = "KM-START-002"

func init() {
	register(&Spec{Code: CodeHoldTimedOut, Title: "pilot-agent wait timed out", Stage: CheckStart, Kind: Static, Status: Fail,
		Reads:   []Fact{FactPod, FactEvents},
		Means:   "With holdApplicationUntilProxyStarts, istio-proxy's postStart hook (pilot-agent wait) gave up before the proxy was ready: the kubelet kills and restarts the proxy, and the app waits behind it.",
		Detects: "FailedPostStartHook events of container istio-proxy.",
		Fixes:   "Find why the proxy does not get ready (its log, istiod's reachability); for Jobs, use a native sidecar.",
		Source:  "istio/istio issues on holdApplicationUntilProxyStarts timing out",
		Planted: "a pod of the canary revision (hold on) whose proxy gets ready after the wait's 60 seconds",
		run:     holdTimedOut})
}

func holdTimedOut(in *Input) []Finding {
	s := in.Startup
	if s == nil {
		return nil
	}
	for _, e := range s.Events {
		if e.Reason == "FailedPostStartHook" && e.Container == istio.ProxyContainer {
			msg := e.Message
			if len(msg) > 300 {
				msg = msg[:300] + "…"
			}
			return []Finding{{Evidence: "istio-proxy's postStart hook (pilot-agent wait) failed " + timesOf(e.Count) + ": " + strings.TrimSpace(msg),
				Fix: "kubectl logs " + in.Target + " -c " + istio.ProxyContainer + "   # why the proxy is not ready in time"}}
		}
	}
	return nil
}

func timesOf(n int32) string {
	if n <= 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}
