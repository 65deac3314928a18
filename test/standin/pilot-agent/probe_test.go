package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The rewritten probes answer as the app's own would: an HTTP probe the
// app passes or fails, a TCP probe on a port that listens or not, a path
// with no probe.
func TestAppHealth(t *testing.T) {
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ready" {
			http.NotFound(w, r)
		}
	}))
	defer app.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(app.URL, "http://"))
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	_, closedPort, _ := net.SplitHostPort(closed.Addr().String())
	closed.Close()
	t.Setenv("INSTANCE_IP", "127.0.0.1")
	t.Setenv("ISTIO_KUBE_APP_PROBERS", `{"/app-health/app/readyz":{"httpGet":{"path":"/ready","port":`+port+`}},`+
		`"/app-health/app/livez":{"httpGet":{"path":"/gone","port":`+port+`}},`+
		`"/app-health/app/startupz":{"tcpSocket":{"port":`+port+`},"timeoutSeconds":1},`+
		`"/app-health/db/readyz":{"tcpSocket":{"port":`+closedPort+`}}}`)
	h := appHealth(appProbers())
	for path, want := range map[string]int{"/app-health/app/readyz": 200, "/app-health/app/livez": 500, "/app-health/app/startupz": 200,
		"/app-health/db/readyz": 500, "/app-health/other/readyz": 404} {
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != want {
			t.Errorf("%s: %d %q, want %d", path, rec.Code, rec.Body.String(), want)
		}
	}
}
