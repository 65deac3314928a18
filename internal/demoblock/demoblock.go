// Package demoblock says what a doc's demo marker means, for the tool that
// splices the demo's output in (hack/demo/splice) and the test that checks
// the docs (cmd): a console block after
//
//	<!-- demo: ARGS [| lines=N] -->
//
// shows `kubectl mesh ARGS` as one run of the demo printed it, cut to N
// lines of output.
package demoblock

import (
	"regexp"
	"strings"
)

// Marker finds a marker and its console block: ARGS, N ("" for all), and
// the block's body.
var Marker = regexp.MustCompile("(?m)^<!-- demo: (.+?)(?: \\| lines=(\\d+))? -->\n```console\n((?s:.*?))```\n")

// Command matches the command line a marker names ("kubectl mesh ARGS",
// with its comment if any): a * in ARGS stands for a pod's generated
// suffix or an address.
func Command(args string) *regexp.Regexp {
	return regexp.MustCompile(`^kubectl mesh ` + strings.ReplaceAll(regexp.QuoteMeta(args), `\*`, `[a-z0-9.-]+`) + `(\s+#.*)?$`)
}
