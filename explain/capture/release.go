package capture

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/kubectl-mesh/kubectl-mesh/internal/istio"
)

// Istio's istio-iptables has written its rules in four shapes over the
// releases the model knows (1.20-1.22, 1.23, 1.24, 1.25 on). Each was read
// off the real binaries of every minor (explain/capture/testdata/releases, made by
// hack/testdata/istio-releases.sh) and is checked against them.
const (
	// OldestModelled and NewestModelled bound the Istio minors whose rules
	// the model knows (1.x). A newer minor is taken to write the newest
	// shape only when it is the development line the test bed runs
	// (NewestModelled); anything else is outside the model.
	OldestModelled = 20
	NewestModelled = 31
)

// RuleModel is how one Istio release's istio-iptables writes its rules:
// the release, and the shape its rules take.
type RuleModel struct {
	// Release is the Istio version the model was picked for, as given
	// ("1.24.6", "1.24"); "" for the newest.
	Release string `json:"release,omitempty"`
	// Minor is its minor version (1.x).
	Minor int `json:"minor"`
	// Shape names the releases that write the same rules as this one:
	// "1.20-1.22", "1.23", "1.24" or "1.25+".
	Shape string `json:"shape"`
}

// The shapes' switches, read off the real binaries.

// tcpOutputJump: nat OUTPUT jumps to ISTIO_OUTPUT for TCP only (-p tcp),
// and DNS capture adds a UDP jump; from 1.25 every protocol jumps.
func (m RuleModel) tcpOutputJump() bool { return m.Minor != 0 && m.Minor <= 24 }

// dnsChain: DNS capture writes its own ISTIO_OUTPUT_DNS chains (nat and
// raw) and raw PREROUTING jumps to ISTIO_INBOUND, from 1.25.
func (m RuleModel) dnsChain() bool { return m.Minor == 0 || m.Minor >= 25 }

// dnsInOutput: 1.20-1.22 write the UDP DNS rules straight into nat's and
// raw's OUTPUT; 1.23-1.24 into their ISTIO_OUTPUT chains, behind a UDP jump.
func (m RuleModel) dnsInOutput() bool { return m.Minor != 0 && m.Minor <= 22 }

// dropChain: --drop-invalid jumps to an ISTIO_DROP chain (from 1.24);
// before, the rule drops itself.
func (m RuleModel) dropChain() bool { return m.Minor == 0 || m.Minor >= 24 }

// udpExcludedPorts: -o (outbound ports not captured) lets UDP through too,
// from 1.25; before, TCP only.
func (m RuleModel) udpExcludedPorts() bool { return m.Minor == 0 || m.Minor >= 25 }

// finalReturn: 1.20-1.22 end ISTIO_OUTPUT with a RETURN when only some
// ranges are captured (-i lists ranges).
func (m RuleModel) finalReturn() bool { return m.Minor != 0 && m.Minor <= 22 }

// NewestRuleModel is the model of the Istio the test bed runs.
func NewestRuleModel() RuleModel {
	return RuleModel{Minor: NewestModelled, Shape: shapeOf(NewestModelled)}
}

func shapeOf(minor int) string {
	switch {
	case minor <= 22:
		return "1.20-1.22"
	case minor <= 24:
		return fmt.Sprintf("1.%d", minor)
	}
	return "1.25+"
}

// VersionError is a version string that is not an Istio version.
type VersionError struct{ Version, Why string }

func (e *VersionError) Error() string {
	return fmt.Sprintf("%q is not an Istio version (%s): give MAJOR.MINOR[.PATCH], e.g. 1.24 or 1.24.6", e.Version, e.Why)
}

// NoModelError is a real Istio version whose rules the model does not
// know: the rules can be explained and traced, not compared.
type NoModelError struct{ Version string }

func (e *NoModelError) Error() string {
	return fmt.Sprintf("no rule model for Istio %s (the model knows 1.%d to 1.%d); the rules are explained and traced, not compared", e.Version, OldestModelled, NewestModelled)
}

// ParseIstioVersion reads an Istio version as users and clusters give it
// ("1.24", "1.24.6", "v1.24.6", an image tag such as "1.24.6-distroless" or
// "1.31-dev", read by internal/istio): its major and minor.
func ParseIstioVersion(s string) (major, minor int, err error) {
	v, ok := istio.ParseVersion(s)
	if ok {
		return 1, v.Minor, nil
	}
	// Another major (2.0): a version, outside the model, not a mistake.
	if m := laterMajor.FindStringSubmatch(strings.TrimSpace(s)); m != nil {
		major, _ = strconv.Atoi(m[1])
		minor, _ = strconv.Atoi(m[2])
		return major, minor, nil
	}
	return 0, 0, &VersionError{s, "want MAJOR.MINOR or MAJOR.MINOR.PATCH, with an optional -suffix"}
}

// laterMajor is a version of a major after 1 ("2.0", "v2.1.3-rc.0").
var laterMajor = regexp.MustCompile(`^v?([2-9]|[1-9][0-9]+)\.([0-9]+)(\.[0-9]+)?(-[0-9A-Za-z.-]+)?$`)

// RuleModelFor picks the rule model for an Istio version. A string that is
// not a version is a *VersionError; a version outside the model a
// *NoModelError (the answer is then unknown, never drift).
func RuleModelFor(version string) (RuleModel, error) {
	major, minor, err := ParseIstioVersion(version)
	if err != nil {
		return RuleModel{}, err
	}
	if major != 1 || minor < OldestModelled || minor > NewestModelled {
		return RuleModel{}, &NoModelError{Version: strings.TrimPrefix(strings.TrimSpace(version), "v")}
	}
	return RuleModel{Release: strings.TrimPrefix(strings.TrimSpace(version), "v"), Minor: minor, Shape: shapeOf(minor)}, nil
}

// Version is the release the model was picked for, as given ("1.24.6"),
// else its minor ("1.31").
func (m RuleModel) Version() string {
	if m.Release != "" {
		return m.Release
	}
	return fmt.Sprintf("1.%d", m.Minor)
}
