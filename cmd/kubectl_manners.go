package cmd

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"sync"

	"github.com/go-logr/logr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// quietKlog sends client-go's klog lines (discovery's memcache errors,
// retries, …) nowhere, unless -v asked for them: what goes wrong reaches
// the user as the command's own error, once.
func quietKlog(given bool, verbosity string) {
	if !given || verbosity == "" || verbosity == "0" {
		klog.SetLogger(logr.Discard())
		return
	}
	klog.ClearLogger()
}

// warningPrinter prints the apiserver's warnings (Warning headers, code
// 299) as kubectl prints them, "Warning: …" on stderr, each once.
type warningPrinter struct {
	mu   sync.Mutex
	out  io.Writer
	seen map[string]bool
}

func (w *warningPrinter) HandleWarningHeader(code int, _ string, message string) {
	if code != 299 || message == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen[message] {
		return
	}
	w.seen[message] = true
	fmt.Fprintf(w.out, "Warning: %s\n", render.Escape(message))
}

// printWarnings makes every client print the apiserver's warnings on errOut.
func printWarnings(errOut io.Writer) {
	rest.SetDefaultWarningHandler(&warningPrinter{out: errOut, seen: map[string]bool{}})
}

var refusedRE = regexp.MustCompile(`dial tcp (\S+): connect: connection refused`)

// connectionRefused is kubectl's message for an apiserver that refused the
// connection, "" when err is not that.
func connectionRefused(err error) string {
	host := ""
	var ue *url.Error
	if errors.As(err, &ue) && utilnet.IsConnectionRefused(err) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			host = u.Host
		}
	}
	if host == "" {
		// Wrapped as text on the way (a read's own explanation).
		if m := refusedRE.FindStringSubmatch(err.Error()); m != nil {
			host = m[1]
		}
	}
	if host == "" {
		return ""
	}
	return fmt.Sprintf("The connection to the server %s was refused - did you specify the right host or port?", host)
}
