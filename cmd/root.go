// Package cmd holds the cobra commands of kubectl-mesh: flags, validation,
// one engine call (engine/) and one printer (render/) per command.
// Each command follows kubectl's pattern: an Options struct filled from flags,
// then Complete, Validate and Run.
package cmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/klog/v2"

	"github.com/kubectl-mesh/kubectl-mesh/engine"
	"github.com/kubectl-mesh/kubectl-mesh/render"
)

// Exit codes, documented in the README and in `kubectl mesh --help`.
const (
	ExitOK         = 0 // the command did what was asked
	ExitError      = 1 // the command failed (cluster unreachable, object not found, …)
	ExitUsage      = 2 // bad flags or arguments
	ExitIncomplete = 3 // an answer was given, but part of it could not be determined
	ExitProblem    = 4 // diagnose found a problem (a check failed)
	// ExitInterrupted is what a shell reports for a command ended by Ctrl-C
	// (128 + SIGINT), as kubectl's own commands end.
	ExitInterrupted = 130
)

// UsageError marks an error in how the command was called; it exits with ExitUsage.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// InterruptedError ends a command that was interrupted (Ctrl-C, SIGTERM)
// after it cleaned up.
type InterruptedError struct{ Err error }

func (e *InterruptedError) Error() string { return e.Err.Error() }
func (e *InterruptedError) Unwrap() error { return e.Err }

// usageErrorf builds a UsageError.
func usageErrorf(format string, a ...any) error {
	return &UsageError{Err: fmt.Errorf(format, a...)}
}

// IncompleteError marks an answer that was printed but is missing parts; it
// exits with ExitIncomplete.
type IncompleteError struct{ Err error }

func (e *IncompleteError) Error() string { return e.Err.Error() }
func (e *IncompleteError) Unwrap() error { return e.Err }

// ProblemError ends a diagnosis that found a problem; it exits with ExitProblem.
type ProblemError struct{ Err error }

func (e *ProblemError) Error() string { return e.Err.Error() }
func (e *ProblemError) Unwrap() error { return e.Err }

// NewRootCmd builds `kubectl mesh` with every subcommand. The kubectl
// connection flags (--kubeconfig, --context, -n, --as, …) are persistent, so
// they work on every subcommand.
func NewRootCmd(streams genericiooptions.IOStreams) *cobra.Command {
	configFlags := genericclioptions.NewConfigFlags(true)

	root := &cobra.Command{
		Use:   "kubectl-mesh",
		Short: "Diagnose service-mesh pods: injection, startup order and traffic capture",
		Long: `kubectl mesh explains what a service mesh did to a pod, and why.

Exit codes: 0 success, 1 error, 2 usage error, 3 answer incomplete,
4 diagnose found a problem.`,
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl mesh",
		},
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return c.Help()
		},
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &UsageError{Err: fmt.Errorf("%w\nSee '%s --help'.", err, c.CommandPath())}
	})

	configFlags.AddFlags(root.PersistentFlags())
	// klog's verbosity only; klog's other flags are not part of our interface.
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	root.PersistentFlags().AddGoFlag(klogFlags.Lookup("v"))
	color := render.ColorAuto
	root.PersistentFlags().StringVar(&color, "color", render.ColorAuto, "Colour human output: auto (on a terminal, unless NO_COLOR is set or TERM=dumb), always or never")
	_ = root.RegisterFlagCompletionFunc("color", cobra.FixedCompletions([]string{render.ColorAuto, render.ColorAlways, render.ColorNever}, cobra.ShellCompDirectiveNoFileComp))
	noHeaders := false
	root.PersistentFlags().BoolVar(&noHeaders, "no-headers", false, "Leave the header row out of tables and of -o custom-columns (as kubectl get)")
	addProfileFlags(root.PersistentFlags())
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error {
		quietKlog(c.Flags().Changed("v"), klogFlags.Lookup("v").Value.String())
		printWarnings(c.ErrOrStderr())
		// client-go reads --request-timeout only when it connects: checked
		// here, a bad one is a usage error before any request.
		if configFlags.Timeout != nil {
			if err := validateRequestTimeout(*configFlags.Timeout); err != nil {
				return err
			}
		}
		render.NoHeaders = noHeaders
		switch color {
		case render.ColorAuto, render.ColorAlways, render.ColorNever:
			render.ColorMode = color
		default:
			return &UsageError{Err: fmt.Errorf("--color must be auto, always or never, not %q", color)}
		}
		return startProfile()
	}

	root.AddCommand(NewVersionCmd(configFlags, streams))
	root.AddCommand(NewWhyInjectedCmd(configFlags, streams))
	root.AddCommand(NewIptablesCmd(configFlags, streams))
	root.AddCommand(NewStartupCmd(configFlags, streams))
	root.AddCommand(NewDiagnoseCmd(configFlags, streams))
	root.AddCommand(NewUpgradePlanCmd(configFlags, streams))
	addCompletionShim(root, configFlags, streams)
	usageOnBadArgs(root)
	return root
}

