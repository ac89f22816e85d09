package runflags

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// parse registers the run flags on a fresh FlagSet and parses args with the
// environment overlay, as `supervise run` does.
func parse(t *testing.T, args ...string) (*Flags, map[string]bool, string, string, error) {
	t.Helper()
	fs := flag.NewFlagSet("supervise run", flag.ContinueOnError)
	var stdout, stderr bytes.Buffer
	fs.SetOutput(&stderr)
	var f Flags
	f.Register(fs)
	fs.Usage = func() { io.WriteString(fs.Output(), "USAGE\n") }
	set, err := Parse(fs, args, &stdout, &stderr)
	return &f, set, stdout.String(), stderr.String(), err
}

func TestEnvName(t *testing.T) {
	for flag, want := range map[string]string{"stop-timeout": "SUPERVISE_STOP_TIMEOUT", "name": "SUPERVISE_NAME",
		"resume-exec": "SUPERVISE_RESUME_EXEC", "max-rss": "SUPERVISE_MAX_RSS"} {
		if got := EnvName(flag); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", flag, got, want)
		}
	}
}

// SUPERVISE_<FLAG> fills the flags the command line did not set; the
// command line wins; Source names where a value came from.
func TestParseEnvOverlay(t *testing.T) {
	t.Setenv("SUPERVISE_STOP_TIMEOUT", "3s")
	t.Setenv("SUPERVISE_RESTART", "never")
	t.Setenv("SUPERVISE_GIVE_UP", "7")
	f, set, out, errs, err := parse(t, "--restart", "always", "--", "agent", "--restart")
	if err != nil || out != "" || errs != "" {
		t.Fatalf("Parse: %v, stdout %q, stderr %q", err, out, errs)
	}
	if f.stopTimeout != 3*time.Second || f.giveUp != 7 || f.restart != "always" {
		t.Errorf("stop-timeout %v, give-up %d, restart %q; want 3s (env), 7 (env), always (command line)", f.stopTimeout, f.giveUp, f.restart)
	}
	if !set["restart"] || set["stop-timeout"] || set["give-up"] {
		t.Errorf("set = %v: only the command line's flags belong in it", set)
	}
	for name, want := range map[string]string{"restart": "--restart", "stop-timeout": "SUPERVISE_STOP_TIMEOUT", "watchdog": "--watchdog"} {
		if got := Source(name, set); got != want {
			t.Errorf("Source(%q) = %q, want %q", name, got, want)
		}
	}
}

