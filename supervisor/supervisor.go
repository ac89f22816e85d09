// Package supervisor is the runner of supervise's run loop: it owns the
// journal, the child, the notify and control sockets and the timers, feeds
// what happens to the pure transition function in supervisor/machine, and
// performs the effects it returns, in order.
//
// One goroutine (Run) owns the machine and all loop state. Everything else
// talks to it through channels: the signal actor (Signal), the control
// socket (requests), the notify socket (messages; heartbeats bypass the
// loop, see intake), and Shutdown. Every death is committed to the journal
// before the next child is started: the machine orders that commit before
// the launch.
package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/internal/failpoint"
	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/internal/trace"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/notify"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// Exit codes of Run: the values of the one table in internal/exitcode
// (printed by supervise --help).
const (
	ExitOK       = exitcode.OK       // the child ended cleanly, or a requested stop completed
	ExitInternal = exitcode.Internal // supervise itself failed (journal, sockets)
	ExitGaveUp   = exitcode.GaveUp   // the give-up limit was reached
	ExitParked   = exitcode.Parked   // task mode: a session needs a person (parked, or its resume held)
)

// Deadlines are the turn-level deadlines (--turn-timeout, --phase-timeout).
type Deadlines = machine.Deadlines

// Config is everything the loop needs to know.
type Config struct {
	Name     string
	StateDir string
	// LogKeep bounds the agent's output kept in the state dir
	// (--log-keep, agentlog.go); 0: none kept.
	LogKeep int64
	// OnEvent is the --on-event command: run through /bin/sh -c for each
	// event a person may want to hear of (events.go); "" for none.
	OnEvent string
	// Argv is the agent command line.
	Argv []string
	Dir  string
	// Env is the base environment of the child; nil means supervise's own.
	Env []string
	// Agent is what the agent CLI's profile prepares (package profile).
	Agent AgentSetup
	// FrameStderr frames the agent's stderr lines that supervise copies
	// into its own stderr, where its log goes (frame.go): FrameText,
	// FrameJSON (as --log-format), or FrameNone (as is).
	FrameStderr string
	Policy      crashloop.Policy
	Guard       crashloop.Guard
	// StopSignal asks the child to stop; StopTimeout is the grace period
	// before SIGKILL.
	StopSignal  syscall.Signal
	StopTimeout time.Duration
	// Watchdog is the period within which the agent must send WATCHDOG=1;
	// 0 disables hang detection.
	Watchdog time.Duration
	// VerifyInBackground runs the journal's full consistency check (due
	// after an unclean stop) after boot instead of before it: for a large
	// journal. Automatic resumes are held until it passes, and the first
	// launch waits for it if a resume is owed.
	VerifyInBackground bool
	// MaxRSS is the memory guard: the agent's whole tree may use at most
	// this many resident bytes; 0 disables it.
	MaxRSS uint64
	// Fingerprint lists files whose change, with the agent binary's, lifts
	// a park by the crash breaker once (--fingerprint).
	Fingerprint []string
	// NoCgroups keeps the agent out of a cgroup of its own (--cgroup off).
	NoCgroups bool
	// Deadlines are the turn-level deadlines (--turn-timeout,
	// --phase-timeout); zero values are off.
	Deadlines Deadlines
	// Foreground keeps the child in supervise's process group, for a
	// terminal (see child.Spec.Foreground).
	Foreground bool
	// Resume is the per-session resume policy; ResumeOff computes and shows
	// decisions but dispatches no automatic resume (--resume off).
	Resume    resume.Policy
	ResumeOff bool
	// ResumeExec is a parsed --resume-exec template: a pending session is
	// resumed by relaunching the agent in that form. nil: the resume file.
	ResumeExec []string
	// RerunTask starts the task (task mode) even when an earlier run of
	// the same command left its session parked, stopped or owed a held resume.
	RerunTask bool
	// Rerun is supervise's own command line, quoted into the message that
	// ends a task with a parked session (task mode): the exact command that
	// resumes it. nil: "supervise" and the agent argv.
	Rerun []string
	// Report receives the few plain lines a person must read when a task
	// ends (task mode): which session is parked, why, and how to resume it.
	// nil: os.Stderr.
	Report io.Writer
	// ResumeSignal, when set, delivers resumes to a running agent: the
	// resume file is rewritten and the agent gets this signal.
	ResumeSignal syscall.Signal
	// User, when set, runs the agent's tree as that user (--user, root
	// only): the state dir becomes searchable (not listable) by it, the
	// notify socket and the resume file its own; nothing else is.
	User *child.Credential
	// MaxOpenSessions caps the open sessions: a turn-begin that would open
	// one more is refused (--max-open-sessions); 0: 1000.
	MaxOpenSessions int
	// APIProxy runs a model-API proxy per run (--api-proxy on);
	// StreamStall stops the agent when a stream sends no content for that
	// long (--stream-stall, 0: off); MaxTokens parks a session past that
	// many tokens (--max-tokens, 0: off). See package apiproxy.
	APIProxy    bool
	StreamStall time.Duration
	MaxTokens   int64
	// MaxTokensTotal is the state dir's token budget across sessions,
	// runs and restarts of supervise (--max-tokens-total, 0: off): past
	// it no model call is forwarded, and the session whose answer spent it
	// is parked. Journaled; a person's `supervise resume` lifts it.
	MaxTokensTotal int64
	// Limit is how usage and rate limits are waited out (--limit-resumes,
	// --limit-wait).
	Limit machine.LimitConfig
	// StartTimeout and SilenceTimeout are the hang deadlines
	// (--start-timeout, --silence-timeout; 0: off).
	StartTimeout, SilenceTimeout time.Duration
	// KeepRuns bounds the run records kept in the journal.
	KeepRuns int
	// KeepSessions bounds the settled (idle, closed) sessions kept in the
	// journal: the oldest beyond it are pruned in the background. Open
	// sessions are never pruned. 0 keeps every session.
	KeepSessions int
	// Observe, when set, is told about every launch, committed marker
	// batch and death, and the loop waits for it (see Observer). nil in
	// production; `supervise chaos` sets it.
	Observe Observer
	// Failpoints are the test failpoints, read once from the environment
	// by the command; zero in production.
	Failpoints failpoint.Points
	// Trace records the restart path's bench-only trace points; nil (off,
	// one nil check a mark) unless SUPERVISE_BENCH_TRACE names a file
	// (internal/trace), which New reads when Trace is nil.
	Trace *trace.Recorder
	// Clock is the loop's time source and timers; nil: the real clock.
	Clock                 Clock
	Stdin, Stdout, Stderr *os.File
	Log                   *slog.Logger
}

