// Package supervisor owns the run loop of supervise: launch the agent,
// watch it, record its death in the journal, decide, and relaunch.
//
// One goroutine (Run) owns all loop state: the child, the sessions, the
// policy state. Everything else talks to it through channels: the signal
// actor (Signal), the control socket (requests), the notify socket
// (messages; heartbeats bypass the loop, see intake), and Shutdown. Every
// death is committed to the journal before the next child is started.
package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/internal/failpoint"
	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/notify"
	"github.com/supervise-dev/supervise/resume"
)

// Exit codes of Run: the values of the one table in internal/exitcode
// (printed by supervise --help).
const (
	ExitOK       = exitcode.OK       // the child ended cleanly, or a requested stop completed
	ExitInternal = exitcode.Internal // supervise itself failed (journal, sockets)
	ExitGaveUp   = exitcode.GaveUp   // the give-up limit was reached
	ExitParked   = exitcode.Parked   // task mode: a session needs a person (parked, or its resume held)
)

// forceQuitWindow is how soon a second terminal Ctrl-C must follow the
// first to force-quit.
const forceQuitWindow = 2 * time.Second

// duplicateSignalWindow: the same stop signal again this soon after the
// first is the same request delivered twice, not a force-quit: timeout(1)
// signals its child and then its process group, and `kill -- -PGID` of a
// group that holds supervise reaches it next to a direct kill.
const duplicateSignalWindow = 100 * time.Millisecond

// Config is everything the loop needs to know.
type Config struct {
	Name     string
	StateDir string
	// Argv is the agent command line.
	Argv []string
	Dir  string
	// Env is the base environment of the child; nil means supervise's own.
	Env    []string
	Policy crashloop.Policy
	Guard  crashloop.Guard
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
	// the same command left its session parked or stopped.
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
	// KeepRuns bounds the run records kept in the journal.
	KeepRuns int
	// KeepSessions bounds the settled (idle, closed) sessions kept in the
	// journal: the oldest beyond it are pruned in the background. Open
	// sessions are never pruned. 0 keeps every session.
	KeepSessions int
	// Observe, when set, is told about every launch, committed marker
	// batch and death, and the loop waits for it (see Observer). nil in
	// production; `supervise chaos` sets it.
	Observe               Observer
	Stdin, Stdout, Stderr *os.File
	Log                   *slog.Logger
}

// Supervisor is the run loop. Create it with New, serve its notify socket
// with ServeNotify, and Run it once.
type Supervisor struct {
	cfg    Config
	fp     failpoint.Points // test failpoints, off in production
	db     *journal.DB
	reaper *child.Reaper
	log    *slog.Logger
	notify *notify.Server
	self   int

	sigc     chan os.Signal
	reqc     chan request
	msgc     chan inMsg
	quit     chan struct{}
	quitOnce sync.Once
	done     chan struct{} // closed when Run returns

	in       *intake
	fprint   *fingerprinter
	root     atomic.Pointer[treeRoot]
	fenceSeq uint64
	m        *metrics
	// loopTick is when the loop last ran, in ns since in.base (monotonic);
	// health checks and the upward watchdog read it.
	loopTick atomic.Int64

	// Loop state, owned by the Run goroutine.
	started       time.Time
	treeID        string
	nextRun       uint64
	reserved      bool // a "starting" record of nextRun is in the journal
	restarts      uint64
	proc          *child.Process
	run           journal.Run // the current or last run
	lastExit      *journal.Run
	backoff       crashloop.State
	guard         crashloop.GuardState
	policyDirty   bool // backoff or guard changed since last committed
	sessions      map[string]*journal.Session
	state         string // child state for status
	ready         bool
	statusText    string
	stop          *stopRequest
	abort         *abortState
	lastInterrupt time.Time
	wd            watchdogState
	dl            deadlineState
	cg            cgroupState
	pingsAtLaunch uint64
	grace         struct {
		timer           *time.Timer
		start, deadline time.Time
	}
	cs  commitState
	seq sequenceLog
	// refused remembers senders whose markers the loop refused (session
	// ceiling) since their last barrier, which then answers '0'.
	refused     notify.Refusals
	refusedLogs rateLog
	lateLogs    rateLog // datagrams from a run that has died
	prune       pruner

	fatalErr error // the journal is damaged: stop and let the next start move it aside
	// resumeFile is true while a resume file may exist (one left by a
	// previous supervise counts: set at boot).
	resumeFile bool
	verifying  bool       // the background journal check is running
	verifyErr  error      // it failed: automatic resumes stay held
	verifyc    chan error // its result

	// turnDone is true once a turn completed during the current run: the
	// run proved healthy whatever its uptime.
	turnDone bool
	task     taskState // task mode's memory of this invocation

	// logHold keeps log output off the restart path (see logHold).
	logHold logHold
}

