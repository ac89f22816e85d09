package demo

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/runflags"
)

// Command is `supervise demo` with args (after the word demo): the story
// of Run, told on stdout. It returns the exit status: 0 when the story went
// as told, 1 otherwise, 2 for usage.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fast := fs.Bool("fast", false, "no pauses for reading (the default when stdout is not a terminal)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: supervise demo [--fast]

Run a built-in demo agent (no network, no API key) under supervise with a
temporary state dir, through a short scripted story: the agent is killed with
kill -9 mid-turn, its session is resumed automatically, the resumed turn kills
the agent again and is parked, and a manual resume finishes it. Exit status 0
when the story went as told, 1 otherwise.`)
		fs.PrintDefaults()
	}
	if _, err := runflags.Parse(fs, args, stdout, stderr); err != nil {
		return runflags.ExitCode(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "supervise demo: unexpected argument %q\n", fs.Arg(0))
		return exitcode.Usage
	}
	sigCtx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := Options{Out: stdout}
	if !*fast && IsTerminal(stdout) {
		opts.Pause = Pause
	}
	err := Run(sigCtx, opts)
	switch {
	case err != nil && sigCtx.Err() != nil:
		fmt.Fprintln(stderr, "supervise demo: interrupted")
		return exitcode.Internal
	case err != nil:
		fmt.Fprintf(stderr, "supervise demo: %v\n", err)
		return exitcode.Internal
	}
	return exitcode.OK
}

// AgentCommand is the hidden `supervise demo-agent --events FILE`, the
// agent of `supervise demo` (RunAgent), and returns its exit status.
func AgentCommand(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise demo-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	events := fs.String("events", "", "file to append the agent's events to (JSON lines)")
	if err := fs.Parse(args); err != nil {
		return runflags.ExitCode(err)
	}
	if *events == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "Usage: supervise demo-agent --events FILE (run by supervise demo)")
		return exitcode.Usage
	}
	if err := RunAgent(ctx, *events); err != nil {
		fmt.Fprintf(stderr, "supervise demo-agent: %v\n", err)
		if errors.Is(err, ErrNotUnderSupervise) {
			return exitcode.Usage
		}
		return exitcode.Internal
	}
	return exitcode.OK
}