// Supervisor is the run loop's runner. Create it with New, serve its notify
// socket with ServeNotify, and Run it once.
type Supervisor struct {
	cfg    Config
	m      *machine.Machine // the loop state; changed only by Step
	clock  Clock
	db     *journal.DB
	reaper *child.Reaper
	log    *slog.Logger
	notify *notify.Server
	ch     channels
	id     identity
	in     *intake
	root   atomic.Pointer[treeRoot]
	fprint *fingerprinter
	met    *metrics
	health health // read by /healthz, the upward watchdog and the last resort
	cs     commitState
	timers timerSet
	run    runState
	cg     cgroupState
	// refused remembers senders whose markers the loop refused (session
	// ceiling) since their last barrier, which then answers '0'.
	refused  notify.Refusals
	lateLogs rateLog // datagrams from a run that has died
	prune    pruner
	fatalErr error // the journal cannot be trusted (damaged, replaced, removed): stop, the next start checks it
	verifyc  chan error
	// logHold keeps log output off the restart path (see logHold).
	logHold logHold
	px      proxyState // the model-API proxy (--api-proxy on)
}

// health is what the loop shares with the watchers that judge it: when
// the loop last ran and when the first stop signal came (ns since in.base,
// monotonic; 0: none), and whether the loop runs (after boot).
type health struct {
	tick      atomic.Int64
	stopAsked atomic.Int64
	looping   atomic.Bool
}

// channels are how the other actors reach the loop.
type channels struct {
	sigc     chan os.Signal
	reqc     chan request
	msgc     chan inMsg
	quit     chan struct{}
	quitOnce sync.Once
	done     chan struct{} // closed when Run returns
}

