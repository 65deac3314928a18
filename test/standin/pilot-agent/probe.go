package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// appProber is one of the app's probes the injector moved to the agent
// (ISTIO_KUBE_APP_PROBERS, by path under /app-health/): the agent runs it
// against the app when the kubelet asks for the path, as Istio's agent
// does for rewritten httpGet and tcpSocket probes.
type appProber struct {
	HTTPGet *struct {
		Path   string          `json:"path"`
		Port   json.RawMessage `json:"port"`
		Scheme string          `json:"scheme"`
		Host   string          `json:"host"`
	} `json:"httpGet"`
	TCPSocket *struct {
		Port json.RawMessage `json:"port"`
	} `json:"tcpSocket"`
	TimeoutSeconds int `json:"timeoutSeconds"`
}

// appProbers reads ISTIO_KUBE_APP_PROBERS; nil when it is unset or not
// JSON (then the paths answer 404, as for no probe).
func appProbers() map[string]appProber {
	var m map[string]appProber
	if v := os.Getenv("ISTIO_KUBE_APP_PROBERS"); v != "" {
		if err := json.Unmarshal([]byte(v), &m); err != nil {
			logf("error: ISTIO_KUBE_APP_PROBERS: %v", err)
		}
	}
	return m
}

// appHealth answers the kubelet's rewritten probes: 200 when the app's own
// probe passes, 500 when it does not, 404 for a path with no probe. The
// app is reached on the pod's IP (INSTANCE_IP), as Istio's agent reaches
// it since 1.10, or on loopback when the IP is not known.
func appHealth(probers map[string]appProber) http.HandlerFunc {
	host := os.Getenv("INSTANCE_IP")
	if host == "" {
		host = "127.0.0.1"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := probers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		timeout := time.Duration(p.TimeoutSeconds) * time.Second
		if timeout <= 0 {
			timeout = time.Second
		}
		if err := p.run(host, timeout); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	}
}

// run runs the probe once against host.
func (p appProber) run(host string, timeout time.Duration) error {
	switch {
	case p.HTTPGet != nil:
		port, err := probePort(p.HTTPGet.Port)
		if err != nil {
			return err
		}
		h := host
		if p.HTTPGet.Host != "" {
			h = p.HTTPGet.Host
		}
		scheme := "http"
		if p.HTTPGet.Scheme == "HTTPS" {
			scheme = "https"
		}
		resp, err := (&http.Client{Timeout: timeout}).Get(scheme + "://" + net.JoinHostPort(h, strconv.Itoa(port)) + p.HTTPGet.Path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("the app answered %d", resp.StatusCode)
		}
		return nil
	case p.TCPSocket != nil:
		port, err := probePort(p.TCPSocket.Port)
		if err != nil {
			return err
		}
		c, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), timeout)
		if err != nil {
			return err
		}
		return c.Close()
	}
	return fmt.Errorf("a probe the stand-in does not run")
}

// probePort is a probe's port: a number (the injector resolves named ports
// before it moves a probe).
func probePort(raw json.RawMessage) (int, error) {
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("port %s: not a number", raw)
	}
	return n, nil
}
