package main

import (
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Values of the generated units that do not come from run flags.
const (
	// unitStopMargin is added to --stop-timeout for the outer manager's
	// stop timeout: supervise needs the agent's grace period, then time to
	// SIGKILL the tree, journal the stop and close the journal.
	unitStopMargin = 10 * time.Second
	// unitWatchdog is systemd's WatchdogSec= for supervise itself, which
	// pings at half of it while its loop is healthy.
	unitWatchdog = 30 * time.Second
	// unitThrottle is launchd's ThrottleInterval= in seconds.
	unitThrottle = 10
	// unitSystemStateBase holds the state dirs of system units (systemd's
	// StateDirectory= base): a system service has no $HOME unless User= is set.
	unitSystemStateBase = "/var/lib/supervise"
	// unitLabelPrefix starts every launchd label.
	unitLabelPrefix = "dev.supervise."
)

// errUnitValue marks a value that cannot be written into a unit file.
var errUnitValue = errors.New("cannot be written into the unit")

// unitSpec is everything a generated unit says; paths are absolute.
type unitSpec struct {
	name        string   // --name of the supervised agent
	exe         string   // supervise itself
	tempExe     bool     // exe looks like a go run / go test build that will vanish
	args        []string // supervise's arguments: run, flags, --, agent, agent args
	agent       string   // the agent's absolute path (also in args)
	stateDir    string   // passed as --state-dir (in args); "" when the default is used
	stateDirRel string   // systemd StateDirectory= relative to /var/lib; "" for none
	stopTimeout time.Duration
	workDir     string // WorkingDirectory; "" for none
	path        string // PATH for the agent; "" for none
	user        bool   // systemd --user unit
	logFile     string // launchd StandardOutPath and StandardErrorPath
}

// unitUsage prints the help of `supervise unit`.
func unitUsage(fs *flag.FlagSet, w io.Writer) func() {
	return func() {
		fmt.Fprint(w, `Usage: supervise unit systemd|launchd [--user] [run flags] -- AGENT [ARGS...]

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

// unitCmd prints a systemd unit or a launchd plist that runs
// `supervise run` with the given run flags and agent.
func unitCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise unit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f runFlags
	f.register(fs)
	user := fs.Bool("user", false, "systemd: a user unit (for ~/.config/systemd/user) instead of a system unit; launchd plists are always per-user LaunchAgents")
	fs.Usage = func() { fmt.Fprintln(stderr, "Run 'supervise unit --help' for the flags.") }
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			unitUsage(fs, stdout)()
			return exitOK
		}
		fmt.Fprintln(stderr, "supervise unit: which kind? supervise unit systemd|launchd [flags] -- AGENT [ARGS...]")
		return exitUsage
	}
	kind, args := args[0], args[1:]
	if kind != "systemd" && kind != "launchd" {
		fmt.Fprintf(stderr, "supervise unit: unknown kind %q: want systemd or launchd\n", kind)
		return exitUsage
	}
	// Plain Parse, not parseFlags: the environment of the shell that
	// generates a unit is not the environment the unit runs in.
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			unitUsage(fs, stdout)()
			return exitOK
		}
		return exitUsage
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintf(stderr, "supervise unit %s: no agent: supervise unit %s [flags] -- AGENT [ARGS...]\n", kind, kind)
		return exitUsage
	}
	spec, err := newUnitSpec(fs, &f, set, argv, kind == "systemd" && !*user)
	if err != nil {
		fmt.Fprintf(stderr, "supervise unit %s: %v\n", kind, err)
		return exitUsage
	}
	spec.user = *user
	if spec.tempExe {
		fmt.Fprintf(stderr, "supervise unit %s: warning: %s looks like a temporary go run build; run go install and generate the unit with the installed binary\n", kind, spec.exe)
	}
	var out string
	if kind == "systemd" {
		out, err = systemdUnit(spec)
	} else {
		out, err = launchdPlist(spec)
	}
	if err != nil {
		fmt.Fprintf(stderr, "supervise unit %s: %v\n", kind, err)
		return exitUsage
	}
	if _, err := io.WriteString(stdout, out); err != nil {
		return exitInternal
	}
	return exitOK
}

// newUnitSpec validates the run flags as `run` would and resolves every
// path the unit needs. system is true for a systemd system unit, whose
// state dir cannot default to a home directory.
func newUnitSpec(fs *flag.FlagSet, f *runFlags, set map[string]bool, argv []string, system bool) (unitSpec, error) {
	var spec unitSpec
	// The same checks and name derivation as run; the config is discarded.
	cfg, _, err := f.config(set, argv, nil, io.Discard)
	if err != nil {
		return spec, err
	}
	if hasControl(cfg.Name) {
		return spec, fmt.Errorf("--name %q: control characters %w", cfg.Name, errUnitValue)
	}
	spec.name, spec.stopTimeout = cfg.Name, cfg.StopTimeout
	if spec.exe, err = os.Executable(); err != nil {
		return spec, fmt.Errorf("cannot find the supervise binary: %w", err)
	}
	spec.tempExe = isTempBuild(spec.exe)
	agent, err := exec.LookPath(argv[0])
	if err != nil {
		return spec, fmt.Errorf("agent: %w", err)
	}
	if spec.agent, err = filepath.Abs(agent); err != nil {
		return spec, fmt.Errorf("agent: %w", err)
	}
	switch {
	case set["state-dir"]:
		spec.stateDir = cfg.StateDir
	case system:
		spec.stateDirRel = "supervise/" + spec.name
		spec.stateDir = filepath.Join(unitSystemStateBase, spec.name)
	}
	spec.args = []string{"run", "--name=" + spec.name}
	if spec.stateDir != "" {
		spec.args = append(spec.args, "--state-dir="+spec.stateDir)
	}
	// Only the flags given on this command line, in the --flag=value form
	// so that no value can be taken for a flag or an argument.
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "name", "state-dir", "user":
			return
		}
		spec.args = append(spec.args, "--"+fl.Name+"="+fl.Value.String())
	})
	spec.args = append(spec.args, "--", spec.agent)
	spec.args = append(spec.args, argv[1:]...)
	if wd, err := os.Getwd(); err == nil && !hasControl(wd) {
		spec.workDir = wd
	}
	spec.path = absPath(os.Getenv("PATH"))
	if home, err := os.UserHomeDir(); err == nil {
		// Flat in ~/Library/Logs: launchd creates a missing log file but not
		// a missing directory, and then does not start the job at all.
		spec.logFile = filepath.Join(home, "Library", "Logs", unitLabelPrefix+unitFileName(spec.name)+".log")
	}
	return spec, nil
}

// intro is the prose a unit file opens with, for manager (systemd or
// launchd), one comment line per element ("" for a blank one); esc makes
// the agent's and supervise's paths safe in that comment syntax.
func (s *unitSpec) intro(name, manager string, esc func(string) string) []string {
	lines := []string{
		fmt.Sprintf("%s: keeps supervise running the agent %s.", name, esc(filepath.Base(s.agent))),
		manager + " restarts supervise; supervise restarts the agent, journals its turns",
		"and after a crash resumes or parks each interrupted session.",
		"Generated by supervise unit " + manager + ".",
	}
	if s.tempExe {
		lines = append(lines, "",
			fmt.Sprintf("NOTE: %s looks like a temporary go run or go test build", esc(s.exe)),
			"that will disappear. Install supervise (go install",
			"github.com/supervise-dev/supervise/cmd/supervise@latest) and generate again.")
	}
	return lines
}

// isTempBuild reports whether exe lies in a go-build temporary directory,
// as binaries of `go run` and `go test` do.
func isTempBuild(exe string) bool {
	for _, part := range strings.Split(filepath.ToSlash(exe), "/") {
		if strings.HasPrefix(part, "go-build") {
			return true
		}
	}
	return false
}

// absPath keeps the absolute entries of a PATH value, once each: a
// relative entry would be resolved against the unit's working directory.
func absPath(path string) string {
	seen := map[string]bool{}
	var keep []string
	for _, dir := range filepath.SplitList(path) {
		if filepath.IsAbs(dir) && !seen[dir] && !hasControl(dir) {
			seen[dir] = true
			keep = append(keep, dir)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// unitFileName turns a name into a safe unit or plist file name part.
func unitFileName(name string) string {
	return strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf && (r == '-' || r == '_' || r == '.' || r == ':' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, name)
}

// stopSeconds is the outer manager's stop timeout in whole seconds.
func stopSeconds(stopTimeout time.Duration) int64 {
	return int64(math.Ceil((stopTimeout + unitStopMargin).Seconds()))
}

// systemdUnit renders a systemd service unit.
func systemdUnit(s unitSpec) (string, error) {
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	unit := "supervise-" + unitFileName(s.name)
	for _, l := range s.intro(unit+".service", "systemd", commentText) {
		line("%s", strings.TrimRight("# "+l, " "))
	}
	line("#")
	if s.user {
		line("# Install: mkdir -p ~/.config/systemd/user")
		line("#          cp THIS_FILE ~/.config/systemd/user/%s.service", unit)
		line("#          systemctl --user daemon-reload && systemctl --user enable --now %s", unit)
		line("#          loginctl enable-linger \"$USER\"   # keep it running while logged out")
		line("# Inspect: systemctl --user status %s   (STATUS= shows the agent's turns)", unit)
		line("#          supervise status --name %s", commentText(s.name))
	} else {
		line("# Install: cp THIS_FILE /etc/systemd/system/%s.service", unit)
		line("#          systemctl daemon-reload && systemctl enable --now %s", unit)
		line("# Inspect: systemctl status %s   (STATUS= shows the agent's turns)", unit)
		line("#          supervise status --state-dir %s", commentText(s.stateDir))
	}
	line("")
	line("[Unit]")
	line("Description=%s", specifierSafe("supervise "+s.name+": "+filepath.Base(s.agent)))
	line("Documentation=https://github.com/supervise-dev/supervise")
	if !s.user {
		line("# The agent talks to model APIs over the network.")
		line("Wants=network-online.target")
		line("After=network-online.target")
	}
	line("# If supervise itself keeps failing, give up after 10 starts in 5 minutes:")
	line("# the unit shows as failed until `systemctl reset-failed`. Agent crashes")
	line("# are handled inside supervise and never count here.")
	line("StartLimitIntervalSec=5min")
	line("StartLimitBurst=10")
	line("")
	line("[Service]")
	line("# supervise reports READY=1 once the agent runs, STATUS= with its turn")
	line("# state, STOPPING=1 on stop, and WATCHDOG=1 only while its loop is healthy;")
	line("# a wedged supervise gets SIGABRT (a goroutine dump in the journal) and is")
	line("# restarted. Only supervise itself may notify (the agent never sees this socket).")
	line("Type=notify")
	line("NotifyAccess=main")
	line("WatchdogSec=%ds", int64(unitWatchdog/time.Second))
	cmd, err := execLine(append([]string{s.exe}, s.args...))
	if err != nil {
		return "", err
	}
	line("ExecStart=%s", cmd)
	if s.workDir != "" || s.path != "" {
		line("# Where and with which PATH supervise unit ran: the agent starts where")
		line("# you tried it and finds the same tools.")
	}
	if s.workDir != "" {
		line("WorkingDirectory=%s", specifierSafe(s.workDir))
	}
	if s.path != "" {
		line("Environment=%s", systemdWord("PATH="+s.path, false))
	}
	if !s.user {
		line("# Better: run as an unprivileged user (the agent then finds its")
		line("# configuration in that user's home; the state dir is handed over).")
		line("#User=agent")
	}
	if s.stateDirRel != "" {
		line("StateDirectory=%s", systemdWord(s.stateDirRel, false))
		line("StateDirectoryMode=0700")
	}
	line("# supervise exits 0 after a clean end or a requested stop, 3 when another")
	line("# supervise holds the state dir (restarting cannot help); anything else is")
	line("# a failure of supervise itself and restarts it. Its journal tells the next")
	line("# one what the agent was doing.")
	line("Restart=on-failure")
	// Not exitUsage (2): a Go panic, and the SIGABRT of WatchdogSec=, also
	// end the process with status 2, and those must restart.
	line("RestartPreventExitStatus=%d", exitLocked)
	line("RestartSec=1s")
	line("# A growing delay between such restarts (systemd 254 and later; older")
	line("# versions log \"Unknown key\" once and keep RestartSec= alone).")
	line("RestartSteps=10")
	line("RestartMaxDelaySec=1min")
	line("# Stop: SIGTERM to supervise only, which stops the agent (--stop-signal,")
	line("# --stop-timeout of grace, SIGKILL to its tree) and records a clean stop;")
	line("# whatever is left after TimeoutStopSec (> the agent's grace) gets SIGKILL.")
	line("KillMode=mixed")
	line("TimeoutStopSec=%ds", stopSeconds(s.stopTimeout))
	line("# An agent killed by the kernel's OOM killer is a crash for supervise to")
	line("# handle (resume or park its turn), not a reason to stop the whole unit.")
	line("OOMPolicy=continue")
	line("")
	line("[Install]")
	if s.user {
		line("WantedBy=default.target")
	} else {
		line("WantedBy=multi-user.target")
	}
	return b.String(), nil
}

// execLine renders a systemd command line (systemd.service(5), "Command
// lines"). The executable is never subject to $ substitution.
func execLine(argv []string) (string, error) {
	words := make([]string, len(argv))
	for i, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", fmt.Errorf("argument %q: NUL %w", a, errUnitValue)
		}
		words[i] = systemdWord(a, i > 0)
	}
	return strings.Join(words, " "), nil
}

// systemdWord quotes one word of a systemd command line or list setting.
// systemd first expands specifiers on the whole line, so % is written %%;
// it then splits the line into words, unquoting and C-unescaping each; in
// command lines it finally substitutes $VAR in each argument at exec time,
// so with dollar set $ is written $$. A word other than plain letters,
// digits and _@+=:,./- is double-quoted with \\, \" and C escapes for
// control characters and invalid UTF-8.
func systemdWord(s string, dollar bool) string {
	plain := s != ""
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("_@+=:,./-", c) >= 0
	}
	if plain {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '%':
			b.WriteString("%%")
		case r == '$' && dollar:
			b.WriteString("$$")
		case r < 0x20 || r == 0x7f:
			if j := strings.IndexRune("\a\b\f\n\r\t\v", r); j >= 0 {
				b.WriteByte('\\')
				b.WriteByte("abfnrtv"[j])
			} else {
				fmt.Fprintf(&b, `\x%02x`, r)
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}

// specifierSafe escapes a single-valued setting: only specifiers are
// expanded there.
func specifierSafe(s string) string {
	return strings.ReplaceAll(s, "%", "%%")
}

// commentText keeps a value on its comment line.
func commentText(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

// launchdPlist renders a launchd LaunchAgent property list.
func launchdPlist(s unitSpec) (string, error) {
	if s.logFile == "" {
		return "", errors.New("cannot find the home directory for the log file")
	}
	label := unitLabelPrefix + s.name
	argv := append([]string{s.exe}, s.args...)
	for _, v := range append([]string{label, s.workDir, s.path, s.logFile}, argv...) {
		if err := plistSafe(v); err != nil {
			return "", err
		}
	}
	var b strings.Builder
	line := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	str := func(v string) string {
		var t strings.Builder
		t.WriteString("<string>")
		_ = xml.EscapeText(&t, []byte(v)) // a strings.Builder never fails
		t.WriteString("</string>")
		return t.String()
	}
	plistName := unitLabelPrefix + unitFileName(s.name) + ".plist"
	line(`<?xml version="1.0" encoding="UTF-8"?>`)
	line(`<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">`)
	line("<!--")
	for _, l := range s.intro(xmlComment(label), "launchd", xmlComment) {
		line("%s", strings.TrimRight("  "+l, " "))
	}
	line("")
	line("  Install: cp THIS_FILE ~/Library/LaunchAgents/%s", xmlComment(plistName))
	line("           launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/%s", xmlComment(plistName))
	line("  Restart: launchctl kickstart -k gui/$(id -u)/%s", xmlComment(label))
	line("  Stop:    launchctl bootout gui/$(id -u)/%s", xmlComment(label))
	line("  Inspect: supervise status -name %s", xmlComment(s.name))
	line("-->")
	line(`<plist version="1.0">`)
	line("<dict>")
	line("\t<key>Label</key>")
	line("\t%s", str(label))
	line("\t<key>ProgramArguments</key>")
	line("\t<array>")
	for _, a := range argv {
		line("\t\t%s", str(a))
	}
	line("\t</array>")
	if s.workDir != "" || s.path != "" {
		line("\t<!-- Where and with which PATH supervise unit ran: the agent starts where")
		line("\t     you tried it and finds the same tools. -->")
	}
	if s.workDir != "" {
		line("\t<key>WorkingDirectory</key>")
		line("\t%s", str(s.workDir))
	}
	if s.path != "" {
		line("\t<key>EnvironmentVariables</key>")
		line("\t<dict>")
		line("\t\t<key>PATH</key>")
		line("\t\t%s", str(s.path))
		line("\t</dict>")
	}
	line("\t<key>RunAtLoad</key>")
	line("\t<true/>")
	line("\t<!-- Restart supervise whenever it did not exit 0 (a clean end or a requested")
	line("\t     stop). Not Crashed: that fires only for SIGSEGV-like signals, never for")
	line("\t     a Go runtime crash (exit 2) or SIGKILL. -->")
	line("\t<key>KeepAlive</key>")
	line("\t<dict>")
	line("\t\t<key>SuccessfulExit</key>")
	line("\t\t<false/>")
	line("\t</dict>")
	line("\t<!-- launchd starts supervise again no sooner than this many seconds after")
	line("\t     its last start. -->")
	line("\t<key>ThrottleInterval</key>")
	line("\t<integer>%d</integer>", unitThrottle)
	line("\t<!-- Standard, said outright: launchd's light CPU and I/O throttling for")
	line("\t     jobs without a type, not Background's heavier one, which would slow")
	line("\t     the agent's tools (builds, tests) that you asked for. -->")
	line("\t<key>ProcessType</key>")
	line("\t<string>Standard</string>")
	line("\t<!-- SIGTERM, then SIGKILL after this many seconds: longer than the agent's")
	line("\t     grace period (stop timeout), so supervise can stop it and record the stop. -->")
	line("\t<key>ExitTimeOut</key>")
	line("\t<integer>%d</integer>", stopSeconds(s.stopTimeout))
	line("\t<key>StandardOutPath</key>")
	line("\t%s", str(s.logFile))
	line("\t<key>StandardErrorPath</key>")
	line("\t%s", str(s.logFile))
	line("</dict>")
	line("</plist>")
	return b.String(), nil
}

// plistSafe reports a value that XML 1.0 cannot carry.
func plistSafe(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%q: invalid UTF-8 %w", s, errUnitValue)
	}
	for _, r := range s {
		ok := r == '\t' || r == '\n' || r == '\r' || 0x20 <= r && r <= 0xd7ff ||
			0xe000 <= r && r <= 0xfffd || 0x10000 <= r && r <= 0x10ffff
		if !ok {
			return fmt.Errorf("%q: character %U %w", s, r, errUnitValue)
		}
	}
	return nil
}

// xmlComment makes s safe inside an XML comment, which must not contain
// "--" or control characters.
func xmlComment(s string) string {
	s = commentText(s)
	for strings.Contains(s, "--") {
		s = strings.ReplaceAll(s, "--", "- -")
	}
	return s
}
