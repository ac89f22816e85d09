// Command supervise runs an AI agent as its child, journals what the agent
// is doing, and after a dirty death decides per session whether to resume
// the interrupted turn or park it, before it relaunches the agent.
//
// See `supervise --help` for the commands, flags and exit codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit codes. The table is printed by --help and is a public contract.
const (
	exitOK       = 0 // clean end: the agent finished, or a requested stop completed
	exitInternal = 1 // supervise failed (journal, sockets, ...)
	exitUsage    = 2 // bad command line or environment value
	exitLocked   = 3 // another supervise holds this state dir
	exitGaveUp   = 4 // the give-up limit was reached (crash loop); an outer manager takes over
	exitParked   = 5 // task mode: a session is parked (or its resume held); stderr says how to resume it
)

const exitTable = `Exit codes:
  0        the agent ended cleanly and is not restarted, or a requested stop completed
  1        supervise itself failed (journal, sockets); the log says what
  2        bad command line or SUPERVISE_* value
  3        another supervise holds this state dir (the message names its pid)
  4        gave up: --give-up consecutive quick deaths (off by default)
  5        task mode (--resume-exec): a session is parked, or its resume is held;
           stderr names it, says why, and gives the command that resumes it
  126,127  the agent could not be started (not executable, not found)
  N        with --restart never, or on-failure after a clean exit, or at the end of
           a task whose last turn did not complete: the agent's own exit status,
           128+S when it was killed by signal S
  128+S    a second stop signal S forced the agent down during its grace period
`

const usageText = `supervise runs an AI agent as its child and keeps its work alive across crashes.

Usage:
  supervise [run] [flags] -- AGENT [ARGS...]   supervise one agent (the main job)
  supervise status [--json] [--all]            child, sessions and recent runs
  supervise resume SESSION                     resume a parked or stopped session
  supervise notify EVENT [flags]               send a notify message (for agent hooks)
  supervise unit systemd|launchd [flags] -- AGENT [ARGS...]
                                               print a service unit that runs supervise
  supervise demo                               watch a demo agent crash, resume and park

Run 'supervise COMMAND --help' for a command's flags. Every flag can also be
set with SUPERVISE_<FLAG> in the environment (--stop-timeout: SUPERVISE_STOP_TIMEOUT);
the command line wins.

` + exitTable

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is main without the process exit, so tests can call it.
func run(ctx context.Context, args []string, stdin *os.File, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return runCmd(ctx, args, stdin, stdout, stderr)
	case "status":
		return statusCmd(ctx, args, stdout, stderr)
	case "notify":
		return notifyCmd(ctx, args, stdin, stdout, stderr)
	case "resume":
		return resumeCmd(ctx, args, stdout, stderr)
	case "unit":
		return unitCmd(args, stdout, stderr)
	case "demo":
		return demoCmd(ctx, args, stdout, stderr)
	case "demo-agent":
		return demoAgentCmd(ctx, args, stderr)
	case "help":
		fmt.Fprint(stdout, usageText)
		return exitOK
	case "-h", "--help":
		fmt.Fprint(stdout, usageText)
		return exitOK
	}
	fmt.Fprintf(stderr, "supervise: unknown command %q (to supervise a program, put it after --: supervise -- %s)\n\n%s", cmd, cmd, usageText)
	return exitUsage
}

// usageExit maps a parse error to an exit code.
func usageExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}
