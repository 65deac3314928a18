// Command splice puts one run of the demo into README.md: each console
// block that follows a marker
//
//	<!-- demo: ARGS [| lines=N] -->
//
// is replaced by the section of the demo's transcript whose command is
// `kubectl mesh ARGS` (a * in ARGS matches a pod's generated suffix), cut
// to N lines of output (then "…"). Run by hack/demo/readme.sh after a
// demo; every block comes from the same run.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/demoblock"
)

// section is one command of the transcript and what it printed.
type section struct {
	command string // as the demo says it, after "$ "
	output  []string
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: splice TRANSCRIPT README")
		os.Exit(2)
	}
	transcript, err := os.ReadFile(os.Args[1])
	check(err)
	readme, err := os.ReadFile(os.Args[2])
	check(err)
	out, n, err := Splice(string(transcript), string(readme))
	check(err)
	check(os.WriteFile(os.Args[2], []byte(out), 0o644))
	fmt.Fprintf(os.Stderr, "%s: %d blocks from %s\n", filepath.Base(os.Args[2]), n, os.Args[1])
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "splice:", err)
		os.Exit(1)
	}
}

var (
	ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*m")
)

// Splice replaces every marked block of readme from transcript; it fails
// when a marker matches no section, so a README never keeps a stale block.
func Splice(transcript, readme string) (string, int, error) {
	secs := sections(transcript)
	var failed []string
	n := 0
	out := demoblock.Marker.ReplaceAllStringFunc(readme, func(block string) string {
		m := demoblock.Marker.FindStringSubmatch(block)
		args, limit := m[1], 0
		if m[2] != "" {
			limit, _ = strconv.Atoi(m[2])
		}
		pat := demoblock.Command(args)
		for _, s := range secs {
			if !pat.MatchString(s.command) {
				continue
			}
			n++
			lines := s.output
			if limit > 0 && len(lines) > limit {
				lines = append(append([]string{}, lines[:limit]...), "…")
			}
			header := strings.SplitN(block, "\n", 2)[0]
			return header + "\n```console\n$ " + s.command + "\n" + strings.Join(lines, "\n") + "\n```\n"
		}
		failed = append(failed, args)
		return block
	})
	if len(failed) > 0 {
		return "", 0, fmt.Errorf("no section of the transcript runs: %s", strings.Join(failed, "; "))
	}
	return out, n, nil
}

// sections splits the demo's transcript at its "$ kubectl mesh …" lines.
func sections(transcript string) []section {
	var secs []section
	var cur *section
	for _, line := range strings.Split(ansiRE.ReplaceAllString(transcript, ""), "\n") {
		if strings.HasPrefix(line, "$ ") {
			secs = append(secs, section{command: strings.TrimSpace(line[2:])})
			cur = &secs[len(secs)-1]
			continue
		}
		if cur != nil {
			cur.output = append(cur.output, line)
		}
	}
	for i := range secs {
		o := secs[i].output
		for len(o) > 0 && strings.TrimSpace(o[len(o)-1]) == "" {
			o = o[:len(o)-1]
		}
		for len(o) > 0 && strings.TrimSpace(o[0]) == "" {
			o = o[1:]
		}
		secs[i].output = o
	}
	return secs
}
