package runflags

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/bits"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/supervise-dev/supervise/apiproxy"
	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/internal/signame"
	"github.com/supervise-dev/supervise/resume"
	"github.com/supervise-dev/supervise/supervisor"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// Flags are the flags of `supervise run`.
type Flags struct {
	state       State
	restart     string
	stopTimeout time.Duration
	stopSignal  string
	watchdog    time.Duration
	maxRSS      string
	// MetricsAddr is --metrics-addr: the address of /metrics and
	// /healthz, served by cmd/supervise's run group (empty = off).
	MetricsAddr    string
	giveUp         int
	healthy        time.Duration
	backoffInit    time.Duration
	backoffMax     time.Duration
	guardTrip      int
	guardGap       time.Duration
	keepRuns       int
	keepSess       int
	resumeMode     string
	resumeLimit    int
	maxTurnAge     time.Duration
	resumeExec     string
	rerunTask      bool
	resumeMsg      string
	resumeSig      string
	logLevel       string
	logFormat      string
	foreground     string
	turnTimeout    time.Duration
	phaseTime      string
	fingerprint    listFlag
	cgroup         string
	user           string
	maxOpen        int
	apiProxy       string
	streamStall    time.Duration
	maxTokens      int64
	maxTokensTotal int64
	onEvent        string
	logKeep        string
	limitResumes   int
	startTimeout   time.Duration
	silenceTimeout time.Duration
	limitWait      string
	profiles       string

	// euid stands in for os.Geteuid in the --user check when set
	// (SetEUID); cred is what --user resolved to in the last Config that
	// succeeded.
	euid *int
	cred *child.Credential
}

