// Command pilot-agent is the test stand-in for Istio's proxyv2 image
// entrypoint, used only by kubectl-mesh's local test cluster and demo. It is
// not Istio: it does what the injected containers do that kubectl-mesh
// diagnoses, and no more.
//
//	pilot-agent istio-iptables ARGS…  program the capture rules Istio's istio-iptables
//	                                  writes for ARGS (REDIRECT/TPROXY, IPv4), or with
//	                                  --run-validation check that redirection works
//	pilot-agent proxy sidecar …       run a transparent TCP forwarder on 15001
//	                                  (outbound) and 15006 (inbound), readiness on
//	                                  15021, stats on 15090/15020, admin on 15000
//	pilot-agent wait                  wait until the proxy is ready (postStart hold)
//	pilot-agent request …             accepted for the native sidecar preStop hook
package main

import (
	"fmt"
	"os"
	"time"
)

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s\tinfo\t%s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), fmt.Sprintf(format, a...))
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: pilot-agent istio-iptables|proxy|wait|request …")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "istio-iptables":
		os.Exit(runIstioIptables(args))
	case "proxy":
		os.Exit(runProxy(args))
	case "wait":
		os.Exit(runWait(args))
	case "request":
		os.Exit(0)
	default:
		fmt.Fprintf(os.Stderr, "pilot-agent: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}