// identity is who this supervise is.
type identity struct {
	self    int       // its pid
	treeID  string    // tags every process of every tree of this state dir
	started time.Time // when it started
}

// runState is the runner's side of the current run.
type runState struct {
	proc          *child.Process
	reserved      uint64 // a "starting" record of this run number is in the journal
	pingsAtLaunch uint64
	fenceSeq      uint64
	// resumeFile is true while a resume file may exist (one left by a
	// previous supervise counts: set at boot).
	resumeFile bool
	// launchNow: the machine asked for the next launch without delay;
	// awaitVerify: the first launch waits for the journal check.
	launchNow, awaitVerify bool
	// liveDelivered: the last DeliverLive reached the running agent.
	liveDelivered bool
	quitSeen      bool
	// tail keeps the end of the agent's stderr (task mode; nil otherwise).
	tail *stderrTail
	// outTail keeps the end of the agent's stdout (task mode): Claude Code
	// prints its API errors, a limit's words among them, there.
	outTail *stderrTail
	// agentLog keeps the agent's output in the state dir (nil: --log-keep 0).
	agentLog *agentLog
	// written and grew: the tails' size at the last flush and when it
	// last changed (the silence deadline's output).
	written int64
	grew    time.Time
	end     *machine.End
	reply   *machine.Reply
	// frameRun is the run whose stderr lines the framer is writing.
	frameRun atomic.Uint64
	// unsaved: the run resumes a session whose conversation the CLI never
	// saved (unsavedResume): its death is a lost conversation.
	unsaved string
}