// Parse's errors: -h prints the usage once on stdout (flag.ErrHelp); a bad
// flag or a bad environment value is ErrUsage with its message on stderr.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		args           []string
		env            string // NAME=VALUE
		err            error
		stdout, stderr string
	}{
		{args: []string{"-h"}, err: flag.ErrHelp, stdout: "USAGE\n"},
		{args: []string{"--help"}, err: flag.ErrHelp, stdout: "USAGE\n"},
		{args: []string{"--bogus"}, err: ErrUsage, stderr: "flag provided but not defined: -bogus\nRun 'supervise run -h' for help.\n"},
		// A bad duration says what to type, naming the flag and the value.
		{args: []string{"--stop-timeout", "10"}, err: ErrUsage, stderr: "supervise: --stop-timeout 10: a duration needs a unit, e.g. 10s or 500ms\nRun 'supervise run -h' for help.\n"},
		{args: []string{"--guard-gap=2.5"}, err: ErrUsage, stderr: "supervise: --guard-gap 2.5: a duration needs a unit, e.g. 10s or 500ms\nRun 'supervise run -h' for help.\n"},
		{args: []string{"--stop-timeout", "zz"}, err: ErrUsage, stderr: "supervise: --stop-timeout zz: not a duration: a number with a unit, e.g. 10s, 500ms or 1m30s\nRun 'supervise run -h' for help.\n"},
		{env: "SUPERVISE_STOP_TIMEOUT=10", err: ErrUsage, stderr: "supervise: invalid value \"10\" for SUPERVISE_STOP_TIMEOUT: a duration needs a unit, e.g. 10s or 500ms\n"},
		{env: "SUPERVISE_STOP_TIMEOUT=zz", err: ErrUsage, stderr: "supervise: invalid value \"zz\" for SUPERVISE_STOP_TIMEOUT: not a duration: a number with a unit, e.g. 10s, 500ms or 1m30s\n"},
		// A bad duration after a good one: the bad one is named.
		{args: []string{"--watchdog", "1s", "--backoff-max", "3"}, err: ErrUsage, stderr: "supervise: --backoff-max 3: a duration needs a unit, e.g. 10s or 500ms\nRun 'supervise run -h' for help.\n"},
		{env: "SUPERVISE_GIVE_UP=many", err: ErrUsage, stderr: "supervise: invalid value \"many\" for SUPERVISE_GIVE_UP: parse error\n"},
		{env: "SUPERVISE_FINGERPRINT=", err: ErrUsage, stderr: "supervise: invalid value \"\" for SUPERVISE_FINGERPRINT: empty file name\n"},
		// A bad value in the environment is not read when the command line sets the flag.
		{args: []string{"--stop-timeout", "1s"}, env: "SUPERVISE_STOP_TIMEOUT=zz"},
	} {
		if c.env != "" {
			k, v, _ := strings.Cut(c.env, "=")
			t.Setenv(k, v)
		}
		_, _, out, errs, err := parse(t, c.args...)
		if !errors.Is(err, c.err) || (c.err == nil && err != nil) || out != c.stdout || errs != c.stderr {
			t.Errorf("%v %s: %v, stdout %q, stderr %q; want %v, %q, %q", c.args, c.env, err, out, errs, c.err, c.stdout, c.stderr)
		}
		if c.env != "" {
			k, _, _ := strings.Cut(c.env, "=")
			os.Unsetenv(k)
		}
	}
}

