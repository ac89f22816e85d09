package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/supervise-dev/supervise/internal/runflags"
	"github.com/supervise-dev/supervise/supervisor"
)

func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var st runflags.State
	st.Register(fs)
	asJSON := fs.Bool("json", false, "print JSON (fields as in docs/design.md and the README)")
	all := fs.Bool("all", false, "list every session, not only open ones and those active now")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: supervise status [--json] [--all] [--state-dir DIR | --name NAME]")
		fs.PrintDefaults()
	}
	set, err := runflags.Parse(fs, args, stdout, stderr)
	if err != nil {
		return usageExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "supervise status: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	dir, name, err := st.Resolve(set, "")
	if err != nil {
		fmt.Fprintf(stderr, "supervise status: %v\n", err)
		return exitUsage
	}
	status, err := supervisor.LoadStatus(ctx, dir, name, *all)
	if err != nil {
		fmt.Fprintf(stderr, "supervise status: %v\n", err)
		return exitInternal
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(status); err != nil {
			return exitInternal
		}
		return exitOK
	}
	if err := supervisor.WriteText(stdout, status, time.Now()); err != nil {
		return exitInternal
	}
	return exitOK
}
