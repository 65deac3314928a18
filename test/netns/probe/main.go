// Command probe is the traffic end of the capture tests: it listens on
// ports answering "NAME:PORT" (TCP and UDP, IPv4 and IPv6, optionally
// IP_TRANSPARENT for TPROXY), or connects and prints what answered.
//
//	probe listen NAME [-transparent] PORT…
//	probe connect tcp|udp HOST PORT [MARK]
//
// MARK sets the connecting socket's SO_MARK (as ztunnel marks its own).
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: probe listen NAME [-transparent] PORT… | probe connect tcp|udp HOST PORT")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "listen":
		listen(os.Args[2], os.Args[3:])
	case "connect":
		if len(os.Args) != 5 && len(os.Args) != 6 {
			os.Exit(2)
		}
		mark := ""
		if len(os.Args) == 6 {
			mark = os.Args[5]
		}
		os.Exit(connect(os.Args[2], os.Args[3], os.Args[4], mark))
	}
}

func listen(name string, args []string) {
	transparent := false
	if len(args) > 0 && args[0] == "-transparent" {
		transparent, args = true, args[1:]
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
			if transparent && serr == nil {
				const ipTransparent = 19 // IP_TRANSPARENT, also honoured on IPv6 sockets
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_IP, ipTransparent, 1)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}}
	for _, port := range args {
		reply := name + ":" + port
		ln, err := lc.Listen(context.Background(), "tcp", ":"+port)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = io.WriteString(c, reply)
				c.Close()
			}
		}()
		// UDP answers from the address the datagram was sent to (IP_PKTINFO),
		// as a DNS server does: a socket bound to the wildcard would answer
		// from the outgoing interface's address, which the client ignores.
		pc4, err := lc.ListenPacket(context.Background(), "udp4", ":"+port)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		c4 := ipv4.NewPacketConn(pc4)
		_ = c4.SetControlMessage(ipv4.FlagDst, true)
		go func() {
			buf := make([]byte, 512)
			for {
				_, cm, from, err := c4.ReadFrom(buf)
				if err != nil {
					return
				}
				var out *ipv4.ControlMessage
				if cm != nil {
					out = &ipv4.ControlMessage{Src: cm.Dst}
				}
				_, _ = c4.WriteTo([]byte(reply), out, from)
			}
		}()
		pc6, err := lc.ListenPacket(context.Background(), "udp6", ":"+port)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		c6 := ipv6.NewPacketConn(pc6)
		_ = c6.SetControlMessage(ipv6.FlagDst, true)
		go func() {
			buf := make([]byte, 512)
			for {
				_, cm, from, err := c6.ReadFrom(buf)
				if err != nil {
					return
				}
				var out *ipv6.ControlMessage
				if cm != nil {
					out = &ipv6.ControlMessage{Src: cm.Dst}
				}
				_, _ = c6.WriteTo([]byte(reply), out, from)
			}
		}()
	}
	fmt.Println("ready")
	select {}
}

func connect(proto, host, port, mark string) int {
	d := net.Dialer{Timeout: 2 * time.Second}
	if mark != "" {
		m, err := strconv.ParseUint(mark, 0, 32)
		if err != nil {
			fmt.Println("error: mark", mark)
			return 2
		}
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_MARK, int(m)) }); err != nil {
				return err
			}
			return serr
		}
	}
	c, err := d.Dial(proto, net.JoinHostPort(strings.Trim(host, "[]"), port))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if proto == "udp" {
		if _, err := c.Write([]byte("ping")); err != nil {
			fmt.Println("error:", err)
			return 1
		}
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil && n == 0 {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println(string(buf[:n]))
	return 0
}