// stopRequest is a stop asked of the supervisor.
type stopRequest struct {
	sig     os.Signal // what asked for it; nil for Shutdown
	at      time.Time
	forced  bool // a second signal: kill at once, exit 128+N
	fromTTY bool // a terminal Ctrl-C the child received itself
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
	sum := sha256.Sum256([]byte(cfg.StateDir))
	now := time.Now()
	s := &Supervisor{
		cfg:      cfg,
		fp:       failpoint.FromEnv(),
		db:       db,
		reaper:   reaper,
		log:      cfg.Log,
		self:     os.Getpid(),
		sigc:     make(chan os.Signal, 8),
		reqc:     make(chan request),
		msgc:     make(chan inMsg, 1024),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		in:       newIntake(now),
		treeID:   hex.EncodeToString(sum[:6]),
		sessions: map[string]*journal.Session{},
		state:    "starting",
		started:  now,
		// A previous supervise may have left a resume file behind.
		resumeFile: true,
	}
	s.refusedLogs.interval = time.Second
	s.lateLogs.interval = time.Second
	s.log = newHoldLogger(cfg.Log, &s.logHold)
	s.m = newMetrics(s)
	if len(cfg.Argv) > 0 {
		s.fprint = newFingerprinter(cfg.Argv[0], cfg.Fingerprint)
	}
	if s.taskMode() {
		dir := cfg.Dir
		if dir == "" {
			dir, _ = os.Getwd()
		}
		s.task.id = taskID(dir, cfg.Argv)
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
	return s, nil
}

// ServeNotify reads the notify socket until CloseNotify (an oklog/run
// actor).
func (s *Supervisor) ServeNotify() error { return s.notify.Serve(s.handle) }

// CloseNotify closes the notify socket; safe after ServeNotify returned.
func (s *Supervisor) CloseNotify() { s.notify.Close() }

// TagPrefix is the environment entry prefix that marks every process of
// every tree this state dir ever launched.
func (s *Supervisor) TagPrefix() string { return "SUPERVISE_TREE=" + s.treeID + "." }

func (s *Supervisor) tag(run uint64) string { return s.TagPrefix() + strconv.FormatUint(run, 10) }

// Signal hands a signal received by supervise to the loop: the first
// SIGTERM, SIGINT or SIGHUP stops the child gracefully, a second one during
// the grace period kills it at once. It never blocks.
func (s *Supervisor) Signal(sig os.Signal) {
	select {
	case s.sigc <- sig:
	default:
	}
}

// Shutdown asks the loop to stop the child gracefully and return, as a
// SIGTERM would. It is safe to call at any time, more than once, and after
// Run returned (oklog/run's interrupt contract).
func (s *Supervisor) Shutdown() { s.quitOnce.Do(func() { close(s.quit) }) }

// Run supervises until the child ends for good, a stop completes, or the
// give-up limit is reached, and returns supervise's exit code.
func (s *Supervisor) Run(ctx context.Context) (int, error) {
	defer close(s.done)
	defer s.pruneWait()
	s.cs = commitState{w: startWriter(s.db, s.fp.CommitDelay), dirty: map[string]bool{}}
	defer s.stopWriter()
	s.openCgroups()
	defer s.closeCgroups()
	if s.fprint != nil {
		defer s.fprint.wait() // a warm-up hash started by the loop
	}
	if err := s.boot(ctx); err != nil {
		return ExitInternal, err
	}
	if s.cfg.VerifyInBackground {
		s.startVerify()
		defer func() {
			if s.verifying {
				s.verified(<-s.verifyc) // join it before the journal closes
			}
		}()
	}
	code, err := s.loop(ctx)
	if s.fatalErr != nil {
		// Do not mark a damaged journal clean: the next start checks it.
		return ExitInternal, s.fatalErr
	}
	if ferr := s.finish(); ferr != nil && err == nil {
		code, err = ExitInternal, ferr
	}
	return code, err
}

func (s *Supervisor) loop(ctx context.Context) (int, error) {
	defer s.logHold.release()
	for {
		if s.stop != nil {
			s.taskStopped()
			return s.stopCode(), nil
		}
		first := s.run.Run == 0
		if first && s.verifying && len(s.pendingIgnoringHold()) > 0 {
			// Nothing is resumed from state not yet verified.
			s.log.Info("waiting for the journal check before the first launch: resumes are owed")
			s.verified(<-s.verifyc)
		}
		if first && s.taskMode() && !s.cfg.RerunTask && len(s.pendingIgnoringHold()) == 0 && s.taskBlocked() > 0 {
			return ExitParked, nil
		}
		exit := s.runOnce()
		dec := s.died(exit)
		if first && exit.ExecErr != nil {
			// The very first launch failing is a configuration error: say
			// so and stop, rather than retry a binary that is not there.
			return exit.Code, fmt.Errorf("agent could not be started: %w", exit.ExecErr)
		}
		if s.stop != nil {
			s.taskStopped()
			return s.stopCode(), nil
		}
		switch {
		case dec.Action == crashloop.GiveUp:
			s.log.Error("giving up: the agent keeps dying", "failures", dec.Failures,
				"limit", s.cfg.Policy.GiveUp, "exit_code", ExitGaveUp)
			return ExitGaveUp, nil
		case s.taskMode():
			if code, done := s.taskNext(exit); done {
				return code, nil
			}
		case dec.Action == crashloop.Exit:
			return exit.Code, nil
		}
		if dec.Delay > 0 {
			s.state = "backoff"
			t := time.NewTimer(dec.Delay)
			s.wait(nil, t.C)
			t.Stop()
		}
	}
}

// stopCode is the exit code after a requested stop: 0, or 128+N when a
// second signal N forced it.
func (s *Supervisor) stopCode() int {
	if s.stop.forced {
		if sig, ok := s.stop.sig.(syscall.Signal); ok {
			return 128 + int(sig)
		}
		return 128 + int(syscall.SIGKILL)
	}
	return ExitOK
}

// boot takes over the journal: clears up after a previous supervisor that
// died, and marks the journal as in use.
func (s *Supervisor) boot(ctx context.Context) error {
	startTime, _ := child.StartTime(ctx, s.self)
	var prevChild *journal.Child
	var reserved *journal.Run
	clean := true
	err := s.db.View(func(tx *journal.Tx) error {
		clean = tx.Clean()
		if c, ok, err := tx.Child(); err != nil {
			return err
		} else if ok {
			prevChild = &c
		}
		last, err := tx.LastRuns(1)
		if err != nil {
			return err
		}
		s.nextRun = 1
		switch {
		case len(last) == 1 && last[0].Reason == journal.ReasonStarting:
			// Reserved by the last supervisor, which may have forked it
			// before it died.
			reserved = &last[0]
			s.nextRun = last[0].Run
		case len(last) == 1:
			s.nextRun = last[0].Run + 1
			s.lastExit = &last[0]
		}
		s.restarts = tx.Restarts()
		if _, err := tx.State(policyBackoff, &s.backoff); err != nil {
			return err
		}
		if _, err := tx.State(policyGuard, &s.guard); err != nil {
			return err
		}
		open, err := tx.OpenSessions()
		for i := range open {
			s.sessions[open[i].ID] = &open[i]
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("read journal: %w", err)
	}

	var orphan *journal.Run
	if !clean {
		s.log.Warn("previous supervise did not shut down cleanly: cleaning up after it")
		if killed := child.KillTagged(s.TagPrefix()); len(killed) > 0 {
			s.log.Warn("killed processes left by the previous supervise", "pids", killed)
		}
		switch {
		case prevChild != nil:
			orphan = s.reclaim(ctx, *prevChild)
		case reserved != nil:
			// Run reserved, never recorded as launched: its child may have
			// lived (killed by the parent-death signal, its tree by the tag
			// sweep above). Count it as a death: fail closed for turns.
			orphan = &journal.Run{Run: reserved.Run, Started: reserved.Started, Ended: time.Now(),
				ExitCode: -1, Reason: journal.ReasonSupervisorDied, Dirty: true}
			s.nextRun = reserved.Run + 1
		}
		if orphan != nil {
			s.log.Warn("the run the previous supervise left behind counts as a dirty death", "run", orphan.Run,
				"pid", orphan.PID, "reason", orphan.Reason)
			s.logDecisions(s.decide(resume.Death{Reason: orphan.Reason, Signal: orphan.Signal, ExitCode: orphan.ExitCode,
				Run: orphan.Run, At: orphan.Ended}, time.Now()))
		}
	}
	return s.commitSync(func(tx *journal.Tx) error {
		if orphan != nil {
			s.guard = s.cfg.Guard.Death(s.guard, orphan.Ended)
			if err := tx.PutRun(*orphan); err != nil {
				return err
			}
			if err := tx.PutState(policyGuard, s.guard); err != nil {
				return err
			}
			s.lastExit = orphan
		}
		if err := tx.SetChild(nil); err != nil {
			return err
		}
		if err := s.reserve(tx); err != nil {
			return err
		}
		if err := tx.SetOwner(journal.Owner{PID: s.self, StartTime: startTime,
			BootID: child.BootID(), Started: s.started}); err != nil {
			return err
		}
		return tx.SetClean(false)
	})
}

// reclaim deals with the child a dead supervisor left behind: if that exact
// process (pid and start time, same boot) still runs, its tree is killed;
// either way its run is recorded as a dirty death.
func (s *Supervisor) reclaim(ctx context.Context, c journal.Child) *journal.Run {
	r := journal.Run{Run: c.Run, PID: c.PID, StartTime: c.StartTime, Started: c.Started}
	s.db.View(func(tx *journal.Tx) error {
		if rec, ok, err := tx.Run(c.Run); ok && err == nil {
			r = rec
		}
		return nil
	})
	r.Ended = time.Now()
	r.Reason = journal.ReasonSupervisorDied
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
	if r.Run >= s.nextRun {
		s.nextRun = r.Run + 1
	}
	return &r
}

// reserve records the number of the next run before its fork, in the
// commit that precedes it (boot, or the previous run's death), so that a
// supervisor killed between the fork and the launch commit can never hand
// the same number to two runs.
func (s *Supervisor) reserve(tx *journal.Tx) error {
	s.reserved = true
	return tx.PutRun(journal.Run{Run: s.nextRun, Reason: journal.ReasonStarting, Started: time.Now()})
}

// finish records a clean shutdown, dropping a reservation never launched.
func (s *Supervisor) finish() error {
	return s.commitSync(func(tx *journal.Tx) error {
		if err := tx.SetChild(nil); err != nil {
			return err
		}
		if s.reserved {
			if err := tx.DeleteRun(s.nextRun); err != nil {
				return err
			}
		}
		return tx.SetClean(true)
	})
}

// childEnv builds the child's environment: supervise's own, minus what
// belongs to supervise's own service manager, plus the contract variables.
func (s *Supervisor) childEnv(run uint64) []string {
	base := s.cfg.Env
	if base == nil {
		base = os.Environ()
	}
	drop := []string{"NOTIFY_SOCKET=", "WATCHDOG_USEC=", "WATCHDOG_PID=", "LISTEN_FDS=",
		"LISTEN_PID=", "LISTEN_FDNAMES=", "SUPERVISE_RUN=", "SUPERVISE_RESUME_FILE=",
		"SUPERVISE_TREE=", "SUPERVISE_STATE_DIR="}
	env := make([]string, 0, len(base)+5)
outer:
	for _, kv := range base {
		for _, d := range drop {
			if strings.HasPrefix(kv, d) {
				continue outer
			}
		}
		env = append(env, kv)
	}
	env = append(env,
		"NOTIFY_SOCKET="+s.notify.Path(),
		"SUPERVISE_RUN="+strconv.FormatUint(run, 10),
		"SUPERVISE_STATE_DIR="+s.cfg.StateDir,
		s.tag(run),
	)
	if s.cfg.Watchdog > 0 {
		// No WATCHDOG_PID: the pid is unknown before the fork, and a wrong
		// one switches libsystemd's watchdog off in the agent.
		env = append(env, "WATCHDOG_USEC="+strconv.FormatInt(s.cfg.Watchdog.Microseconds(), 10))
	}
	return env
}

// runOnce starts the next run and supervises it until it has died and
// every notify message it sent has been applied.
func (s *Supervisor) runOnce() child.Exit {
	n := s.nextRun
	s.nextRun++
	s.reserved = false
	s.state = "starting"
	s.ready, s.statusText = false, ""
	s.turnDone = false
	relaunch := s.lastExit != nil
	s.liftParks()
	argv, extra := s.prepareDelivery(n)
	spec := child.Spec{
		Args:       argv,
		Env:        append(s.childEnv(n), extra...),
		Dir:        s.cfg.Dir,
		Foreground: s.cfg.Foreground,
		Stdin:      s.cfg.Stdin,
		Stdout:     s.cfg.Stdout,
		Stderr:     s.cfg.Stderr,
		Cgroup:     s.runCgroup(n),
		Tag:        s.tag(n),
	}
	p, err := s.reaper.Start(spec)
	if cerr := err; err != nil && spec.Cgroup != nil {
		spec.Cgroup = nil
		if p, err = s.reaper.Start(spec); err == nil {
			s.cgroupFailed(cerr)
		}
	}
	s.logHold.release()
	if err != nil {
		s.endRunCgroup()
		exit := child.FailedExit(err, time.Now())
		s.run = journal.Run{Run: n, Started: exit.Started, Argv: argv}
		s.log.Error("agent could not be started", "run", n, "cmd", argv[0], "exit_code", exit.Code, "err", err)
		return exit
	}
	s.proc = p
	s.state = "running"
	s.run = journal.Run{Run: n, PID: p.PID(), StartTime: p.StartTime(), Started: p.Started(),
		Reason: journal.ReasonRunning, Argv: argv}
	s.root.Store(&treeRoot{pid: p.PID(), run: n, tag: s.tag(n)})
	s.refused.Forget() // the last tree's pids mean nothing now
	s.notify.ForgetRefusals()
	s.startWatchdog(p.Started())
	if relaunch {
		s.restarts++
		s.m.restarts.Inc()
	}
	err = s.commitSync(func(tx *journal.Tx) error {
		if err := tx.PutRun(s.run); err != nil {
			return err
		}
		if relaunch {
			if err := tx.AddRestart(); err != nil {
				return err
			}
		}
		return tx.SetChild(&journal.Child{Run: n, PID: p.PID(), StartTime: p.StartTime(),
			PGID: p.PGID(), Tag: s.tag(n), BootID: child.BootID(), Started: p.Started()})
	})
	if err != nil {
		s.log.Error("journal: recording the child's start failed", "run", n, "err", err)
	}
	s.log.Info("child started", "run", n, "pid", p.PID(), "cmd", argv[0])
	s.publish()
	s.observeStart(n, argv)

	s.wait(p, nil)
	s.drain()
	s.root.Store(nil)
	s.stopWatchdog()
	s.stopDeadlines()
	s.stopGrace()
	s.endRunCgroup()
	s.proc = nil
	s.flushBeats(time.Now())
	return p.Exit()
}

// wait runs the event loop until the child p has died, or, with p nil
// (backoff), until backoff fires or a stop is requested.
func (s *Supervisor) wait(p *child.Process, backoff <-chan time.Time) {
	var done <-chan struct{}
	if p != nil {
		done = p.Done()
	}
	s.logHold.release()
	quit := s.quit
	flush := time.NewTicker(time.Second)
	defer flush.Stop()
	for {
		s.tick(time.Now())
		select {
		case <-done:
			return
		case <-backoff:
			return
		case sig := <-s.sigc:
			if p == nil {
				s.log.Info("stop requested during backoff", "signal", sig.String())
				s.stop = &stopRequest{sig: sig, at: time.Now()}
				return
			}
			s.onSignal(sig, p)
		case <-quit:
			quit = nil
			if p == nil {
				s.stop = &stopRequest{at: time.Now()}
				return
			}
			s.requestStop(nil, p)
		case req := <-s.reqc:
			s.serve(req)
		case m := <-s.msgc:
			if !m.fence {
				s.take(m, time.Now())
			}
		case err := <-s.cs.w.out:
			s.committed(err)
		case <-s.retryC():
			s.retryFired()
		case now := <-flush.C:
			s.fp.BlockWhileWedged()
			s.flushBeats(now)
			s.checkMemory()
			s.rearmDeadlines()
			s.evictSettled()
			s.maybePrune(now)
			s.publish()
			if s.guard.Open && p != nil && s.cfg.Guard.Proven(s.run.Started, now) {
				s.clearGuard("the run outlived --guard-gap")
			}
		case now := <-s.wdC():
			s.checkWatchdog(now)
		case now := <-s.dlC():
			s.deadlineFired(now)
		case now := <-s.graceC():
			s.graceFired(now)
		case err := <-s.verifyc:
			s.verified(err)
		}
	}
}

// onSignal applies a signal received by supervise while p runs.
func (s *Supervisor) onSignal(sig os.Signal, p *child.Process) {
	now := time.Now()
	if sig == os.Interrupt && s.cfg.Foreground && (s.stop == nil || s.stop.fromTTY) {
		// A terminal Ctrl-C: the kernel delivered it to the agent too (same
		// process group), so it is not forwarded.
		if !s.lastInterrupt.IsZero() && now.Sub(s.lastInterrupt) <= forceQuitWindow {
			s.log.Warn("second Ctrl-C: force-quitting", "pid", p.PID())
			s.stop = &stopRequest{sig: sig, at: now, forced: true}
			_ = p.Kill()
			return
		}
		s.lastInterrupt = now
		s.stop = &stopRequest{sig: sig, at: now, fromTTY: true}
		s.armCtrlC(now)
		s.log.Info("Ctrl-C reached the agent; if it exits now that is a stop, not a crash; Ctrl-C again within 2s force-quits",
			"pid", p.PID())
		return
	}
	s.requestStop(sig, p)
}

// requestStop starts a graceful stop, or forces one already under way.
func (s *Supervisor) requestStop(sig os.Signal, p *child.Process) {
	now := time.Now()
	if s.stop != nil && !s.stop.fromTTY {
		if sig == nil {
			return // Shutdown during a stop: nothing more to do
		}
		if sig == s.stop.sig && now.Sub(s.stop.at) < duplicateSignalWindow {
			s.log.Info("the same signal again at once: one stop request delivered twice (as timeout(1) does); send it again to force the stop",
				"signal", sig.String(), "pid", p.PID())
			return
		}
		s.log.Warn("second signal during the stop: killing the process tree at once", "signal", sig.String(), "pid", p.PID())
		s.stop.forced = true
		s.stop.sig = sig
		_ = p.Kill()
		return
	}
	s.stop = &stopRequest{sig: sig, at: now}
	s.state = "stopping"
	s.stopWatchdog()
	name := "shutdown"
	if sig != nil {
		name = sig.String()
	}
	s.log.Info("stopping the child", "reason", name, "pid", p.PID(),
		"stop_signal", unix.SignalName(s.cfg.StopSignal), "stop_timeout", s.cfg.StopTimeout)
	s.publish()
	if err := p.Terminate(s.cfg.StopSignal); err != nil {
		s.log.Warn("signalling the child failed", "pid", p.PID(), "err", err)
	}
	if s.abort == nil {
		s.armGrace(now, now.Add(s.cfg.StopTimeout))
	}
}

// stopRequested reports whether exit counts as a requested stop: supervise
// asked the child to stop, or a terminal Ctrl-C reached it shortly before.
func (s *Supervisor) stopRequested(exit child.Exit) bool {
	if s.stop == nil {
		return false
	}
	if s.stop.fromTTY {
		return !exit.Ended.After(s.stop.at.Add(s.cfg.StopTimeout))
	}
	return true
}

// openTurn reports whether some session was mid-turn.
func (s *Supervisor) openTurn() bool {
	for _, sess := range s.sessions {
		if sess.State == journal.InTurn || sess.State == journal.Waiting {
			return true
		}
	}
	return false
}

// classify decides how a run ended and whether the death is dirty.
func (s *Supervisor) classify(exit child.Exit) (reason string, dirty bool) {
	switch {
	case s.abort != nil && (s.stop == nil || s.abort.at.Before(s.stop.at)):
		return s.abort.reason, true
	case s.stopRequested(exit):
		return journal.ReasonStopped, false
	case exit.ExecErr != nil:
		return journal.ReasonExecFailed, true
	case exit.Signal != 0:
		return journal.ReasonSignal, true
	case exit.Code != 0:
		return journal.ReasonExit, true
	case s.openTurn():
		return journal.ReasonTurnOpen, true
	}
	return journal.ReasonExit, false
}

// died records the end of the current run and decides what follows. The
// record is committed before it returns, so before any relaunch.
func (s *Supervisor) died(exit child.Exit) crashloop.Decision {
	if s.stop != nil && s.stop.fromTTY && !s.stopRequested(exit) {
		s.stop = nil // the Ctrl-C was for the agent, which carried on; this is a new death
	}
	r := s.run
	r.PID = exit.PID
	r.Ended = exit.Ended
	r.ExitCode = exit.Code
	r.Signal = int(exit.Signal)
	r.Reason, r.Dirty = s.classify(exit)
	r.Reason = s.namedOOM(r.Reason, r.Dirty)
	s.run = r
	s.lastExit = &r
	s.state = "exited"
	s.abort = nil

	if r.Dirty {
		s.guard = s.cfg.Guard.Death(s.guard, r.Ended)
		s.m.death(r.Reason)
		if r.Reason == journal.ReasonWatchdog {
			s.m.watchdogKills.Inc()
		}
	}
	requested := r.Reason == journal.ReasonStopped && !r.Dirty
	var decs []resume.Decision
	if exit.ExecErr == nil {
		decs = s.decide(resume.Death{Reason: r.Reason, Signal: r.Signal, ExitCode: r.ExitCode, Requested: requested,
			Clean: !r.Dirty && !requested, Run: r.Run, At: r.Ended}, time.Now())
	}
	dec, st := s.cfg.Policy.Next(s.backoff, crashloop.Run{Started: r.Started, Ended: r.Ended,
		Dirty: r.Dirty, ExecFailed: exit.ExecErr != nil, Proven: s.turnDone}, rand.Float64())
	s.backoff = st
	err := s.commitSync(func(tx *journal.Tx) error {
		if err := tx.PutRun(r); err != nil {
			return err
		}
		if err := tx.SetChild(nil); err != nil {
			return err
		}
		if err := s.putPolicy(tx); err != nil {
			return err
		}
		if s.stop == nil && dec.Action != crashloop.GiveUp {
			if err := s.reserve(tx); err != nil {
				return err
			}
		}
		_, err := tx.PruneRuns(s.cfg.KeepRuns, 100)
		return err
	})
	if err != nil {
		s.log.Error("journal: recording the child's death failed", "run", r.Run, "err", err)
	}
	if s.stop == nil && dec.Action == crashloop.Relaunch && dec.Delay == 0 && !s.taskMode() {
		// The death is committed and the relaunch is immediate: what
		// follows is only said, and is written once the next child is
		// forked (or as soon as the loop waits or ends).
		s.logHold.start()
	}

	next := dec.Action.String()
	switch {
	case s.stop != nil:
		next = "stop"
	case s.taskMode() && dec.Action != crashloop.GiveUp:
		next = s.taskNextWords(dec)
	case dec.Action == crashloop.Relaunch && dec.Delay > 0:
		next = "relaunch in " + dec.Delay.Round(time.Millisecond).String()
	case dec.Action == crashloop.Relaunch:
		next = "relaunch now"
	}
	level := slog.LevelInfo
	if r.Dirty {
		level = slog.LevelWarn
	}
	s.log.Log(context.Background(), level, "child exited", "run", r.Run, "pid", r.PID, "how", exit.String(),
		"exit_code", r.ExitCode, "signal", r.Signal, "reason", r.Reason, "dirty", r.Dirty,
		"uptime", exit.Uptime().Round(time.Millisecond), "next", next)
	s.logDecisions(decs)
	changed := make([]string, len(decs))
	for i, d := range decs {
		changed[i] = d.Session.ID
	}
	s.observeDeath(r, changed)
	if s.guard.Open {
		s.log.Warn("crash-loop guard is open: automatic resumes are held until a run proves healthy",
			"chain", s.guard.Chain)
	}
	s.publish()
	return dec
}

// fatal handles a damaged journal found while running (the background
// check, or a commit that met a damaged page): nothing can be trusted to it
// any more, so supervise leaves a marker for the next start (which checks
// the journal before anything else and moves it aside), stops the agent
// gracefully and exits 1. Restarting through the quarantine is the only
// safe way on.
func (s *Supervisor) fatal(err error) {
	if s.fatalErr != nil {
		return
	}
	s.fatalErr = fmt.Errorf("the journal is damaged: %w", err)
	if werr := statedir.WriteFile(s.cfg.StateDir, filepath.Base(VerifyFailedPath(s.cfg.StateDir)), []byte(err.Error()+"\n")); werr != nil {
		s.log.Error("could not leave the marker that makes the next start check the journal", "err", werr)
	}
	s.log.Error("the journal is damaged: stopping the agent and exiting; the next start moves the journal aside and starts afresh",
		"err", err)
	s.Shutdown()
}

// tick records that the loop is running.
func (s *Supervisor) tick(now time.Time) { s.loopTick.Store(int64(now.Sub(s.in.base))) }

// loopAge is how long ago the loop last ran.
func (s *Supervisor) loopAge(now time.Time) time.Duration {
	return now.Sub(s.in.base) - time.Duration(s.loopTick.Load())
}

// healthyWithin is how recently the loop must have run for /healthz and
// the upward watchdog to call supervise healthy. The loop wakes at least
// once a second; its longest legitimate stall is a journal fsync.
const healthyWithin = 10 * time.Second

// Healthy reports whether the supervision loop ran recently.
func (s *Supervisor) Healthy() bool { return s.loopAge(time.Now()) < healthyWithin }

// putPolicy stores the backoff and guard state.
func (s *Supervisor) putPolicy(tx *journal.Tx) error {
	if err := tx.PutState(policyBackoff, s.backoff); err != nil {
		return err
	}
	s.policyDirty = false
	return tx.PutState(policyGuard, s.guard)
}

// ErrNotRunning is returned by requests to a supervisor whose loop ended.
var ErrNotRunning = errors.New("supervisor is not running")

// StatePath returns the journal path inside a state dir.
func StatePath(stateDir string) string { return filepath.Join(stateDir, "journal.db") }

// ControlPath returns the control socket path inside a state dir.
func ControlPath(stateDir string) string { return filepath.Join(stateDir, "control.sock") }

// VerifyFailedPath names the marker left when a background journal check
// failed: the next start checks synchronously (and quarantines).
func VerifyFailedPath(stateDir string) string { return StatePath(stateDir) + ".verify-failed" }

// NotifyDir returns the private directory of the notify socket.
func NotifyDir(stateDir string) string { return filepath.Join(stateDir, "notify") }
