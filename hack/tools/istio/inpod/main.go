// Command inpod writes ambient mode's in-pod capture rules into the network
// namespace it runs in, with istio-cni's own rule writer (the code its node
// agent runs in each enrolled pod's namespace), built from Istio's module:
// the test bed's way to have the real rules where no node agent can run.
//
//	ip netns exec NS inpod [-dns] [-ipv6] [-ingress] [-virtual-interfaces a,b] [-nftables] [-iptables-binary legacy]
//
// -dns, -ipv6: the agent's global AMBIENT_DNS_CAPTURE and AMBIENT_IPV6;
// -pod-dns on|off: the pod's ambient.istio.io/dns-capture; -ingress: the
// pod's ambient.istio.io/bypass-inbound-capture; -virtual-interfaces: its
// istio.io/reroute-virtual-interfaces; -nftables: the agent's
// NATIVE_NFTABLES; -iptables-binary: the iptables variant to use (the agent
// detects it; "legacy" forces iptables-legacy). The probe SNAT addresses are
// the agent's defaults.
package main

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"istio.io/istio/cni/pkg/config"
	"istio.io/istio/cni/pkg/iptables"
	"istio.io/istio/cni/pkg/trafficmanager"
	istiolog "istio.io/istio/pkg/log"
	dep "istio.io/istio/tools/istio-iptables/pkg/dependencies"
)

func main() {
	dns := flag.Bool("dns", true, "AMBIENT_DNS_CAPTURE")
	ipv6 := flag.Bool("ipv6", true, "AMBIENT_IPV6")
	podDNS := flag.String("pod-dns", "", "ambient.istio.io/dns-capture: on, off or unset")
	ingress := flag.Bool("ingress", false, "ambient.istio.io/bypass-inbound-capture")
	virt := flag.String("virtual-interfaces", "", "istio.io/reroute-virtual-interfaces")
	nft := flag.Bool("nftables", false, "NATIVE_NFTABLES")
	binary := flag.String("iptables-binary", "", "force an iptables variant (legacy or nft)")
	flag.Parse()

	cfg := &config.AmbientConfig{
		EnableIPv6:             *ipv6,
		RedirectDNS:            *dns,
		HostProbeSNATAddress:   netip.MustParseAddr("169.254.7.127"),
		HostProbeV6SNATAddress: netip.MustParseAddr("fd16:9254:7127:1337:ffff:ffff:ffff:ffff"),
	}
	ov := config.PodLevelOverrides{IngressMode: *ingress}
	if *virt != "" {
		ov.VirtualInterfaces = strings.Split(*virt, ",")
	}
	switch *podDNS {
	case "on":
		ov.DNSProxy = config.PodDNSEnabled
	case "off":
		ov.DNSProxy = config.PodDNSDisabled
	}
	deps := &dep.RealDependencies{ForceIptablesBinary: *binary}
	_, pod, err := trafficmanager.NewTrafficRuleManager(&trafficmanager.TrafficRuleManagerConfig{
		NativeNftables: *nft, HostConfig: cfg, PodConfig: cfg, HostDeps: deps, PodDeps: deps, NlDeps: iptables.RealNlDeps(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "inpod:", err)
		os.Exit(1)
	}
	if err := pod.CreateInpodRules(istiolog.RegisterScope("inpod", "in-pod rules"), ov); err != nil {
		fmt.Fprintln(os.Stderr, "inpod:", err)
		os.Exit(1)
	}
}
