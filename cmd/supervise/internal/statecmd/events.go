package statecmd

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/runflags"
	"github.com/supervise-dev/supervise/supervisor"
)

// Command runs `supervise status`, `ls`, `resume`, `logs` or `events` (cmd).
func Command(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) int {
	switch cmd {
	case "status":
		return Status(ctx, args, stdout, stderr)
	case "ls":
		return Ls(ctx, args, stdout, stderr)
	case "resume":
		return Resume(ctx, args, stdout, stderr)
	case "logs":
		return Logs(ctx, args, stdout, stderr)
	}
	return Events(ctx, args, stdout, stderr)
}

// Events is `supervise events`: the event documents the agent's supervise
// kept (a park, a wait for a person, a limit's wait, a give-up: what
// --on-event is run for), one JSON line each, oldest first; -f follows
// them, across supervise's restarts.
func Events(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return kept(ctx, keptFile{cmd: "events", file: supervisor.EventsFile, n: 0,
		nHelp: "print only the last N documents (0: all kept)",
		fHelp: "follow: print new documents as they come, until interrupted",
		usage: `Usage: supervise events [--name NAME | --state-dir DIR] [-f] [-n N]

The event documents of an agent, one JSON line each, oldest first: what
--on-event is run for (a session parked or parked for a budget, waiting for
a person and no longer, waiting out a limit and no longer, supervise giving
up), each with the agent's name, its state dir, the session, the turn, the
reason and the command that acts. For an orchestrator: supervise events -f.`}, args, stdout, stderr)
}

// Logs is `supervise logs`: the agent's stdout and stderr lines its
// supervise kept in the state dir (each with its time, run and stream),
// the last -n of them; -f follows them across relaunches and rotation.
func Logs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return kept(ctx, keptFile{cmd: "logs", file: supervisor.AgentLogFile, n: 100,
		nHelp: "print the last N lines kept (0: all)",
		fHelp: "follow: print new lines as the agent writes them, across its relaunches, until interrupted",
		usage: `Usage: supervise logs [--name NAME | --state-dir DIR] [-f] [-n LINES]

The agent's stdout and stderr as its supervise kept them in the state dir,
each line with its time, run and stream (they also went where they always
go). At most --log-keep of them are kept, in two rotated files; a stream
that went to a terminal (an interactive agent's screen) is not kept.`}, args, stdout, stderr)
}

// keptFile is a file of lines supervise keeps in the state dir, rotated to
// file+".1", as a command prints it: cmd's name, the file, the default
// -n, the flags' help and the usage.
type keptFile struct {
	cmd, file, nHelp, fHelp, usage string
	n                              int
}

// kept prints the last -n lines of k's two files, oldest first, and with
// -f follows the file across rotation until ctx is done.
func kept(ctx context.Context, k keptFile, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise "+k.cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var st runflags.State
	st.RegisterLookup(fs)
	follow := fs.Bool("f", false, k.fHelp)
	n := fs.Int("n", k.n, k.nHelp)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), k.usage)
		fs.PrintDefaults()
	}
	set, err := runflags.Parse(fs, args, stdout, stderr)
	if err != nil {
		return runflags.ExitCode(err)
	}
	if fs.NArg() > 0 || *n < 0 {
		fs.Usage()
		return exitcode.Usage
	}
	dir, _, err := st.Resolve(set, "")
	if err != nil {
		fmt.Fprintf(stderr, "supervise %s: %v\n", k.cmd, err)
		return exitcode.Usage
	}
	path := filepath.Join(dir, k.file)
	var lines []string
	for _, p := range []string{path + ".1", path} {
		lines = append(lines, readLines(p)...)
	}
	if *n > 0 && len(lines) > *n {
		lines = lines[len(lines)-*n:]
	}
	for _, l := range lines {
		fmt.Fprintln(stdout, l)
	}
	if !*follow {
		return exitcode.OK
	}
	return followFile(ctx, path, stdout)
}

// readLines returns the complete lines of the file at path.
func readLines(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// followFile prints the lines appended to path from its end on, across
// a rotation (the file renamed away and made anew), until ctx is done.
func followFile(ctx context.Context, path string, stdout io.Writer) int {
	var off int64
	var ino uint64
	if fi, err := os.Stat(path); err == nil {
		off, ino = fi.Size(), inode(fi)
	}
	var partial []byte
	for {
		select {
		case <-ctx.Done():
			return exitcode.OK
		case <-time.After(200 * time.Millisecond):
		}
		fi, err := os.Stat(path)
		if err != nil {
			continue
		}
		if inode(fi) != ino || fi.Size() < off {
			off, ino, partial = 0, inode(fi), nil // rotated: the new file from its start
		}
		if fi.Size() == off {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
		f.Close()
		off += int64(len(b))
		partial = append(partial, b...)
		for {
			i := bytes.IndexByte(partial, '\n')
			if i < 0 {
				break
			}
			fmt.Fprintln(stdout, string(partial[:i]))
			partial = partial[i+1:]
		}
	}
}