// Register adds the run flags, --state-dir and --name among them, to fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	f.state.Register(fs)
	fs.StringVar(&f.restart, "restart", "on-failure", "when to relaunch the agent: on-failure (after a dirty death), always, never")
	durationVar(fs, &f.stopTimeout, "stop-timeout", 10*time.Second, "grace period between the stop signal and SIGKILL to the agent's process tree")
	fs.StringVar(&f.maxRSS, "max-rss", "", "memory guard: stop the agent when its whole process tree uses more resident memory than this, e.g. 2G or 512MiB (empty = off)")
	fs.StringVar(&f.stopSignal, "stop-signal", "SIGTERM", "signal that asks the agent to stop")
	durationVar(fs, &f.watchdog, "watchdog", 0, "hang detection: the agent must send WATCHDOG=1 at least this often (WATCHDOG_USEC is set for it), else it gets SIGABRT, then SIGKILL after --stop-timeout (0 = off)")
	fs.IntVar(&f.giveUp, "give-up", 0, "exit with code 4 after this many consecutive quick deaths, so an outer manager takes over (0 = never)")
	durationVar(fs, &f.healthy, "healthy-after", 10*time.Second, "a run that lives this long (or completes a turn) is healthy: the next relaunch is immediate and the backoff resets")
	durationVar(fs, &f.backoffInit, "backoff-initial", 250*time.Millisecond, "delay before relaunching after a quick death; doubles with each further one")
	durationVar(fs, &f.backoffMax, "backoff-max", 30*time.Second, "cap on the relaunch delay")
	guard, policy := crashloop.DefaultGuard(), resume.DefaultPolicy()
	fs.IntVar(&f.guardTrip, "guard-trip", guard.Trip, "crash-loop guard: hold automatic resumes after this many chained dirty deaths (0 = off)")
	durationVar(fs, &f.guardGap, "guard-gap", guard.MaxGap, "crash-loop guard: dirty deaths at most this far apart are chained")
	fs.IntVar(&f.keepRuns, "keep-runs", 1000, "run records kept in the journal")
	fs.IntVar(&f.maxOpen, "max-open-sessions", 1000, "open sessions (in_turn, waiting, resume_pending, parked, stopped) at most this many: a turn-begin that would open one more is refused (its barrier answers 0) and logged, and the resume file never holds more")
	fs.IntVar(&f.keepSess, "keep-sessions", 10000, "settled (idle or closed) sessions kept in the journal; older ones are pruned, oldest first, in the background (open sessions never are; 0 = keep all)")
	fs.StringVar(&f.resumeMode, "resume", "auto", "auto: resume interrupted turns; off: decide and show, dispatch nothing automatically (SUPERVISE_RESUME=off for test suites)")
	fs.IntVar(&f.resumeLimit, "resume-limit", policy.Limit, "consecutive dirty deaths mid-turn after which a session is parked instead of resumed")
	durationVar(fs, &f.maxTurnAge, "max-turn-age", policy.MaxAge, "a turn older than this at death is parked as stale, not resumed (0 = no limit)")
	fs.StringVar(&f.resumeExec, "resume-exec", "", "resume a session by launching this argv template (placeholders {session} {message} {turn}; no shell). The mode follows AGENT. Task mode when AGENT carries a task prompt (-- claude -p TASK; template 'claude -p -r {session} {message}'): AGENT runs once, pending sessions are resumed with the template, and supervise ends when nothing is pending: 0 if the last turn completed, 5 if a session is parked, else the agent's status; --restart does not apply. Interactive when it carries none, only options after the program (-- claude; template 'claude -r {session} {message}'): an interrupted turn continues in the same terminal, /exit ends with 0")
	fs.BoolVar(&f.rerunTask, "rerun-task", false, "task mode: start the task even though an earlier run of the same command left its session parked, stopped or owed a held resume (by default supervise exits 5 instead, so a rerun cannot repeat the task's side effects)")
	fs.StringVar(&f.resumeMsg, "resume-message", "", "continuation message template (placeholders {session} {turn} {how} {phase} {tool} {detail} {prompt} {effects}); default: a built-in honest text")
	fs.StringVar(&f.resumeSig, "resume-signal", "", "signal that tells a running agent the resume file changed (e.g. SIGUSR1); without it, resumes are delivered at the agent's next start")
	fs.StringVar(&f.MetricsAddr, "metrics-addr", "", "serve Prometheus /metrics and a /healthz liveness check on this address, e.g. 127.0.0.1:9090; they have no authentication, so keep it on loopback or behind a proxy (:9090 binds every interface) (empty = off)")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "text or json")
	durationVar(fs, &f.turnTimeout, "turn-timeout", 0, "turn deadline: a turn still open this long after its turn-begin (or resumed) stops the agent (stop signal, grace, SIGKILL), reason turn-timeout, decided as any dirty death; EXTEND_TIMEOUT_USEC during the turn extends it up to twice this; a wait for a person pauses it (0 = off)")
	fs.StringVar(&f.phaseTime, "phase-timeout", "", "phase deadlines, e.g. model=10m,tool=30m (either may be given): a model or tool phase older than its deadline stops the agent as --turn-timeout does")
	fs.Var(&f.fingerprint, "fingerprint", "a file whose change, like the agent binary's, lifts a park by the crash breaker once, e.g. the agent's config or a model pin (repeatable)")
	fs.StringVar(&f.cgroup, "cgroup", "auto", "auto: run each launch in a cgroup of its own (supervise-NAME-ID/run-N under supervise's cgroup) where cgroup v2 is writable (root, or systemd Delegate=yes): the tree is killed whole with cgroup.kill, and with the memory controller an OOM kill is named (reason oom); off: never")
	fs.StringVar(&f.user, "user", "", "run the agent's process tree as USER[:GROUP] (a name or uid, a group name or gid; default group: the user's primary one) with the user's supplementary groups and its HOME, USER and LOGNAME, as systemd's User= does; supervise must run as root (empty = supervise's own user)")
	fs.StringVar(&f.apiProxy, "api-proxy", "off", "on: run a model-API proxy on 127.0.0.1 for each run and point the agent's ANTHROPIC_BASE_URL, OPENAI_BASE_URL and GOOGLE_GEMINI_BASE_URL at it (forwarded to supervise's own values, else the public endpoints): turns, tool phases, rate-limit waits and token usage are seen without hooks (docs/proxy.md); off: none")
	durationVar(fs, &f.streamStall, "stream-stall", 0, "with --api-proxy on: a model stream that sends no content for this long (keep-alive pings do not count) stops the agent, reason stream-stall, decided as a watchdog death (0 = off)")
	fs.Int64Var(&f.maxTokens, "max-tokens", 0, "with --api-proxy on: a session whose input plus output tokens, across its resumes, exceed this is parked (reason names the budget, never resumed automatically) and the agent stopped; task mode exits 5 (0 = no budget)")
	fs.StringVar(&f.logKeep, "log-keep", "16MiB", "the agent's stdout and stderr kept in the state dir (supervise logs), in all, e.g. 64MiB; a stream that goes to a terminal is not kept (0 = keep none)")
	fs.StringVar(&f.onEvent, "on-event", "", "run this command through /bin/sh -c when a session parks, starts or stops waiting for a person or a limit, goes over a budget, or supervise gives up: one JSON document on its stdin (event, name, state_dir, session, turn, reason, command) and the same in SUPERVISE_EVENT_* variables; killed after 10s, never blocking supervise (docs/operations.md)")
	fs.Int64Var(&f.maxTokensTotal, "max-tokens-total", 0, "with --api-proxy on: the state dir's budget across all its sessions and runs, kept in the journal; once spent, every model call is answered by the proxy itself until a person runs supervise resume (0 = no budget)")
	fs.IntVar(&f.limitResumes, "limit-resumes", 5, "resumes after a usage or rate limit per turn: a limit that ends the turn again after this many parks the session, naming the limit (a spent plan or spend cap ends clearly instead of looping); a limit is never counted as a crash")
	fs.StringVar(&f.profiles, "profiles", "auto", "auto: for Claude Code, Codex and Gemini CLI supervise sets up what it needs by itself, for this run only and with no file of the user's changed: how their turns are seen (its hooks handed to the run, or the model-API proxy for Codex) and the resume template (--resume-exec) from the command; explicit flags win; off: none of it, the agent runs as given (docs/profiles.md)")
	fs.StringVar(&f.limitWait, "limit-wait", "on", "on: a turn a usage or rate limit ended waits until the limit's reset (waiting, wait limit, retry_at in status; journaled, so the wait survives a restart) and is resumed then; off: task mode exits 75 (EX_TEMPFAIL) with the reset time on stderr and in status; a duration such as 2h: waits longer than it end the task so")
	durationVar(fs, &f.startTimeout, "start-timeout", 0, "a run that sends no marker and makes no model request this long after its launch is stopped as hung (stop signal, grace, SIGKILL), reason start-timeout, decided as a hang; a task that hung so before any session is started again once (0 = off)")
	durationVar(fs, &f.silenceTimeout, "silence-timeout", 0, "an open turn (not waiting for a person or a limit) with no marker, no model traffic and no output for this long stops the agent as hung, reason silence-timeout, decided as a hang; a CLI that says it waits out a limit itself is not silent until then (0 = off)")
	fs.StringVar(&f.foreground, "foreground", "auto", "keep the agent in supervise's process group so a terminal Ctrl-C reaches it once: auto (when stdin is the controlling terminal), always, never")
}

