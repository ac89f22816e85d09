// Package ctlcmd is `supervise stop` and `supervise restart`: requests to
// a running supervise over its control socket, which takes them only from
// outside the agent's process tree (a person's, never the agent's).
package ctlcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/runflags"
	"github.com/supervise-dev/supervise/supervisor"
)

// Command runs `supervise stop` or `supervise restart` (cmd).
func Command(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) int {
	if cmd == "restart" {
		return Restart(ctx, args, stdout, stderr)
	}
	return Stop(ctx, args, stdout, stderr)
}

// poll is how often the commands look at the supervise they asked.
const poll = 50 * time.Millisecond

// Stop is `supervise stop`: the graceful stop a SIGTERM to that supervise
// gives (the agent's stop signal, its grace, SIGKILL to the tree; open
// turns stopped, exit 0). It waits until that supervise has exited, for at
// most its --stop-timeout and a margin.
func Stop(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	dir, code := parse("stop", `Usage: supervise stop [--name NAME | --state-dir DIR]

Stop the supervise running for an agent as a SIGTERM to it would: the agent
gets its stop signal and --stop-timeout to finish, then SIGKILL to its whole
process tree; turns open at that moment are stopped (not counted, not
resumed by themselves: supervise status names them with the command that
resumes each). Waits until that supervise has exited. Refused when run from
inside the agent's own process tree.`, args, stderr)
	if code >= 0 {
		return code
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	timeout, err := supervisor.RequestStop(cctx, dir)
	cancel()
	if err != nil {
		return failed("stop", dir, err, stderr)
	}
	deadline := time.Now().Add(timeout + 10*time.Second)
	for time.Now().Before(deadline) {
		if _, err := supervisor.FetchStatus(ctx, dir, false); errors.Is(err, supervisor.ErrNoSupervisor) {
			fmt.Fprintf(stdout, "stopped: the supervise of %s has exited\n", dir)
			return exitcode.OK
		}
		time.Sleep(poll)
	}
	fmt.Fprintf(stderr, "supervise stop: the supervise of %s is still running %s after the stop was asked (--stop-timeout %s): see its log\n",
		dir, timeout+10*time.Second, timeout)
	return exitcode.Internal
}

// Restart is `supervise restart`: the running agent is stopped as by a
// requested stop and relaunched at once; the turns it interrupts are
// resumed by the new run, not counted as crashes. It waits for the new
// run's child (at most a minute).
func Restart(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	dir, code := parse("restart", `Usage: supervise restart [--name NAME | --state-dir DIR]

Restart the agent a running supervise supervises: it gets its stop signal
and --stop-timeout (then SIGKILL to its tree), and is relaunched at once.
Every turn the run was in is handed to the new run as a resume, as a person's
(never held, no crash counted, the crash-loop guard untouched). Between runs
(a backoff, a limit's wait) the launch comes now. A resume asked with
supervise resume reaches the running agent this way. A task is never started
again: restarted with no session to resume, it ends as a stop. Waits for the
new run's child. Refused when run from inside the agent's own process tree.`, args, stderr)
	if code >= 0 {
		return code
	}
	before, err := supervisor.FetchStatus(ctx, dir, false)
	if err != nil {
		return failed("restart", dir, err, stderr)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = supervisor.RequestRestart(cctx, dir)
	cancel()
	if err != nil {
		return failed("restart", dir, err, stderr)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(poll) {
		st, err := supervisor.FetchStatus(ctx, dir, false)
		switch {
		case errors.Is(err, supervisor.ErrNoSupervisor):
			fmt.Fprintf(stdout, "the supervise of %s has exited (a task with nothing to resume ends as a stop): see its log\n", dir)
			return exitcode.OK
		case err == nil && st.Child.State == "running" && st.Child.Run != before.Child.Run:
			fmt.Fprintf(stdout, "restarted: run %d, pid %d\n", st.Child.Run, st.Child.PID)
			return exitcode.OK
		}
	}
	fmt.Fprintf(stderr, "supervise restart: no new run of %s within a minute of the restart: see supervise status\n", dir)
	return exitcode.Internal
}

// parse reads the state-dir flags of command cmd; code is -1 when the
// command goes on, else the exit status to return.
func parse(cmd, help string, args []string, stderr io.Writer) (dir string, code int) {
	fs := flag.NewFlagSet("supervise "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var st runflags.State
	st.RegisterLookup(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), help)
		fs.PrintDefaults()
	}
	set, err := runflags.Parse(fs, args, io.Discard, stderr)
	if err != nil {
		return "", runflags.ExitCode(err)
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return "", exitcode.Usage
	}
	dir, _, err = st.Resolve(set, "")
	if err != nil {
		fmt.Fprintf(stderr, "supervise %s: %v\n", cmd, err)
		return "", exitcode.Usage
	}
	return dir, -1
}

// failed says why a request could not be made or was refused.
func failed(cmd, dir string, err error, stderr io.Writer) int {
	if errors.Is(err, supervisor.ErrNoSupervisor) {
		fmt.Fprintf(stderr, "supervise %s: no supervise is running for %s (supervise ls lists the agents)\n", cmd, dir)
		return exitcode.Internal
	}
	fmt.Fprintf(stderr, "supervise %s: %v (asked the supervise running in the state dir %s)\n", cmd, err, dir)
	return exitcode.Internal
}
