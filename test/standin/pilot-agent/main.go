// Command pilot-agent is the entrypoint of the local test cluster's proxyv2
// image, used only by kubectl-mesh's test bed and demo. Every subcommand but
// one is Istio's own pilot-agent, built from Istio's Go module
// (hack/cluster/build-istio.sh) and installed in the image as
// /usr/local/bin/pilot-agent-istio: this program replaces itself with it,
// arguments unchanged, so istio-init's and istio-validation's
// `pilot-agent istio-iptables …` write the rules Istio writes and fail as
// Istio fails, and `wait` and `request` are Istio's.
//
// The exception is `pilot-agent proxy sidecar …`. Istio's starts Envoy, a C++
// program that cannot be built here, after fetching certificates from istiod
// through cluster DNS and services, which the local cluster does not have.
// In its place this program runs a stand-in for the proxy: a transparent TCP
// relay on 15001 (outbound) and 15006 (inbound), readiness on 15021, stats on
// 15090/15020 (with the app's rewritten probes under /app-health/) and an
// admin port on 15000; POST /quitquitquit on either makes it exit 0. It is
// a test fixture, not Istio.
package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// istioAgent is where the image holds Istio's own pilot-agent.
const istioAgent = "/usr/local/bin/pilot-agent-istio"

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s\tinfo\t%s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), fmt.Sprintf(format, a...))
}

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "proxy" {
		os.Exit(runProxy(os.Args[2:]))
	}
	argv := append([]string{"pilot-agent"}, os.Args[1:]...)
	err := syscall.Exec(istioAgent, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "pilot-agent: exec %s: %v\n", istioAgent, err)
	os.Exit(127)
}