// SetEUID makes Config check --user against uid instead of this process's
// effective uid: --user needs root. It is for a caller that checks the
// flags for a supervise that will run elsewhere (a unit file's), and for
// tests.
func (f *Flags) SetEUID(uid int) { f.euid = &uid }

// ResumeOff reports whether --resume is off (automatic resumes decided
// but not dispatched), before Config checks the flags.
func (f *Flags) ResumeOff() bool { return f.resumeMode == "off" }

// Config checks the flags as parsed (set names those given on the command
// line, as Parse returns it) and turns them into a supervisor configuration
// for argv and a logger writing to stderr. stdin is the agent's, and decides
// --foreground auto; nil means no terminal. An error means exit status 2.
func (f *Flags) Config(set map[string]bool, argv []string, stdin *os.File, stderr io.Writer) (supervisor.Config, *slog.Logger, error) {
	var cfg supervisor.Config
	f.cred = nil
	dir, name, err := f.state.Resolve(set, DefaultName(argv))
	if err != nil {
		return cfg, nil, err
	}
	plan, err := f.profile(set, argv, dir)
	if err != nil {
		return cfg, nil, err
	}
	argv = plan.Argv
	restart, err := crashloop.ParseRestart(f.restart)
	if err != nil {
		return cfg, nil, fmt.Errorf("%s: %w", Source("restart", set), err)
	}
	sig := parseSignal(f.stopSignal)
	if sig == 0 {
		return cfg, nil, fmt.Errorf("%s: unknown signal %q", Source("stop-signal", set), f.stopSignal)
	}
	for name, d := range map[string]time.Duration{"stop-timeout": f.stopTimeout, "watchdog": f.watchdog, "healthy-after": f.healthy,
		"backoff-initial": f.backoffInit, "backoff-max": f.backoffMax, "guard-gap": f.guardGap, "turn-timeout": f.turnTimeout} {
		if d < 0 {
			return cfg, nil, fmt.Errorf("%s must not be negative", Source(name, set))
		}
	}
	if f.watchdog > 0 && f.watchdog < minWatchdog {
		return cfg, nil, fmt.Errorf("%s must be 0 (off) or at least %s, not %s: an agent cannot ping that often", Source("watchdog", set), minWatchdog, f.watchdog)
	}
	if f.backoffMax < f.backoffInit {
		return cfg, nil, fmt.Errorf("%s (%s) is below %s (%s)", Source("backoff-max", set), f.backoffMax, Source("backoff-initial", set), f.backoffInit)
	}
	if f.giveUp < 0 || f.guardTrip < 0 || f.keepRuns < 1 || f.resumeLimit < 0 || f.maxTurnAge < 0 || f.keepSess < 0 {
		return cfg, nil, errors.New("--give-up, --guard-trip, --resume-limit and --max-turn-age and --keep-sessions must be >= 0, --keep-runs >= 1")
	}
	if err := checkAddr(f.MetricsAddr); err != nil {
		return cfg, nil, fmt.Errorf("%s %s: %w", Source("metrics-addr", set), f.MetricsAddr, err)
	}
	if err := f.checkProxy(set); err != nil {
		return cfg, nil, err
	}
	limitWait, err := f.limitWaitConfig(set)
	if err != nil {
		return cfg, nil, err
	}
	if f.maxOpen < 1 {
		return cfg, nil, fmt.Errorf("%s must be at least 1, not %d", Source("max-open-sessions", set), f.maxOpen)
	}
	cred, err := f.resolveUser(set)
	if err != nil {
		return cfg, nil, err
	}
	if f.cgroup != "auto" && f.cgroup != "off" {
		return cfg, nil, fmt.Errorf("%s must be auto or off, not %q", Source("cgroup", set), f.cgroup)
	}
	if f.resumeMode != "auto" && f.resumeMode != "off" {
		return cfg, nil, fmt.Errorf("%s must be auto or off, not %q", Source("resume", set), f.resumeMode)
	}
	if err := resume.CheckMessage(f.resumeMsg); err != nil {
		return cfg, nil, fmt.Errorf("%s: %w", Source("resume-message", set), err)
	}
	var execTpl []string
	if f.resumeExec != "" {
		if execTpl, err = resume.ParseTemplate(f.resumeExec); err != nil {
			return cfg, nil, fmt.Errorf("%s: %w", Source("resume-exec", set), err)
		}
		execTpl = plan.Adapt(execTpl)
	} else if plan.Template != nil {
		execTpl = plan.Template
	}
	deadlines := supervisor.Deadlines{Turn: f.turnTimeout}
	if err := parsePhaseTimeout(f.phaseTime, &deadlines); err != nil {
		return cfg, nil, fmt.Errorf("%s: %w", Source("phase-timeout", set), err)
	}
	var fingerprint []string
	for _, p := range f.fingerprint {
		abs, err := filepath.Abs(p)
		if err != nil {
			return cfg, nil, fmt.Errorf("%s %s: %w", Source("fingerprint", set), p, err)
		}
		if _, err := os.Stat(abs); err != nil {
			return cfg, nil, fmt.Errorf("%s: %w", Source("fingerprint", set), err)
		}
		fingerprint = append(fingerprint, abs)
	}
	var logKeep uint64
	if f.logKeep != "0" { // 0: keep none
		if logKeep, err = parseSize(f.logKeep); err != nil {
			return cfg, nil, fmt.Errorf("%s: %w", Source("log-keep", set), err)
		}
	}
	maxRSS, err := parseSize(f.maxRSS)
	if err != nil {
		return cfg, nil, fmt.Errorf("%s: %w", Source("max-rss", set), err)
	}
	var resumeSig syscall.Signal
	if f.resumeSig != "" {
		if resumeSig = parseSignal(f.resumeSig); resumeSig == 0 {
			return cfg, nil, fmt.Errorf("%s: unknown signal %q", Source("resume-signal", set), f.resumeSig)
		}
		if resumeSig == syscall.SIGKILL || resumeSig == syscall.SIGSTOP {
			return cfg, nil, fmt.Errorf("%s: %s cannot be caught, so it cannot tell the agent to read the resume file (use SIGUSR1 or another signal the agent handles)", Source("resume-signal", set), signame.Of(resumeSig))
		}
	}
	log, err := newLogger(f.logLevel, f.logFormat, stderr)
	if err != nil {
		return cfg, nil, err
	}
	if execTpl != nil && set["restart"] {
		log.Info("task mode (--resume-exec): --restart does not apply; the task runs once and only resume launches follow",
			"restart", f.restart)
	}
	fg, err := foreground(f.foreground, stdin)
	if err != nil {
		return cfg, nil, err
	}
	policy := crashloop.DefaultPolicy()
	policy.Restart = restart
	policy.Healthy, policy.Initial, policy.Max, policy.GiveUp = f.healthy, f.backoffInit, f.backoffMax, f.giveUp
	cfg = supervisor.Config{
		Name:            name,
		StateDir:        dir,
		Argv:            argv,
		Policy:          policy,
		Guard:           crashloop.Guard{MaxGap: f.guardGap, Trip: f.guardTrip},
		StopSignal:      sig,
		StopTimeout:     f.stopTimeout,
		Watchdog:        f.watchdog,
		MaxRSS:          maxRSS,
		Deadlines:       deadlines,
		NoCgroups:       f.cgroup == "off",
		Fingerprint:     fingerprint,
		Foreground:      fg,
		KeepRuns:        f.keepRuns,
		KeepSessions:    f.keepSess,
		Resume:          resume.Policy{Limit: f.resumeLimit, MaxAge: f.maxTurnAge, Template: f.resumeMsg},
		ResumeOff:       f.resumeMode == "off",
		ResumeExec:      execTpl,
		RerunTask:       f.rerunTask,
		ResumeSignal:    resumeSig,
		User:            cred,
		MaxOpenSessions: f.maxOpen,
		APIProxy:        f.apiProxy == "on",
		StreamStall:     f.streamStall,
		MaxTokens:       f.maxTokens,
		MaxTokensTotal:  f.maxTokensTotal,
		OnEvent:         f.onEvent,
		LogKeep:         int64(min(logKeep, 1<<62)),
		Limit:           limitWait,
		StartTimeout:    f.startTimeout,
		SilenceTimeout:  f.silenceTimeout,
		Rerun:           os.Args,
		Env:             plan.Env,
		FrameStderr:     f.logFormat, // the agent's stderr lines framed as supervise's log is written
		Agent:           supervisor.AgentSetup{Files: plan.Files, Launch: plan.Launch, Done: plan.Done, Said: plan.Said, Saved: plan.Saved},
		Report:          stderr,
		Stdin:           stdin,
		Log:             log,
	}
	f.cred = cred
	return cfg, log, nil
}

