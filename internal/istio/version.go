package istio

import (
	"regexp"
	"strconv"
	"strings"
)

// Version is an Istio release as a cluster shows it: 1.Minor, with a patch
// when the text had one.
type Version struct {
	Minor int
	// Patch is -1 when the text named none ("1.22-dev", a revision "1-24").
	Patch int
	// Raw is the text it was read from.
	Raw string
}

// MinorString is "1.<minor>", the key of DefaultsFor.
func (v Version) MinorString() string { return "1." + strconv.Itoa(v.Minor) }

// String is the version as read.
func (v Version) String() string { return v.Raw }

// tagRE reads a release from an image tag or a chart's tag value: an
// optional "v", 1.MINOR, an optional .PATCH, then nothing or a suffix
// after "-" or "_" (a variant, a dev or pre-release build: -distroless,
// -debug, -dev, -rc.0, -asm.1).
var tagRE = regexp.MustCompile(`^v?1\.(\d{1,3})(?:\.(\d{1,4}))?(?:[-_+].*)?$`)

// ParseVersion reads an Istio version from what a cluster holds: an image
// tag ("1.24.6", "1.24.6-distroless", "1.30.3-debug", "1.22-dev"), the
// injector's values.global.tag, or a version pilot-discovery reports. A tag
// that names no release ("latest", "master", a digest) is not a version.
func ParseVersion(s string) (Version, bool) {
	s = strings.TrimSpace(s)
	m := tagRE.FindStringSubmatch(s)
	if m == nil {
		return Version{}, false
	}
	v := Version{Patch: -1, Raw: s}
	v.Minor, _ = strconv.Atoi(m[1])
	if m[2] != "" {
		v.Patch, _ = strconv.Atoi(m[2])
	}
	return v, true
}

// ImageTag is an image reference's tag ("" when it has none): a digest
// ("@sha256:…") is dropped first, and a ":" inside the registry's host
// (host:5000/istio/pilot) is not a tag.
func ImageTag(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	i := strings.LastIndexByte(image, ':')
	if i < 0 || strings.Contains(image[i+1:], "/") {
		return ""
	}
	return image[i+1:]
}

// ImageVersion reads the Istio version from an image's tag
// (docker.io/istio/pilot:1.24.6-distroless → 1.24.6).
func ImageVersion(image string) (Version, bool) {
	tag := ImageTag(image)
	if tag == "" {
		return Version{}, false
	}
	return ParseVersion(tag)
}

// revisionRE reads the version a revision name carries by convention
// (Istio's docs name revisions after releases: "1-24-6", "1-24"), also
// behind a prefix ("istio-1-24-6").
var revisionRE = regexp.MustCompile(`(?:^|-)1-(\d{1,3})(?:-(\d{1,4}))?$`)

// RevisionVersion reads the version a revision's name carries ("1-24-6" →
// 1.24.6); a name without one ("canary", "stable", "default") carries none.
func RevisionVersion(rev string) (Version, bool) {
	m := revisionRE.FindStringSubmatch(rev)
	if m == nil {
		return Version{}, false
	}
	v := Version{Patch: -1, Raw: rev}
	v.Minor, _ = strconv.Atoi(m[1])
	if m[2] != "" {
		v.Patch, _ = strconv.Atoi(m[2])
	}
	return v, true
}
