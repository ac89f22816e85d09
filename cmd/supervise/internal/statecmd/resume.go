package statecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/runflags"
	"github.com/supervise-dev/supervise/supervisor"
)

// Resume is `supervise resume SESSION`, and returns its exit status.
func Resume(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise resume", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var st runflags.State
	st.RegisterLookup(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: supervise resume [--state-dir DIR | --name NAME] SESSION

Resume a parked, stopped or pending session by hand: its crash count is reset
and it is resumed by the running supervise (at once with --resume-signal, else
at the agent's next start), or at the next start of supervise. A manual resume
is dispatched even while the crash-loop guard or --resume off holds automatic
ones.`)
		fs.PrintDefaults()
	}
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	set, err := runflags.Parse(fs, args, stdout, stderr)
	if err != nil {
		return runflags.ExitCode(err)
	}
	if id == "" && fs.NArg() > 0 {
		id = fs.Arg(0)
	}
	if id == "" || fs.NArg() > 1 || (fs.NArg() == 1 && fs.Arg(0) != id) {
		fs.Usage()
		return exitcode.Usage
	}
	dir, _, err := st.Resolve(set, "")
	if err != nil {
		fmt.Fprintf(stderr, "supervise resume: %v\n", err)
		return exitcode.Usage
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	delivery, err := supervisor.ManualResume(cctx, dir, id)
	if errors.Is(err, supervisor.ErrRefused) {
		// The running supervise's answer names the session, not where it
		// looked: say which state dir that was.
		fmt.Fprintf(stderr, "supervise resume: %v (asked the supervise running in the state dir %s; supervise ls lists the others)\n", err, dir)
		return exitcode.Internal
	}
	if err != nil {
		fmt.Fprintf(stderr, "supervise resume: %v\n", err)
		return exitcode.Internal
	}
	fmt.Fprintf(stdout, "session %s will be resumed: %s\n", id, delivery)
	return exitcode.OK
}