// checkProxy checks --api-proxy and the flags that need it, and the
// upstream base URLs in the environment the proxy would forward to.
func (f *Flags) checkProxy(set map[string]bool) error {
	if f.apiProxy != "on" && f.apiProxy != "off" {
		return fmt.Errorf("%s must be on or off, not %q", Source("api-proxy", set), f.apiProxy)
	}
	if f.streamStall < 0 || f.maxTokens < 0 || f.maxTokensTotal < 0 {
		return fmt.Errorf("%s, %s and %s must not be negative", Source("stream-stall", set), Source("max-tokens", set),
			Source("max-tokens-total", set))
	}
	if f.apiProxy == "off" {
		for _, n := range []string{"stream-stall", "max-tokens", "max-tokens-total"} {
			if set[n] {
				return fmt.Errorf("%s needs --api-proxy on: only the proxy sees streams and token usage", Source(n, set))
			}
		}
		return nil
	}
	// Start checks the upstream base URLs in supervise's environment; a
	// bad one is a usage error now, not a failure at every launch.
	p, err := apiproxy.Start(apiproxy.Config{})
	if err != nil {
		return fmt.Errorf("%s: %w", Source("api-proxy", set), err)
	}
	return p.Close()
}

// resolveUser checks --user and looks its user and group up: only root
// can switch users, and an unknown one is refused now, not at every
// launch. No --user is nil.
func (f *Flags) resolveUser(set map[string]bool) (*child.Credential, error) {
	if f.user == "" {
		return nil, nil
	}
	euid := os.Geteuid()
	if f.euid != nil {
		euid = *f.euid
	}
	if euid != 0 {
		return nil, fmt.Errorf("%s needs root: supervise runs as uid %d", Source("user", set), euid)
	}
	cred, err := child.LookupUser(f.user)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Source("user", set), err)
	}
	return cred, nil
}

