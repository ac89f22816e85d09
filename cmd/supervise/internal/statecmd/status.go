package statecmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/runflags"
	"github.com/supervise-dev/supervise/supervisor"
)

// Status is `supervise status`, and returns its exit status.
func Status(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var st runflags.State
	st.RegisterLookup(fs)
	asJSON := fs.Bool("json", false, "print JSON (fields as in docs/design.md and the README)")
	all := fs.Bool("all", false, "list every session (streamed, any number), not only the open ones and the latest settled ones")
	session := fs.String("session", "", "show only this session")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: supervise status [--json] [--all | --session ID] [--state-dir DIR | --name NAME]")
		fmt.Fprintln(fs.Output(), "\nBy default: the child, recent runs, every open session (mid-turn, waiting, owed a resume,\nparked, stopped), the latest settled ones and counts of sessions per state.\nWith neither --name nor --state-dir and several state dirs: every agent, as supervise ls lists them.")
		fs.PrintDefaults()
	}
	set, err := runflags.Parse(fs, args, stdout, stderr)
	if err != nil {
		return runflags.ExitCode(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "supervise status: unexpected argument %q\n", fs.Arg(0))
		return exitcode.Usage
	}
	if *all && *session != "" {
		fmt.Fprintln(stderr, "supervise status: --all and --session exclude each other")
		return exitcode.Usage
	}
	dir, name, err := st.Resolve(set, "")
	var several *runflags.SeveralError
	if errors.As(err, &several) && !*all && *session == "" {
		// No agent named and several to choose from: all of them, as
		// `supervise ls` lists them.
		fmt.Fprintf(stderr, "supervise status: %d supervised agents under %s; for one: supervise status --name NAME\n", len(several.Names), several.Root)
		return printList(ctx, several.Root, *asJSON, stdout, stderr)
	}
	if err != nil {
		if dir == "" && !set["state-dir"] && !set["name"] {
			// None found under the state root: perhaps none this user
			// may read (access.go).
			if root, rerr := runflags.StateRoot(); rerr == nil {
				if why := rootNoAccess(root); why != "" {
					fmt.Fprintf(stderr, "supervise status: %s\n", why)
					return exitNoAccess
				}
			}
		}
		fmt.Fprintf(stderr, "supervise status: %v\n", err)
		return exitcode.Usage
	}
	v := supervisor.View{All: *all, Session: *session}
	timeout := 5 * time.Second
	if v.All {
		timeout = 10 * time.Minute // streamed: as long as the journal is large
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if *asJSON {
		// Straight through, never held whole: valid at any size.
		err = supervisor.WriteStatus(ctx, stdout, dir, name, v)
	} else {
		var status supervisor.Status
		if status, err = supervisor.LoadStatusView(ctx, dir, name, v); err == nil {
			err = supervisor.WriteText(stdout, status, time.Now())
		}
	}
	if errors.Is(err, supervisor.ErrUnknownSession) {
		fmt.Fprintf(stderr, "supervise status: unknown session %q in the state dir %s (another agent's? supervise ls lists them; --name or --state-dir picks one)\n", *session, dir)
		return exitcode.Internal
	}
	if errors.Is(err, os.ErrPermission) {
		o := whose(dir)
		fmt.Fprintf(stderr, "supervise status: %s: %s\n", noAccessWords("the state dir", dir, o), readsIt(o, dir))
		return exitNoAccess
	}
	if err != nil {
		fmt.Fprintf(stderr, "supervise status: %v\n", err)
		return exitcode.Internal
	}
	return exitcode.OK
}

// rootNoAccess says why this user finds no state dir under root when it is
// because it may not read them (the root itself, or the state dirs in it),
// and whose they are; "" otherwise.
func rootNoAccess(root string) string {
	dirs, err := stateDirs(root)
	if errors.Is(err, os.ErrPermission) {
		o := whose(root)
		return noAccessWords("the state root", root, o) + ": " + o.asWhom() + "supervise status lists its agents"
	}
	for _, a := range dirs {
		if a.State == lsNoAccess {
			return a.Error
		}
	}
	return ""
}