// After Parse, fs.Usage prints the full usage again, for the caller's own
// usage errors (`supervise resume` without a SESSION printed nothing).
func TestParseKeepsUsage(t *testing.T) {
	fs := flag.NewFlagSet("supervise resume", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.Usage = func() { io.WriteString(fs.Output(), "USAGE\n") }
	for _, args := range [][]string{nil, {"-h"}, {"--bogus"}} {
		out.Reset()
		Parse(fs, args, &out, &out)
		out.Reset()
		fs.SetOutput(&out)
		fs.Usage()
		if out.String() != "USAGE\n" {
			t.Errorf("after Parse(%q), fs.Usage printed %q", args, out.String())
		}
	}
}

// Config's checks: each bad value is an error naming its source (the flag,
// or its environment variable) in the words supervise prints before exit 2.
func TestConfigErrors(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--restart=bad"}, "", `--restart: "bad": restart mode must be on-failure, always or never`},
		{nil, "SUPERVISE_RESTART=bad", `SUPERVISE_RESTART: "bad": restart mode must be on-failure, always or never`},
		{[]string{"--stop-signal=FOO"}, "", `--stop-signal: unknown signal "FOO"`},
		{[]string{"--resume-signal=NOPE"}, "", `--resume-signal: unknown signal "NOPE"`},
		{[]string{"--stop-timeout=-1s"}, "", "--stop-timeout must not be negative"},
		{nil, "SUPERVISE_TURN_TIMEOUT=-1m", "SUPERVISE_TURN_TIMEOUT must not be negative"},
		{[]string{"--give-up=-1"}, "", "--give-up, --guard-trip, --resume-limit and --max-turn-age and --keep-sessions must be >= 0, --keep-runs >= 1"},
		{[]string{"--keep-sessions=-1"}, "", "--give-up, --guard-trip, --resume-limit and --max-turn-age and --keep-sessions must be >= 0, --keep-runs >= 1"},
		{[]string{"--keep-runs=0"}, "", "--give-up, --guard-trip, --resume-limit and --max-turn-age and --keep-sessions must be >= 0, --keep-runs >= 1"},
		{[]string{"--cgroup=x"}, "", `--cgroup must be auto or off, not "x"`},
		{[]string{"--watchdog=1ns"}, "", "--watchdog must be 0 (off) or at least 100ms, not 1ns: an agent cannot ping that often"},
		{[]string{"--backoff-max=1ms", "--backoff-initial=1s"}, "", "--backoff-max (1ms) is below --backoff-initial (1s)"},
		{nil, "SUPERVISE_CGROUP=x", `SUPERVISE_CGROUP must be auto or off, not "x"`},
		{[]string{"--resume=x"}, "", `--resume must be auto or off, not "x"`},
		{[]string{"--resume-exec={bogus}"}, "", "--resume-exec: bad --resume-exec template"},
		// A placeholder typo would reach the model as literal text.
		{[]string{"--resume-exec=claude -p -r {session} {mesage}"}, "", "--resume-exec: bad --resume-exec template: unknown placeholder {mesage} (the known ones are {session}, {message} and {turn})"},
		{[]string{"--resume-message=go on: {promt}"}, "", "--resume-message: unknown placeholder {promt} (the known ones are {session} {turn} {how} {phase} {tool} {detail} {prompt} {effects})"},
		{nil, "SUPERVISE_RESUME_MESSAGE=session {sesion}", "SUPERVISE_RESUME_MESSAGE: unknown placeholder {sesion}"},
		{[]string{"--phase-timeout=gpu=1m"}, "", `--phase-timeout: unknown phase "gpu": the phases with deadlines are model and tool`},
		{nil, "SUPERVISE_PHASE_TIMEOUT=x", `SUPERVISE_PHASE_TIMEOUT: "x" is not PHASE=DURATION (e.g. model=10m,tool=30m)`},
		{[]string{"--max-rss=abc"}, "", `--max-rss: bad size "abc": not a number; want bytes or a whole number with K, M, G or T (powers of 1024: 512M, 2G, 1.5GiB)`},
		{nil, "SUPERVISE_MAX_RSS=-1", `SUPERVISE_MAX_RSS: bad size "-1": not a number`},
		// A size that fails to parse never turns the memory guard off.
		{[]string{"--max-rss=NaN"}, "", `--max-rss: bad size "NaN": not a number`},
		{[]string{"--max-rss=Inf"}, "", `--max-rss: bad size "Inf": not a number`},
		{[]string{"--max-rss=1e30"}, "", `--max-rss: bad size "1e30": not a number`},
		{[]string{"--max-rss=99999999999999999999"}, "", `--max-rss: bad size "99999999999999999999": too large`},
		{[]string{"--max-rss=0.1K"}, "", `--max-rss: bad size "0.1K": not a whole number of bytes`},
		{[]string{"--state-dir="}, "", "--state-dir is empty: give a directory"},
		{[]string{"--state-dir", " "}, "", "--state-dir is empty: give a directory"},
		{[]string{"--name="}, "", "--name is empty"},
		{[]string{"--fingerprint=/nonexistent/fp"}, "", "--fingerprint: stat /nonexistent/fp: no such file or directory"},
		{[]string{"--log-level=loud"}, "", "--log-level: slog: level string \"loud\": unknown name"},
		{[]string{"--log-format=xml"}, "", `--log-format must be text or json, not "xml"`},
		{[]string{"--foreground=x"}, "", `--foreground must be auto, always or never, not "x"`},
		{[]string{"--name=a/b"}, "", `invalid --name "a/b": it names a directory, so no slashes`},
		{[]string{"--name=.."}, "", `invalid --name "..": it names a directory, so no slashes`},
		// A listen address is checked before anything starts: exit 2, not 1.
		{[]string{"--metrics-addr=nope"}, "", "--metrics-addr nope: want HOST:PORT or :PORT, e.g. 127.0.0.1:9090"},
		{[]string{"--metrics-addr=127.0.0.1"}, "", "--metrics-addr 127.0.0.1: want HOST:PORT or :PORT, e.g. 127.0.0.1:9090"},
		{[]string{"--metrics-addr=localhost:"}, "", "--metrics-addr localhost:: want HOST:PORT or :PORT, e.g. 127.0.0.1:9090"},
		{[]string{"--metrics-addr=:99999"}, "", `--metrics-addr :99999: bad port "99999": want a number from 0 to 65535`},
		{nil, "SUPERVISE_METRICS_ADDR=:nope-no-such-service", `SUPERVISE_METRICS_ADDR :nope-no-such-service: bad port "nope-no-such-service"`},
	} {
		if c.env != "" {
			k, v, _ := strings.Cut(c.env, "=")
			t.Setenv(k, v)
		}
		f, set, _, errs, err := parse(t, c.args...)
		if err != nil {
			t.Fatalf("%v %s: Parse: %v (%s)", c.args, c.env, err, errs)
		}
		_, _, err = f.Config(set, []string{"agent"}, nil, io.Discard)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v %s: Config error %v; want %q", c.args, c.env, err, c.want)
		}
		if c.env != "" {
			k, _, _ := strings.Cut(c.env, "=")
			os.Unsetenv(k)
		}
	}
}

