// Package engine holds what the engines share; the engines themselves are
// its sub-packages, one per subject (rules, inject, …), each a Go API that
// resolves its targets, reads what it needs through inspect and nsexec,
// runs explain/ and returns reports. Commands (cmd/) call them and print.
package engine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// maxInput bounds what -f and --from-file read: manifests and rule dumps are
// far smaller, and an endless input (/dev/zero, a pipe that never closes
// its end) must end in an error, not in all of the machine's memory.
const maxInput = 64 << 20

// InputError is input a command cannot read as given (a bad manifest, an
// input too large, no image to read rules with): the caller's usage error.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// ReadInput reads a file, or standard input for "-", up to maxInput bytes.
func ReadInput(name string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			// A file that cannot be opened is a bad argument, as a bad flag.
			if errors.Is(err, fs.ErrNotExist) {
				return nil, &InputError{Err: fmt.Errorf("the path %q does not exist", name)}
			}
			return nil, &InputError{Err: err}
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxInput+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxInput {
		// A usage error: the input is not what the command reads.
		return nil, &InputError{Err: fmt.Errorf("%s: more than %d MiB: not a manifest or a rule dump this command reads", name, maxInput>>20)}
	}
	return b, nil
}
