package cmd

import (
	"fmt"
	"io"
	"os"
)

// maxInput bounds what -f and --from-file read: manifests and rule dumps are
// far smaller, and an endless input (/dev/zero, a pipe that never closes
// its end) must end in an error, not in all of the machine's memory.
const maxInput = 64 << 20

// readInput reads a file, or standard input for "-", up to maxInput bytes.
func readInput(name string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
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
		return nil, &UsageError{Err: fmt.Errorf("%s: more than %d MiB: not a manifest or a rule dump this command reads", name, maxInput>>20)}
	}
	return b, nil
}