// Config turns valid flags into the supervisor configuration they mean.
func TestConfigValues(t *testing.T) {
	state := t.TempDir()
	fp := filepath.Join(state, "pin")
	if err := os.WriteFile(fp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SUPERVISE_WATCHDOG", "20s")
	f, set, _, _, err := parse(t, "--state-dir", state, "--restart=never", "--stop-signal=INT", "--resume-signal=SIGUSR1",
		"--max-rss=1.5G", "--phase-timeout=tool=30m", "--turn-timeout=1h", "--fingerprint", fp, "--resume=off",
		"--resume-exec=claude -p -r {session} {message}", "--cgroup=off", "--foreground=never", "--guard-trip=0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, log, err := f.Config(set, []string{"/bin/agent", "x"}, nil, io.Discard)
	if err != nil || log == nil {
		t.Fatalf("Config: %v", err)
	}
	abs, _ := filepath.Abs(state)
	if cfg.StateDir != abs || cfg.Name != filepath.Base(abs) {
		t.Errorf("state dir %q, name %q; want %q, %q", cfg.StateDir, cfg.Name, abs, filepath.Base(abs))
	}
	if cfg.StopSignal != syscall.SIGINT || cfg.ResumeSignal != syscall.SIGUSR1 || cfg.Watchdog != 20*time.Second {
		t.Errorf("stop signal %v, resume signal %v, watchdog %v", cfg.StopSignal, cfg.ResumeSignal, cfg.Watchdog)
	}
	if cfg.MaxRSS != 3<<29 || cfg.Deadlines.Tool != 30*time.Minute || cfg.Deadlines.Turn != time.Hour || cfg.Deadlines.Model != 0 {
		t.Errorf("max rss %d, deadlines %+v", cfg.MaxRSS, cfg.Deadlines)
	}
	if len(cfg.Fingerprint) != 1 || cfg.Fingerprint[0] != fp || !cfg.ResumeOff || !cfg.NoCgroups || cfg.Foreground {
		t.Errorf("fingerprint %v, resume off %v, no cgroups %v, foreground %v", cfg.Fingerprint, cfg.ResumeOff, cfg.NoCgroups, cfg.Foreground)
	}
	if strings.Join(cfg.ResumeExec, " ") != "claude -p -r {session} {message}" || cfg.Guard.Trip != 0 {
		t.Errorf("resume exec %q, guard %+v", cfg.ResumeExec, cfg.Guard)
	}
	if strings.Join(cfg.Argv, " ") != "/bin/agent x" {
		t.Errorf("argv %q", cfg.Argv)
	}
}

// Resolve's order: --state-dir, then --name, then SUPERVISE_STATE_DIR, then
// SUPERVISE_NAME, then the default name; with none, the one existing state
// dir under the base.
func TestResolve(t *testing.T) {
	base := t.TempDir()
	t.Setenv("XDG_STATE_HOME", base)
	sup := filepath.Join(base, "supervise")
	for _, c := range []struct {
		args      []string
		env       string
		def       string
		dir, name string
		err       string
	}{
		{args: []string{"--state-dir", "/tmp/x/y"}, dir: "/tmp/x/y", name: "y"},
		{args: []string{"--state-dir", "/tmp/x/y", "--name", "n"}, dir: "/tmp/x/y", name: "n"},
		{args: []string{"--name", "n"}, env: "SUPERVISE_STATE_DIR=/tmp/e", dir: filepath.Join(sup, "n"), name: "n"},
		{env: "SUPERVISE_STATE_DIR=/tmp/e", def: "agent", dir: "/tmp/e", name: "e"},
		{env: "SUPERVISE_NAME=m", def: "agent", dir: filepath.Join(sup, "m"), name: "m"},
		{def: "agent", dir: filepath.Join(sup, "agent"), name: "agent"},
		{err: "no supervise state found under " + sup + ": pass --state-dir or --name"},
		{args: []string{"--name", "a/b"}, err: `invalid --name "a/b": it names a directory, so no slashes`},
	} {
		if c.env != "" {
			k, v, _ := strings.Cut(c.env, "=")
			t.Setenv(k, v)
		}
		fs := flag.NewFlagSet("supervise status", flag.ContinueOnError)
		var s State
		s.Register(fs)
		set, err := Parse(fs, c.args, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		dir, name, err := s.Resolve(set, c.def)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%v %s: error %v, want %q", c.args, c.env, err, c.err)
			}
		} else if err != nil || dir != c.dir || name != c.name {
			t.Errorf("%v %s: %q, %q, %v; want %q, %q", c.args, c.env, dir, name, err, c.dir, c.name)
		}
		if c.env != "" {
			k, _, _ := strings.Cut(c.env, "=")
			os.Unsetenv(k)
		}
	}
	// One existing state dir is picked without a name; two need one.
	for _, n := range []string{"one", "two"} {
		if err := os.MkdirAll(filepath.Join(sup, n), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sup, n, "journal.db"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var s State
		dir, name, err := s.Resolve(map[string]bool{}, "")
		switch n {
		case "one":
			if err != nil || dir != filepath.Join(sup, "one") || name != "one" {
				t.Errorf("one state dir: %q, %q, %v", dir, name, err)
			}
		case "two":
			if want := "several supervised agents under " + sup + " (one, two): pick one with --name"; err == nil || err.Error() != want {
				t.Errorf("two state dirs: %v, want %q", err, want)
			}
		}
	}
}

// ExitCode: -h is success, every other parse error is a usage error (2).
func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{{[]string{"-h"}, 0}, {[]string{"--bogus"}, 2}, {[]string{"--stop-timeout", "x"}, 2}} {
		_, _, _, _, err := parse(t, c.args...)
		if got := ExitCode(err); got != c.want {
			t.Errorf("%q: ExitCode(%v) = %d, want %d", c.args, err, got, c.want)
		}
	}
}

// --max-open-sessions: 1000 by default, SUPERVISE_MAX_OPEN_SESSIONS under
// the command line, and below 1 a usage error (exit 2).
func TestConfigMaxOpenSessions(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, c := range []struct {
		args []string
		env  string
		err  string
		want int
	}{
		{want: 1000},
		{args: []string{"--max-open-sessions=1"}, want: 1},
		{env: "SUPERVISE_MAX_OPEN_SESSIONS=50", want: 50},
		{args: []string{"--max-open-sessions=7"}, env: "SUPERVISE_MAX_OPEN_SESSIONS=50", want: 7},
		{args: []string{"--max-open-sessions=0"}, err: "--max-open-sessions must be at least 1, not 0"},
		{env: "SUPERVISE_MAX_OPEN_SESSIONS=-5", err: "SUPERVISE_MAX_OPEN_SESSIONS must be at least 1, not -5"},
	} {
		if c.env != "" {
			k, v, _ := strings.Cut(c.env, "=")
			t.Setenv(k, v)
		}
		f, set, _, errs, err := parse(t, c.args...)
		if err != nil {
			t.Fatalf("%v %s: Parse: %v (%s)", c.args, c.env, err, errs)
		}
		_, _, err = f.Config(set, []string{"agent"}, nil, io.Discard)
		switch {
		case c.err != "":
			if err == nil || err.Error() != c.err {
				t.Errorf("%v %s: error %v, want %q", c.args, c.env, err, c.err)
			}
		case err != nil || f.maxOpen != c.want:
			t.Errorf("%v %s: %v, max open sessions %d; want %d", c.args, c.env, err, f.maxOpen, c.want)
		}
		if c.env != "" {
			k, _, _ := strings.Cut(c.env, "=")
			os.Unsetenv(k)
		}
	}
}

// --user: off by default, SUPERVISE_USER under the command line, resolved
// to the user's credential; refused (exit 2) without root (the uid given
// to SetEUID), or for an unknown user or group, leaving no credential.
func TestConfigUser(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("this machine has no user nobody: %v", err)
	}
	uid, _ := strconv.ParseUint(nobody.Uid, 10, 32)
	gid, _ := strconv.ParseUint(nobody.Gid, 10, 32)
	for _, c := range []struct {
		args     []string
		env      string
		euid     int
		err      string
		none     bool   // no credential
		uid, gid uint64 // of the credential
	}{
		{euid: 1000, none: true},
		{args: []string{"--user="}, euid: 1000, none: true},
		{args: []string{"--user=nobody"}, euid: 1000, err: "--user needs root: supervise runs as uid 1000"},
		{env: "SUPERVISE_USER=nobody", euid: 501, err: "SUPERVISE_USER needs root: supervise runs as uid 501"},
		{args: []string{"--user=no-such-user-21"}, err: `--user: unknown user "no-such-user-21"`},
		{env: "SUPERVISE_USER=no-such-user-21", err: `SUPERVISE_USER: unknown user "no-such-user-21"`},
		{args: []string{"--user=nobody:no-such-group-21"}, err: `--user: unknown group "no-such-group-21"`},
		{args: []string{"--user=nobody:"}, err: `--user: "nobody:" is not USER or USER:GROUP`},
		{args: []string{"--user=nobody"}, uid: uid, gid: gid},
		{args: []string{"--user=" + nobody.Uid + ":0"}, uid: uid, gid: 0},
		{env: "SUPERVISE_USER=nobody", uid: uid, gid: gid},
		{args: []string{"--user=nobody"}, env: "SUPERVISE_USER=no-such-user-21", uid: uid, gid: gid},
	} {
		if c.env != "" {
			k, v, _ := strings.Cut(c.env, "=")
			t.Setenv(k, v)
		}
		f, set, _, errs, err := parse(t, c.args...)
		if err != nil {
			t.Fatalf("%v %s: Parse: %v (%s)", c.args, c.env, err, errs)
		}
		f.SetEUID(c.euid)
		_, _, err = f.Config(set, []string{"agent"}, nil, io.Discard)
		cred := f.cred
		switch {
		case c.err != "":
			if err == nil || err.Error() != c.err || cred != nil {
				t.Errorf("%v %s (euid %d): error %v, user %v; want %q and no user", c.args, c.env, c.euid, err, cred, c.err)
			}
		case err != nil:
			t.Errorf("%v %s (euid %d): %v", c.args, c.env, c.euid, err)
		case c.none:
			if cred != nil {
				t.Errorf("%v %s: user %v, want none", c.args, c.env, cred)
			}
		case cred == nil || uint64(cred.UID) != c.uid || uint64(cred.GID) != c.gid || cred.Name != "nobody" || !slices.Contains(cred.Groups, cred.GID):
			t.Errorf("%v %s: user %+v, want nobody, uid %d gid %d, among its groups", c.args, c.env, cred, c.uid, c.gid)
		}
		if c.env != "" {
			k, _, _ := strings.Cut(c.env, "=")
			os.Unsetenv(k)
		}
	}
}

// Without SetEUID, --user is checked against this process's own uid.
func TestConfigUserNeedsRoot(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	f, set, _, _, err := parse(t, "--user=root")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = f.Config(set, []string{"agent"}, nil, io.Discard)
	if euid := os.Geteuid(); euid != 0 {
		want := "--user needs root: supervise runs as uid " + strconv.Itoa(euid)
		if err == nil || err.Error() != want {
			t.Errorf("as uid %d: %v, want %q", euid, err, want)
		}
	} else if err != nil || f.cred == nil || f.cred.UID != 0 {
		t.Errorf("as root: %v, user %v; want root", err, f.cred)
	}
}