// checkAddr checks a listen address (--metrics-addr) before anything
// starts, so that a typo is a usage error (exit 2), not a listener failure
// (exit 1) after the agent started: HOST:PORT, the host optional, the port
// a number or a service name. "" is off.
func checkAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return errors.New("want HOST:PORT or :PORT, e.g. 127.0.0.1:9090")
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("bad port %q: want a number from 0 to 65535, e.g. 127.0.0.1:9090", port)
	}
	return nil
}

// parseSize parses a memory size (--max-rss): a whole number of bytes, or a
// number with a unit K, M, G or T, each a power of 1024 and written alone,
// with i, with B or with iB, in either case (64M, 512MiB, 2GB, 10kb). A
// decimal fraction is allowed only with a unit and only where it comes to
// a whole number of bytes (1.5G; not 1.5 or 0.1K). "" is 0 (off). NaN,
// Inf, exponents, signs, 0 and anything above 2^63-1 bytes are refused: a
// size that fails to parse must never turn the memory guard off.
func parseSize(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	bad := func(why string) (uint64, error) {
		return 0, fmt.Errorf("bad size %q: %s; want bytes or a whole number with K, M, G or T (powers of 1024: 512M, 2G, 1.5GiB)", s, why)
	}
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "B")
	t, binary := strings.CutSuffix(t, "I")
	shift := uint(0)
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGT", t[n-1]); i >= 0 {
			shift = uint(10 * (i + 1))
			t = t[:n-1]
		}
	}
	if binary && shift == 0 {
		return bad("i without a unit")
	}
	whole, frac, hasFrac := strings.Cut(t, ".")
	if whole == "" || !allDigits(whole) || (hasFrac && (frac == "" || !allDigits(frac))) {
		return bad("not a number")
	}
	if hasFrac && shift == 0 {
		return bad("a fraction of a byte")
	}
	const limit = uint64(1<<63 - 1)
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || w > limit>>shift {
		return bad("too large")
	}
	v := w << shift
	if hasFrac {
		// frac/10^len(frac) of 2^shift bytes must be whole: exact, no float.
		if len(frac) > 18 {
			return bad("too many decimals")
		}
		f, _ := strconv.ParseUint(frac, 10, 64)
		den := uint64(1)
		for range len(frac) {
			den *= 10
		}
		// f < den <= 10^18 and 2^shift <= 2^40: the product needs 128 bits.
		hi, lo := bits.Mul64(f, 1<<shift)
		q, r := bits.Div64(hi, lo, den)
		if r != 0 {
			return bad("not a whole number of bytes")
		}
		if q > limit-v {
			return bad("too large")
		}
		v += q
	}
	if v == 0 {
		return bad("0 is not a limit (leave the flag out for none)")
	}
	return v, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// parseSignal accepts SIGTERM, TERM or a number.
