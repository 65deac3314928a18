package cmd

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/spf13/pflag"
)

// Profiling, as kubectl offers it: --profile names the profile and
// --profile-output the file it is written to when the command ends (the
// CPU profile covers the whole command; the others are taken at its end).
var (
	profileName   = "none"
	profileOutput = "profile.pprof"
	profileStop   func() error
)

var profileNames = []string{"none", "cpu", "heap", "allocs", "goroutine", "threadcreate", "block", "mutex"}

func addProfileFlags(flags *pflag.FlagSet) {
	flags.StringVar(&profileName, "profile", "none", "Name of the profile to capture: one of none, cpu, heap, allocs, goroutine, threadcreate, block, mutex")
	flags.StringVar(&profileOutput, "profile-output", "profile.pprof", "File the profile is written to")
	_ = flags.MarkHidden("profile")
	_ = flags.MarkHidden("profile-output")
}

// startProfile begins the profile named by --profile; stopProfile writes it.
func startProfile() error {
	switch profileName {
	case "none":
		return nil
	case "cpu":
		f, err := os.Create(profileOutput)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		profileStop = func() error {
			pprof.StopCPUProfile()
			return f.Close()
		}
		return nil
	case "block":
		runtime.SetBlockProfileRate(1)
	case "mutex":
		runtime.SetMutexProfileFraction(1)
	}
	p := pprof.Lookup(profileName)
	if p == nil {
		return &UsageError{Err: fmt.Errorf("--profile must be one of: %s, not %q", oneOf(profileNames), profileName)}
	}
	profileStop = func() error {
		f, err := os.Create(profileOutput)
		if err != nil {
			return err
		}
		if profileName == "heap" {
			runtime.GC() // the live heap at the end, as kubectl's heap profile
		}
		if err := p.WriteTo(f, 0); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	return nil
}

func stopProfile() error {
	if profileStop == nil {
		return nil
	}
	stop := profileStop
	profileStop = nil
	return stop()
}
