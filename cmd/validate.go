package cmd

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// validateSelector parses a label selector (-l) as the apiserver would,
// before any request: a bad one is a usage error, whether or not a
// cluster can be reached.
func validateSelector(selector string) error {
	if selector == "" {
		return nil
	}
	if _, err := labels.Parse(selector); err != nil {
		return usageErrorf("-l %q: %v", selector, err)
	}
	return nil
}

// validateFiles checks that every -f file (not "-", standard input) can
// be read, before any request.
func validateFiles(filenames []string) error {
	for _, f := range filenames {
		if f == "-" {
			continue
		}
		st, err := os.Stat(f)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return usageErrorf("the path %q does not exist", f)
		case err != nil:
			return usageErrorf("%v", err)
		case st.IsDir():
			return usageErrorf("%q is a directory: give the manifest files in it", f)
		}
	}
	return nil
}

// validateRequestTimeout checks --request-timeout as client-go reads it
// (whole seconds, or a duration with its unit), before any request.
func validateRequestTimeout(v string) error {
	if v == "" {
		return nil
	}
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		if i < 0 {
			return usageErrorf("invalid --request-timeout %q: it must not be negative", v)
		}
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return usageErrorf("invalid --request-timeout %q: a whole number of seconds, or a number with its unit (e.g. 1s, 2m, 3h)", v)
	}
	if d < 0 {
		return usageErrorf("invalid --request-timeout %q: it must not be negative", v)
	}
	return nil
}

// oneOf says a list of choices as kubectl does: "json|yaml|wide".
func oneOf(choices []string) string { return strings.Join(choices, "|") }
