// Package buildinfo holds the version, commit and build date stamped into the
// binary by the Makefile (-ldflags -X). Unstamped builds (go install, go run)
// fall back to what the Go toolchain recorded in the binary.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Stamped by the Makefile: -X github.com/kubectl-mesh/kubectl-mesh/internal/buildinfo.Version=v0.1.0 …
var (
	Version = ""
	Commit  = ""
	Date    = ""
)

// Info describes this build of kubectl-mesh.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the build information, filling what the linker did not stamp
// from the module and VCS data the Go toolchain embeds.
func Get() Info {
	info := Info{
		Version:   Version,
		Commit:    Commit,
		Date:      Date,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" && bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && info.Commit == "":
				info.Commit = s.Value
			case s.Key == "vcs.time" && info.Date == "":
				info.Date = s.Value
			}
		}
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	if info.Date == "" {
		info.Date = "unknown"
	}
	return info
}