// New returns a supervisor over an open journal and a reaper, with its
// notify socket bound (the caller holds the journal lock, so a stale socket
// may be replaced).
func New(cfg Config, db *journal.DB, reaper *child.Reaper) (*Supervisor, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.StopSignal == 0 {
		cfg.StopSignal = syscall.SIGTERM
	}
	if cfg.KeepRuns <= 0 {
		cfg.KeepRuns = 1000
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Trace == nil {
		cfg.Trace = trace.FromEnv()
	}
	if err := writeAgentFiles(cfg.StateDir, cfg.Agent.Files); err != nil {
		return nil, fmt.Errorf("the agent's settings in the state dir: %w", err)
	}
	sum := sha256.Sum256([]byte(cfg.StateDir))
	now := cfg.Clock.Now()
	s := &Supervisor{
		cfg:    cfg,
		clock:  cfg.Clock,
		m:      machine.New(machineConfig(cfg)),
		db:     db,
		reaper: reaper,
		in:     newIntake(now),
		ch: channels{sigc: make(chan os.Signal, 8), reqc: make(chan request), msgc: make(chan inMsg, 1024),
			quit: make(chan struct{}), done: make(chan struct{})},
		id: identity{self: os.Getpid(), treeID: hex.EncodeToString(sum[:6]), started: now},
		// A previous supervise may have left a resume file behind.
		run: runState{resumeFile: true, agentLog: newAgentLog(cfg.StateDir, cfg.LogKeep)},
	}
	s.lateLogs.interval = time.Second
	s.px.c = make(chan proxied, proxyQueue)
	s.log = newHoldLogger(cfg.Log, &s.logHold)
	s.met = newMetrics(s)
	if len(cfg.Argv) > 0 {
		s.fprint = newFingerprinter(cfg.Argv[0], cfg.Fingerprint)
	}
	s.tick(now)
	srv, err := notify.Listen(notify.Config{
		Dir:    NotifyDir(cfg.StateDir),
		Accept: s.accept,
		Log:    cfg.Log.With("component", "notify"),
	})
	if err != nil {
		return nil, err
	}
	s.notify = srv
	if cfg.User != nil {
		if err := s.shareWith(cfg.User); err != nil {
			srv.Close()
			return nil, err
		}
	}
	return s, nil
}

// machineConfig is the part of cfg the machine decides with.
func machineConfig(cfg Config) machine.Config {
	mc := machine.Config{Policy: cfg.Policy, Guard: cfg.Guard, Resume: cfg.Resume, ResumeOff: cfg.ResumeOff,
		StopSignal: int(cfg.StopSignal), StopSignalName: signalName(cfg.StopSignal), StopTimeout: cfg.StopTimeout,
		Watchdog: cfg.Watchdog, Deadlines: cfg.Deadlines, Foreground: cfg.Foreground,
		LiveResume: cfg.ResumeSignal != 0, Argv: cfg.Argv, StateDir: cfg.StateDir, Fingerprint: len(cfg.Argv) > 0,
		MaxOpenSessions: cfg.MaxOpenSessions, MaxTokens: cfg.MaxTokens,
		MaxTokensTotal: cfg.MaxTokensTotal, Limit: cfg.Limit,
		StartTimeout: cfg.StartTimeout, SilenceTimeout: cfg.SilenceTimeout}
	if cfg.ResumeExec != nil {
		dir := cfg.Dir
		if dir == "" {
			dir, _ = os.Getwd()
		}
		mc.Task = machine.TaskConfig{On: true, ID: taskID(dir, cfg.Argv), Exec: cfg.ResumeExec,
			Rerun: cfg.RerunTask, Command: cfg.Rerun, Interactive: machine.InteractiveArgv(cfg.Argv)}
	}
	return mc
}

// ServeNotify reads the notify socket until CloseNotify (an oklog/run
// actor).
func (s *Supervisor) ServeNotify() error { return s.notify.Serve(s.handle) }

// CloseNotify closes the notify socket; safe after ServeNotify returned.
func (s *Supervisor) CloseNotify() { s.notify.Close() }

// TagPrefix is the environment entry prefix that marks every process of
// every tree this state dir ever launched.
func (s *Supervisor) TagPrefix() string { return "SUPERVISE_TREE=" + s.id.treeID + "." }

func (s *Supervisor) tag(run uint64) string { return s.TagPrefix() + strconv.FormatUint(run, 10) }

// Signal hands a signal received by supervise to the loop: the first
// SIGTERM, SIGINT or SIGHUP stops the child gracefully, a second one during
// the grace period kills it at once. It never blocks.
func (s *Supervisor) Signal(sig os.Signal) {
	select {
	case s.ch.sigc <- sig:
	default:
	}
}

// Shutdown asks the loop to stop the child gracefully and return, as a
// SIGTERM would. It is safe to call at any time, more than once, and after
// Run returned (oklog/run's interrupt contract).
func (s *Supervisor) Shutdown() { s.ch.quitOnce.Do(func() { close(s.ch.quit) }) }

// Run supervises until the child ends for good, a stop completes, or the
// give-up limit is reached, and returns supervise's exit code.
func (s *Supervisor) Run(ctx context.Context) (int, error) {
	defer close(s.ch.done)
	defer s.met.events.close(2 * time.Second) // what is queued is written; a command still running is killed
	s.run.agentLog.open(orStd(s.cfg.Stdout, os.Stdout), orStd(s.cfg.Stderr, os.Stderr), s.framer())
	defer s.run.agentLog.close()
	s.cfg.Trace.Mark(trace.RunStart)
	defer s.cfg.Trace.Close()
	defer s.pruneWait()
	if s.cfg.Agent.Done != nil {
		defer s.cfg.Agent.Done()
	}
	for _, l := range s.cfg.Agent.Said {
		s.log.Info(l)
	}
	s.cs = commitState{w: startWriter(s.db, s.cfg.Failpoints.CommitDelay), dirty: map[string]bool{},
		ackLogs: rateLog{interval: time.Second}}
	defer s.stopWriter()
	// The cgroups are found and made (0.3 ms of /proc and cgroupfs reads)
	// while the boot waits for its commit's fdatasyncs: nothing in the
	// boot touches them. Joined right after the boot, before any return
	// (and so before closeCgroups) and before the loop's first launch.
	cgroups := make(chan struct{})
	go func() { defer close(cgroups); s.openCgroups() }()
	defer s.closeCgroups()
	defer s.cs.answers.Close()
	if s.fprint != nil {
		defer s.fprint.wait() // a warm-up hash started by the loop
	}
	err := s.boot(ctx)
	<-cgroups
	if err != nil {
		return ExitInternal, err
	}
	s.cfg.Trace.Mark(trace.BootDone)
	if s.cfg.VerifyInBackground {
		s.startVerify()
		defer func() {
			if s.verifyc != nil {
				s.verified(<-s.verifyc) // join it before the journal closes
			}
		}()
	}
	code, err := s.loop()
	if s.fatalErr != nil {
		// Do not mark a damaged journal clean: the next start checks it.
		return ExitInternal, s.fatalErr
	}
	if ferr := s.finish(); ferr != nil && err == nil {
		code, err = ExitInternal, ferr
	}
	return code, err
}

// loop feeds events to the machine until it ends.
func (s *Supervisor) loop() (int, error) {
	defer s.logHold.release()
	s.run.launchNow = true
	s.tick(s.clock.Now())
	s.health.looping.Store(true)
	defer s.health.looping.Store(false)
	for s.run.end == nil {
		switch {
		case s.run.awaitVerify:
			s.run.awaitVerify = false
			s.verified(s.awaitVerified())
			s.run.launchNow = true
		case s.run.launchNow:
			s.run.launchNow = false
			s.step(machine.LaunchDue{Fingerprint: s.fingerprintIfNeeded()})
		default:
			s.wait()
		}
	}
	var err error
	if s.run.end.Err != "" {
		err = errors.New(s.run.end.Err)
	}
	return s.run.end.Code, err
}

// step hands one event to the machine and performs its effects; it
// returns the first commit error among them.
func (s *Supervisor) step(ev machine.Event) error {
	fx := s.m.Step(ev, s.clock.Now())
	if _, ok := ev.(machine.Exited); ok {
		s.cfg.Trace.Mark(trace.Decided)
	}
	s.publishRefusals() // before the effects: the proxy refuses as soon as the machine decided
	return s.perform(fx)
}

// boot takes over the journal: clears up after a previous supervisor that
// died, and marks the journal as in use.
func (s *Supervisor) boot(ctx context.Context) error {
	b, clean, prev, reserved, err := s.readBoot()
	if err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	b.Verifying = s.cfg.VerifyInBackground
	if !clean {
		s.log.Warn("previous supervise did not shut down cleanly: cleaning up after it")
		if killed := child.KillTagged(s.TagPrefix()); len(killed) > 0 {
			s.log.Warn("killed processes left by the previous supervise", "pids", killed)
		}
		switch {
		case prev != nil:
			b.Orphan = s.reclaim(ctx, *prev)
		case reserved != nil:
			// Run reserved, never recorded as launched: its child may have
			// lived (killed by the parent-death signal, its tree by the tag
			// sweep above). Count it as a death: fail closed for turns.
			b.Orphan = &record.Run{Run: reserved.Run, Started: reserved.Started, Ended: s.clock.Now(),
				ExitCode: -1, Reason: record.ReasonSupervisorDied, Dirty: true}
		}
	}
	return s.step(b)
}

// readBoot reads what boot needs from the journal.
func (s *Supervisor) readBoot() (b machine.Booted, clean bool, prev *journal.Child, reserved *record.Run, err error) {
	err = s.db.View(func(tx *journal.Tx) error {
		clean = tx.Clean()
		if c, ok, err := tx.Child(); err != nil {
			return err
		} else if ok {
			prev = &c
		}
		last, err := tx.LastRuns(1)
		if err != nil {
			return err
		}
		b.NextRun = 1
		switch {
		case len(last) == 1 && last[0].Reason == record.ReasonStarting:
			// Reserved by the last supervisor, which may have forked it
			// before it died.
			reserved = &last[0]
			b.NextRun = last[0].Run
		case len(last) == 1:
			b.NextRun = last[0].Run + 1
			b.LastExit = &last[0]
		}
		b.Restarts = tx.Restarts()
		if _, err := tx.State(policyBackoff, &b.Backoff); err != nil {
			return err
		}
		if _, err := tx.State(policyGuard, &b.Guard); err != nil {
			return err
		}
		if _, err := tx.State(policyBudget, &b.Budget); err != nil {
			return err
		}
		b.Sessions, err = tx.OpenSessions()
		return err
	})
	return b, clean, prev, reserved, err
}

// reclaim deals with the child a dead supervisor left behind: if that exact
// process (pid and start time, same boot) still runs, its tree is killed;
// either way its run is recorded as a dirty death.
func (s *Supervisor) reclaim(ctx context.Context, c journal.Child) *record.Run {
	r := record.Run{Run: c.Run, PID: c.PID, StartTime: c.StartTime, Started: c.Started}
	s.db.View(func(tx *journal.Tx) error {
		if rec, ok, err := tx.Run(c.Run); ok && err == nil {
			r = rec
		}
		return nil
	})
	r.Ended = s.clock.Now()
	r.Reason = record.ReasonSupervisorDied
	r.Dirty = true
	r.ExitCode = -1 // unknown: it was not our child to wait for
	if c.BootID == child.BootID() {
		found, err := child.KillRecorded(ctx, c.PID, c.StartTime, s.cfg.StopTimeout+5*time.Second)
		switch {
		case err != nil:
			s.log.Error("killing the orphaned child", "pid", c.PID, "err", err)
		case found:
			s.log.Warn("killed the orphaned child of the previous supervise", "run", c.Run, "pid", c.PID)
			r.Signal = int(syscall.SIGKILL)
			r.ExitCode = 128 + int(syscall.SIGKILL)
		}
	}
	return &r
}

// finish records a clean shutdown, dropping a reservation never launched.
func (s *Supervisor) finish() error {
	return s.commitSync(func(tx *journal.Tx) error {
		if err := tx.SetChild(nil); err != nil {
			return err
		}
		if s.run.reserved != 0 {
			if err := tx.DeleteRun(s.run.reserved); err != nil {
				return err
			}
		}
		return tx.SetClean(true)
	})
}

// fatal handles a journal that cannot be trusted any more, found while
// running: a damaged one (the background check, or a commit that met a
// damaged page), or one replaced or removed under supervise. Supervise
// leaves a marker for the next start (which checks every page of the
// journal at the name before anything else, and moves it aside only if it
// is damaged), stops the agent gracefully and exits 1.
func (s *Supervisor) fatal(err error) {
	if s.fatalErr != nil {
		return
	}
	s.markVerifyFailed(err.Error())
	if errors.Is(err, journal.ErrReplaced) || errors.Is(err, errJournalGone) {
		s.fatalErr = fmt.Errorf("the journal was replaced or removed under supervise: %w", err)
		s.log.Error("the journal was replaced or removed under supervise: stopping the agent and exiting; the file supervise had open is kept in the state dir (journal.db.kept-TIME) and the next start recovers from it: the newer of it and an intact journal at the name is used, the other moved aside, never deleted",
			"err", err)
	} else {
		s.fatalErr = fmt.Errorf("the journal is damaged: %w", err)
		s.log.Error("the journal is damaged: stopping the agent and exiting; the next start moves the journal aside and starts afresh",
			"err", err)
	}
	s.Shutdown()
}

// errJournalGone is the fault of a journal whose name holds nothing.
var errJournalGone = errors.New("the state dir was removed or changed under supervise")

// tick records that the loop is running.
func (s *Supervisor) tick(now time.Time) { s.health.tick.Store(int64(now.Sub(s.in.base))) }

// loopAge is how long ago the loop last ran.
func (s *Supervisor) loopAge(now time.Time) time.Duration {
	return now.Sub(s.in.base) - time.Duration(s.health.tick.Load())
}

// healthyWithin is how recently the loop must have run for /healthz and
// the upward watchdog to call supervise healthy. The loop wakes at least
// once a second; its longest legitimate stall is a journal fsync.
const healthyWithin = 10 * time.Second

// ErrNotRunning is returned by requests to a supervisor whose loop ended.
var ErrNotRunning = errors.New("supervisor is not running")

// ErrUnknownSession is returned by a manual resume of a session the
// journal has never seen.
var ErrUnknownSession = machine.ErrUnknownSession

// StatePath returns the journal path inside a state dir.
func StatePath(stateDir string) string { return statedir.JournalPath(stateDir) }

// ControlPath returns the control socket path inside a state dir.
func ControlPath(stateDir string) string { return statedir.ControlPath(stateDir) }

// VerifyFailedPath names the marker left when a background journal check
// failed: the next start checks synchronously (and quarantines).
func VerifyFailedPath(stateDir string) string { return statedir.VerifyFailedPath(stateDir) }

// NotifyDir returns the private directory of the notify socket.
func NotifyDir(stateDir string) string { return statedir.NotifyDir(stateDir) }
