package engine

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// endless never ends, as /dev/zero or a pipe whose writer never closes.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '#'
	}
	return len(p), nil
}

// An endless standard input, or a file over the bound, is a usage error, read
// in bounded memory; a file within it is read whole.
func TestReadInputIsBounded(t *testing.T) {
	_, err := ReadInput("-", endless{})
	var usage *InputError
	if !errors.As(err, &usage) || !strings.Contains(err.Error(), "64 MiB") {
		t.Fatalf("endless stdin: %v", err)
	}
	big := filepath.Join(t.TempDir(), "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(f, endless{}, maxInput+10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := ReadInput(big, nil); !errors.As(err, &usage) {
		t.Errorf("a file over the bound: %v", err)
	}
	if b, err := ReadInput("-", bytes.NewReader([]byte("apiVersion: v1\n"))); err != nil || string(b) != "apiVersion: v1\n" {
		t.Errorf("small stdin: %q %v", b, err)
	}
	// A file given that does not exist is a bad argument (issue 43: exit 2).
	if _, err := ReadInput(filepath.Join(t.TempDir(), "missing"), nil); !errors.As(err, &usage) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a missing file is a usage error: %v", err)
	}
}