func parseSignal(s string) syscall.Signal {
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n)
	}
	if sig := unix.SignalNum(strings.ToUpper(s)); sig != 0 {
		return sig
	}
	return unix.SignalNum("SIG" + strings.ToUpper(s))
}

// foreground decides whether the agent shares supervise's process group:
// only when stdin is a terminal whose foreground group is ours, so that
// the kernel delivers a Ctrl-C to the agent directly, exactly once.
func foreground(mode string, stdin *os.File) (bool, error) {
	switch mode {
	case "always":
		return true, nil
	case "never":
		return false, nil
	case "auto":
		pgrp, err := unix.IoctlGetInt(int(stdin.Fd()), unix.TIOCGPGRP)
		return err == nil && pgrp == unix.Getpgrp(), nil
	}
	return false, fmt.Errorf("--foreground must be auto, always or never, not %q", mode)
}

// underJournal reports whether f is the stream systemd connected to the
// journal ($JOURNAL_STREAM is "device:inode" of that stream).
func underJournal(f *os.File) bool {
	want := os.Getenv("JOURNAL_STREAM")
	if want == "" {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return want == fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %v", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	stream := w
	if d, ok := w.(*LogDest); ok {
		stream = d.Stderr() // the file it may switch to later is never journald's
	}
	if f, ok := stream.(*os.File); ok && underJournal(f) {
		// journald stamps every line itself: no second timestamp.
		opts.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}
	}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, not %q", format)
}

// minWatchdog is the shortest --watchdog period: supervise tells the agent
// its period in WATCHDOG_USEC, and libsystemd-style clients ping at half
// of it.
const minWatchdog = 100 * time.Millisecond

// limitWaitConfig checks --limit-resumes and --limit-wait.
func (f *Flags) limitWaitConfig(set map[string]bool) (machine.LimitConfig, error) {
	lc := machine.LimitConfig{Resumes: f.limitResumes}
	if f.startTimeout < 0 || f.silenceTimeout < 0 {
		return lc, fmt.Errorf("%s and %s must not be negative", Source("start-timeout", set), Source("silence-timeout", set))
	}
	if f.limitResumes < 1 {
		return lc, fmt.Errorf("%s must be at least 1, not %d", Source("limit-resumes", set), f.limitResumes)
	}
	switch f.limitWait {
	case "on":
	case "off":
		lc.Off = true
	default:
		d, err := parseDuration(f.limitWait)
		if err != nil || d <= 0 {
			return lc, fmt.Errorf("%s must be on, off or a positive duration such as 2h, not %q", Source("limit-wait", set), f.limitWait)
		}
		lc.Max = d
	}
	return lc, nil
}
