package diagnose

import (
	"github.com/kubectl-mesh/kubectl-mesh/explain/capture"
)

// listening is a socket table of a pod: LISTEN sockets on addr:port, uid.
func listening(socks ...string) string {
	b := "# tcp\n  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	for i, s := range socks {
		b += "   " + string(rune('0'+i)) + ": " + s + " 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1337        0 1 1 0 100 0 0 10 0\n"
	}
	return b
}

func redirecting() []*capture.Ruleset {
	rs, err := capture.ParseSave([]byte("*nat\n:ISTIO_REDIRECT - [0:0]\n:ISTIO_IN_REDIRECT - [0:0]\n-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001\n-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006\nCOMMIT\n"))
	if err != nil {
		panic(err)
	}
	return []*capture.Ruleset{rs}
}
