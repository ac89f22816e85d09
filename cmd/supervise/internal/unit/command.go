package unit

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/runflags"
)

// usage prints the help of `supervise unit`.
func usage(fs *flag.FlagSet, w io.Writer) func() {
	return func() {
		fmt.Fprint(w, `Usage: supervise unit systemd|launchd [--user-unit] [run flags] -- AGENT [ARGS...]

Prints a service unit that keeps supervise running AGENT: a systemd service
(Type=notify, watchdog, KillMode=mixed) or a launchd LaunchAgent plist
(KeepAlive with SuccessfulExit=false). Only the run flags given here are
written into the unit, with --name always; SUPERVISE_* variables of this
shell are not read, so the unit does not depend on where it was generated.
AGENT is resolved to an absolute path now, and so is supervise itself; the
current directory and PATH are recorded for the agent.

Flags:
`)
		prev := fs.Output()
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(prev)
	}
}

// Command is `supervise unit` with args (after the word unit): it prints a
// systemd unit or a launchd plist that runs `supervise run` with the given
// run flags and agent, and returns the exit status (0, or 2 for usage).
func Command(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise unit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f runflags.Flags
	f.Register(fs)
	user := fs.Bool("user-unit", false, "systemd: a user unit (for ~/.config/systemd/user) instead of a system unit; launchd plists are always per-user LaunchAgents. (--user USER[:GROUP] is the run flag: the agent runs as that user, supervise as root)")
	fs.Usage = func() {} // the help is printed below for -h; a bad flag gets a hint
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			usage(fs, stdout)()
			return exitcode.OK
		}
		fmt.Fprintln(stderr, "supervise unit: which kind? supervise unit systemd|launchd [flags] -- AGENT [ARGS...]")
		return exitcode.Usage
	}
	kind, args := args[0], args[1:]
	if kind != "systemd" && kind != "launchd" {
		fmt.Fprintf(stderr, "supervise unit: unknown kind %q: want systemd or launchd\n", kind)
		return exitcode.Usage
	}
	// Plain Parse, not runflags.Parse: the environment of the shell that
	// generates a unit is not the environment the unit runs in.
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(fs, stdout)()
			return exitcode.OK
		}
		if line := runflags.DidYouMean(fs, args); line != "" {
			fmt.Fprintf(stderr, "supervise unit: %s\n", line)
		}
		fmt.Fprintln(stderr, "Run 'supervise unit --help' for the flags.")
		return exitcode.Usage
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["resume-exec"] {
		// A service manager restarts supervise when it exits non-zero (5
		// for a parked session, the agent's status after a failed turn),
		// and the restart would run the task again as a new session.
		fmt.Fprintf(stderr, "supervise unit %s: --resume-exec is task mode: the task runs once and supervise ends, but a service unit restarts supervise and would run the task again; run the task with supervise directly (or from a job of your own that does not restart it)\n", kind)
		return exitcode.Usage
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintf(stderr, "supervise unit %s: no agent: supervise unit %s [flags] -- AGENT [ARGS...]\n", kind, kind)
		return exitcode.Usage
	}
	system := kind == "systemd" && !*user
	if system {
		f.SetEUID(0) // a system unit runs supervise as root: --user is for it to use
	}
	spec, err := newSpec(fs, &f, set, argv, system)
	if err != nil {
		fmt.Fprintf(stderr, "supervise unit %s: %v\n", kind, err)
		return exitcode.Usage
	}
	spec.User = *user
	if spec.TempExe {
		fmt.Fprintf(stderr, "supervise unit %s: warning: %s looks like a temporary go run build; run go install and generate the unit with the installed binary\n", kind, spec.Exe)
	}
	var out string
	if kind == "systemd" {
		out, err = Systemd(spec)
	} else {
		out, err = Launchd(spec)
	}
	if err != nil {
		fmt.Fprintf(stderr, "supervise unit %s: %v\n", kind, err)
		return exitcode.Usage
	}
	if _, err := io.WriteString(stdout, out); err != nil {
		return exitcode.Internal
	}
	return exitcode.OK
}

// newSpec validates the run flags as `run` would and resolves every
// path the unit needs. system is true for a systemd system unit, whose
// state dir cannot default to a home directory.
func newSpec(fs *flag.FlagSet, f *runflags.Flags, set map[string]bool, argv []string, system bool) (Spec, error) {
	var spec Spec
	// The same checks and name derivation as run; the config is discarded.
	cfg, _, err := f.Config(set, argv, nil, io.Discard)
	if err != nil {
		return spec, err
	}
	if HasControl(cfg.Name) {
		return spec, fmt.Errorf("--name %q: control characters %w", cfg.Name, ErrValue)
	}
	spec.Name, spec.StopTimeout = cfg.Name, cfg.StopTimeout
	if spec.Exe, err = os.Executable(); err != nil {
		return spec, fmt.Errorf("cannot find the supervise binary: %w", err)
	}
	spec.TempExe = IsTempBuild(spec.Exe)
	agent, err := exec.LookPath(argv[0])
	if err != nil {
		return spec, fmt.Errorf("agent: %w", err)
	}
	if spec.Agent, err = filepath.Abs(agent); err != nil {
		return spec, fmt.Errorf("agent: %w", err)
	}
	switch {
	case set["state-dir"]:
		spec.StateDir = cfg.StateDir
	case system:
		spec.StateDirRel = "supervise/" + spec.Name
		spec.StateDir = filepath.Join(SystemStateBase, spec.Name)
	}
	spec.Args = []string{"run", "--name=" + spec.Name}
	if spec.StateDir != "" {
		spec.Args = append(spec.Args, "--state-dir="+spec.StateDir)
	}
	// Only the flags given on this command line, in the --flag=value form
	// so that no value can be taken for a flag or an argument.
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "name", "state-dir", "user-unit":
			return
		}
		spec.Args = append(spec.Args, "--"+fl.Name+"="+fl.Value.String())
	})
	spec.Args = append(spec.Args, "--", spec.Agent)
	spec.Args = append(spec.Args, argv[1:]...)
	if wd, err := os.Getwd(); err == nil && !HasControl(wd) {
		spec.WorkDir = wd
	}
	spec.Path = AbsPath(os.Getenv("PATH"))
	if home, err := os.UserHomeDir(); err == nil {
		// Flat in ~/Library/Logs: launchd creates a missing log file but not
		// a missing directory, and then does not start the job at all.
		spec.LogFile = filepath.Join(home, "Library", "Logs", LabelPrefix+FileName(spec.Name)+".log")
	}
	return spec, nil
}
