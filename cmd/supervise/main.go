// Command supervise runs an AI agent as its child, journals what the agent
// is doing, and after a dirty death decides per session whether to resume
// the interrupted turn or park it, before it relaunches the agent.
//
// See `supervise --help` for the commands, flags and exit codes.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/supervise-dev/supervise/cmd/internal/notifycmd"
	"github.com/supervise-dev/supervise/cmd/supervise/internal/chaoscmd"
	"github.com/supervise-dev/supervise/cmd/supervise/internal/ctlcmd"
	"github.com/supervise-dev/supervise/cmd/supervise/internal/demo"
	"github.com/supervise-dev/supervise/cmd/supervise/internal/statecmd"
	"github.com/supervise-dev/supervise/cmd/supervise/internal/unit"
	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/runflags"
)

// Exit codes: the one table is internal/exitcode, printed by --help.
const (
	exitOK       = exitcode.OK
	exitInternal = exitcode.Internal
	exitUsage    = exitcode.Usage
	exitLocked   = exitcode.Locked
)

// usage is the top-level help: usageText and the exit-code table.
func usage() string { return usageText + exitcode.Help() }

const usageText = `supervise runs an AI agent as its child and keeps its work alive across crashes.

Usage:
  supervise [run] [flags] -- AGENT [ARGS...]   supervise one agent (the main job)
  supervise status [--json] [--all | --session ID]
                                               child, sessions and recent runs (live, or from the journal)
  supervise ls [--json] [--root DIR]           every agent, live or not, and who needs a person
  supervise resume SESSION                     resume a parked, stopped or pending session by hand
  supervise stop | restart                     stop the agent's supervise (exit 0), or relaunch its agent now
  supervise events [-f]                        what --on-event is run for, as JSON lines (parks, waits, a give-up)
  supervise logs [-f] [-n LINES]               the agent's stdout and stderr, kept in the state dir (--log-keep)
  supervise notify EVENT [flags]               send a notify message (for agent hooks)
  supervise unit systemd|launchd [flags] -- AGENT [ARGS...]
                                               print a service unit that runs supervise
  supervise demo                               watch a demo agent crash, resume and park
  supervise chaos [flags] -- AGENT [ARGS...]   kill your own agent mid-turn, check how it resumes
  supervise version                            print supervise's version (also --version)

Interactive agents: run the CLI with no task prompt, and its interactive
resume line as --resume-exec; after a death mid-turn supervise relaunches it
in the same terminal, and the same conversation continues there:
  supervise --resume-exec 'claude -r {session} {message}' -- claude
  supervise --resume-exec 'codex resume {session} {message}' -- codex
  supervise --resume-exec 'gemini -r {session} -i {message}' -- gemini
While the agent holds the terminal, supervise's log goes to supervise.log in
the state dir (docs/interactive.md).

Run 'supervise COMMAND --help' for a command's flags. Every flag can also be
set with SUPERVISE_<FLAG> in the environment (--stop-timeout: SUPERVISE_STOP_TIMEOUT);
the command line wins.

`

// commands are the subcommands a typo is matched against.
func commands() []string {
	return []string{"run", "status", "ls", "resume", "stop", "restart", "events", "logs", "notify", "unit", "demo", "chaos", "version", "help"}
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is main without the process exit, so tests can call it.
func run(ctx context.Context, args []string, stdin *os.File, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 && (!strings.HasPrefix(args[0], "-") || args[0] == "--version" || args[0] == "-version") {
		cmd, args = strings.TrimLeft(args[0], "-"), args[1:]
	}
	switch cmd {
	case "run":
		return runCmd(ctx, args, stdin, stdout, stderr)
	case "status", "ls", "resume", "events", "logs":
		return statecmd.Command(ctx, cmd, args, stdout, stderr)
	case "notify":
		return notifycmd.Run(ctx, args, stdin, stdout, stderr)
	case "stop", "restart":
		return ctlcmd.Command(ctx, cmd, args, stdout, stderr)
	case "unit":
		return unit.Command(args, stdout, stderr)
	case "demo":
		return demo.Command(ctx, args, stdout, stderr)
	case "chaos":
		return chaoscmd.Run(ctx, args, stdout, stderr)
	case "demo-agent":
		return demo.AgentCommand(ctx, args, stderr)
	case "version":
		fmt.Fprintln(stdout, "supervise", runflags.Version())
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage())
		return exitOK
	}
	hint := ""
	if near := runflags.Nearest(cmd, commands()); near != "" {
		hint = "did you mean " + near + "? "
	}
	fmt.Fprintf(stderr, "supervise: unknown command %q (%sto supervise a program, put it after --: supervise -- %s)\n\n%s", cmd, hint, cmd, usage())
	return exitUsage
}
