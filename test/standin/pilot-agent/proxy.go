package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/pflag"
)

// originalDst returns the destination a REDIRECTed or TPROXYed connection
// was sent to before the nat table rewrote it (SO_ORIGINAL_DST).
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var dst netip.AddrPort
	var serr error
	err = raw.Control(func(fd uintptr) {
		const soOriginalDst = 80
		// sockaddr_in fits in the 16 bytes of an IPv6Mreq.
		m, e := syscall.GetsockoptIPv6Mreq(int(fd), syscall.SOL_IP, soOriginalDst)
		if e != nil {
			serr = e
			return
		}
		port := binary.BigEndian.Uint16(m.Multiaddr[2:4])
		addr := netip.AddrFrom4([4]byte{m.Multiaddr[4], m.Multiaddr[5], m.Multiaddr[6], m.Multiaddr[7]})
		dst = netip.AddrPortFrom(addr, port)
	})
	if err != nil {
		return dst, err
	}
	return dst, serr
}

type proxyStats struct {
	outbound, inbound, failed atomic.Int64
}

// forward accepts connections on ln and relays each to its original
// destination. Inbound connections are sent from 127.0.0.6, as Envoy's inbound
// passthrough does, so that ISTIO_OUTPUT lets them through.
func forward(ln *net.TCPListener, inbound bool, st *proxyStats, ownPort uint16) {
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			return
		}
		go func() {
			defer func() { _ = c.Close() }()
			dst, err := originalDst(c)
			if err != nil || dst.Port() == ownPort {
				st.failed.Add(1)
				return
			}
			d := net.Dialer{Timeout: 5 * time.Second}
			if inbound {
				d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 6)}
				st.inbound.Add(1)
			} else {
				st.outbound.Add(1)
			}
			up, err := d.Dial("tcp", dst.String())
			if err != nil {
				st.failed.Add(1)
				return
			}
			defer up.Close()
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(up, c); _ = up.(*net.TCPConn).CloseWrite() }()
			go func() { defer wg.Done(); _, _ = io.Copy(c, up); _ = c.CloseWrite() }()
			wg.Wait()
		}()
	}
}

func runProxy(args []string) int {
	fs := pflag.NewFlagSet("proxy", pflag.ContinueOnError)
	fs.ParseErrorsAllowlist.UnknownFlags = true
	if err := fs.Parse(args); err != nil {
		logf("error: %v", err)
		return 2
	}
	readyDelay := time.Duration(0)
	if v := os.Getenv("STANDIN_READY_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			logf("error: STANDIN_READY_DELAY=%q: %v", v, err)
			return 2
		}
		readyDelay = d
	}
	start := time.Now()
	st := &proxyStats{}
	for _, l := range []struct {
		port    int
		inbound bool
	}{{15001, false}, {15006, true}} {
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{Port: l.port})
		if err != nil {
			logf("error: listen %d: %v", l.port, err)
			return 1
		}
		go forward(ln, l.inbound, st, uint16(l.port))
	}
	ready := func() bool { return time.Since(start) >= readyDelay }
	readyHandler := func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "proxy not ready yet", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	}
	statsHandler := func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# stand-in proxy\nstandin_outbound_connections_total %d\nstandin_inbound_connections_total %d\nstandin_failed_connections_total %d\n",
			st.outbound.Load(), st.inbound.Load(), st.failed.Load())
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz/ready", readyHandler)
	mux.HandleFunc("/ready", readyHandler)
	mux.HandleFunc("/stats/prometheus", statsHandler)
	mux.HandleFunc("/stats", statsHandler)
	// `pilot-agent request --debug-port=15020 POST drain`, the native sidecar's preStop.
	mux.HandleFunc("/drain", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "draining") })
	// The app's probes the injector rewrote to the agent's port.
	mux.HandleFunc("/app-health/", appHealth(appProbers()))
	// POST /quitquitquit (the agent's on 15020, Envoy's admin on 15000): a
	// Job's last step with a classic sidecar; the proxy exits 0.
	quit := make(chan struct{}, 1)
	mux.HandleFunc("/quitquitquit", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		fmt.Fprintln(w, "OK")
		select {
		case quit <- struct{}{}:
		default:
		}
	})
	servers := []*http.Server{}
	for _, addr := range []string{":15021", ":15090", ":15020", "127.0.0.1:15000"} {
		srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			logf("error: listen %s: %v", addr, err)
			return 1
		}
		servers = append(servers, srv)
		go func() { _ = srv.Serve(ln) }()
	}
	logf("stand-in proxy listening: outbound 15001, inbound 15006, health 15021, stats 15090/15020, admin 15000 (ready after %s)", readyDelay)
	go func() {
		time.Sleep(readyDelay)
		logf("Envoy proxy is ready")
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case s := <-sig:
		logf("received %v, draining", s)
	case <-quit:
		logf("received /quitquitquit, exiting")
		time.Sleep(100 * time.Millisecond) // the answer goes out first
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, srv := range servers {
		_ = srv.Shutdown(ctx)
	}
	return 0
}