// usageOnBadArgs makes a positional-argument error of any command a UsageError.
func usageOnBadArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return &UsageError{Err: fmt.Errorf("%w\nSee '%s --help'.", err, cmd.CommandPath())}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageOnBadArgs(sub)
	}
}

// Execute runs `kubectl mesh` with args and returns the process exit code.
func Execute(args []string) int {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	root := NewRootCmd(streams)
	root.SetArgs(args)
	err := root.Execute()
	if perr := stopProfile(); perr != nil && err == nil {
		err = fmt.Errorf("writing the profile: %w", perr)
	}
	return exitCode(err, streams.ErrOut)
}

// exitCode prints err (if any) the way kubectl does and maps it to an exit code.
func exitCode(err error, errOut io.Writer) int {
	if err == nil {
		return ExitOK
	}
	var interruptedErr *InterruptedError
	if msg := connectionRefused(err); msg != "" && !errors.As(err, &interruptedErr) {
		// As kubectl says it, without a prefix.
		fmt.Fprintln(errOut, msg)
		return ExitError
	}
	if render.IsTerminal(errOut) {
		// On a terminal, wrapped to its width as the rest of the output.
		render.NewPrinter(errOut).Para("error: ", render.EscapeLines(err.Error()))
	} else {
		fmt.Fprintf(errOut, "error: %s\n", render.EscapeLines(err.Error()))
	}
	var usage *UsageError
	var input *engine.InputError
	var incomplete *IncompleteError
	var interrupted *InterruptedError
	var problem *ProblemError
	switch {
	case errors.As(err, &interrupted):
		return ExitInterrupted
	case errors.As(err, &problem):
		return ExitProblem
	case errors.As(err, &usage), errors.As(err, &input):
		return ExitUsage
	case errors.As(err, &incomplete):
		return ExitIncomplete
	default:
		return ExitError
	}
}

// validateOutput checks an -o value against the formats a command supports.
func validateOutput(format string, extra ...string) error {
	switch format {
	case "", render.JSON, render.YAML:
		return nil
	}
	if render.IsTemplate(format) {
		if _, err := render.TemplatePrinter(format); err != nil {
			return &UsageError{Err: err}
		}
		return nil
	}
	for _, e := range extra {
		if format == e {
			return nil
		}
	}
	allowed := append(append([]string{render.JSON, render.YAML}, extra...), render.TemplateFormats)
	return usageErrorf("unsupported output format %q: use one of: %s", format, oneOf(allowed))
}

// announcer says on w, one line each, what a command is about to create in
// the cluster (an ephemeral container, node pods), as kubectl debug does.
func announcer(w io.Writer) func(string) {
	// Wrapped to a terminal's width, as the rest of the output.
	return func(s string) { render.NewPrinter(w).Para("", render.Escape(s)) }
}
