// Package supervisor owns the run loop of supervise: launch the agent,
// watch it, record its death in the journal, decide, and relaunch.
//
// One goroutine (Run) owns all loop state: the child, the sessions, the
// policy state. Everything else talks to it through channels: the signal
// actor (Signal), the control socket (requests), and Shutdown. Every death is
// committed to the journal before the next child is started.
package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/journal"
	"golang.org/x/sys/unix"
)

// Exit codes of Run, documented in supervise --help.
const (
	ExitOK       = 0 // the child ended cleanly, or a requested stop completed
	ExitInternal = 1 // supervise itself failed (journal, sockets)
	ExitGaveUp   = 4 // the give-up limit was reached
)

// forceQuitWindow is how soon a second terminal Ctrl-C must follow the
// first to force-quit.
const forceQuitWindow = 2 * time.Second

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
	// Foreground keeps the child in supervise's process group, for a
	// terminal (see child.Spec.Foreground).
	Foreground bool
	// KeepRuns bounds the run records kept in the journal.
	KeepRuns              int
	Stdin, Stdout, Stderr *os.File
	Log                   *slog.Logger
}

// Supervisor is the run loop. Create it with New; Run it once.
type Supervisor struct {
	cfg    Config
	db     *journal.DB
	reaper *child.Reaper
	log    *slog.Logger

	sigc     chan os.Signal
	reqc     chan request
	quit     chan struct{}
	quitOnce sync.Once
	done     chan struct{} // closed when Run returns

	// Loop state, owned by the Run goroutine.
	started  time.Time
	treeID   string
	nextRun  uint64
	restarts uint64
	proc     *child.Process
	run      journal.Run // the current or last run
	lastExit *journal.Run
	backoff  crashloop.State
	guard    crashloop.GuardState
	sessions map[string]*journal.Session
	state    string // child state for status: starting, running, stopping, backoff, exited

	stop          *stopRequest
	lastInterrupt time.Time
}

// stopRequest is a stop asked of the supervisor.
type stopRequest struct {
	sig      os.Signal // what asked for it; nil for Shutdown
	at       time.Time
	deadline time.Time // SIGKILL after this
	forced   bool      // a second signal: kill at once, exit 128+N
	fromTTY  bool      // a terminal Ctrl-C the child received itself
	// graceArmed is set once the SIGKILL timer runs.
	graceArmed bool
}

// New returns a supervisor over an open journal and a reaper. Run starts it.
func New(cfg Config, db *journal.DB, reaper *child.Reaper) *Supervisor {
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
	return &Supervisor{
		cfg:      cfg,
		db:       db,
		reaper:   reaper,
		log:      cfg.Log,
		sigc:     make(chan os.Signal, 8),
		reqc:     make(chan request),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
		treeID:   hex.EncodeToString(sum[:6]),
		sessions: map[string]*journal.Session{},
		state:    "starting",
	}
}

// TagPrefix is the environment entry prefix that marks every process of
// every tree this state dir ever launched.
func (s *Supervisor) TagPrefix() string { return "SUPERVISE_TREE=" + s.treeID + "." }

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
	if err := s.boot(ctx); err != nil {
		return ExitInternal, err
	}
	code, err := s.loop(ctx)
	if ferr := s.finish(); ferr != nil && err == nil {
		err = ferr
	}
	return code, err
}

func (s *Supervisor) loop(ctx context.Context) (int, error) {
	for {
		if s.stop != nil {
			return s.stopCode(), nil
		}
		first := s.run.Run == 0
		exit := s.launchAndWait(ctx)
		dec := s.died(exit)
		if first && exit.ExecErr != nil {
			// The very first launch failing is a configuration error: say
			// so and stop, rather than retry a binary that is not there.
			return exit.Code, fmt.Errorf("agent could not be started: %w", exit.ExecErr)
		}
		if s.stop != nil {
			return s.stopCode(), nil
		}
		switch dec.Action {
		case crashloop.Exit:
			return s.exitCode(exit), nil
		case crashloop.GiveUp:
			s.log.Error("giving up: the agent keeps dying", "failures", dec.Failures,
				"limit", s.cfg.Policy.GiveUp, "exit_code", ExitGaveUp)
			return ExitGaveUp, nil
		}
		if !s.sleep(dec.Delay) {
			return s.stopCode(), nil
		}
	}
}

// exitCode is supervise's exit code when the policy ends supervision after
// exit: the child's own status (128+N for a signal, 126/127 when it could
// not start), so a wrapper sees what the agent did.
func (s *Supervisor) exitCode(exit child.Exit) int { return exit.Code }

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
	s.started = time.Now()
	startTime, _ := child.StartTime(ctx, os.Getpid())
	var prevChild *journal.Child
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
		if len(last) == 1 {
			s.nextRun = last[0].Run + 1
			r := last[0]
			s.lastExit = &r
		} else {
			s.nextRun = 1
		}
		s.restarts = tx.Restarts()
		if _, err := tx.State("backoff", &s.backoff); err != nil {
			return err
		}
		if _, err := tx.State("guard", &s.guard); err != nil {
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
		if prevChild != nil {
			orphan = s.reclaim(ctx, *prevChild)
		}
	}
	return s.db.Update(func(tx *journal.Tx) error {
		if orphan != nil {
			s.guard = s.cfg.Guard.Death(s.guard, orphan.Ended)
			if err := tx.PutRun(*orphan); err != nil {
				return err
			}
			if err := tx.PutState("guard", s.guard); err != nil {
				return err
			}
			s.lastExit = orphan
		}
		if err := tx.SetChild(nil); err != nil {
			return err
		}
		if err := tx.SetOwner(journal.Owner{PID: os.Getpid(), StartTime: startTime,
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
	err := s.db.View(func(tx *journal.Tx) error {
		if rec, ok, err := tx.Run(c.Run); ok && err == nil {
			r = rec
		}
		return nil
	})
	if err != nil {
		s.log.Warn("reading the orphaned run", "err", err)
	}
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

// finish records a clean shutdown.
func (s *Supervisor) finish() error {
	return s.db.Update(func(tx *journal.Tx) error {
		if err := tx.SetChild(nil); err != nil {
			return err
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
	env := make([]string, 0, len(base)+4)
outer:
	for _, kv := range base {
		for _, d := range drop {
			if strings.HasPrefix(kv, d) {
				continue outer
			}
		}
		env = append(env, kv)
	}
	return append(env,
		"SUPERVISE_RUN="+strconv.FormatUint(run, 10),
		"SUPERVISE_STATE_DIR="+s.cfg.StateDir,
		s.TagPrefix()+strconv.FormatUint(run, 10),
	)
}

// launchAndWait starts the next run and supervises it until it has died,
// serving signals and control requests meanwhile.
func (s *Supervisor) launchAndWait(ctx context.Context) child.Exit {
	n := s.nextRun
	s.nextRun++
	s.state = "starting"
	p, err := s.reaper.Start(child.Spec{
		Args:       s.cfg.Argv,
		Env:        s.childEnv(n),
		Dir:        s.cfg.Dir,
		Foreground: s.cfg.Foreground,
		Stdin:      s.cfg.Stdin,
		Stdout:     s.cfg.Stdout,
		Stderr:     s.cfg.Stderr,
	})
	relaunch := s.lastExit != nil
	if err != nil {
		exit := child.FailedExit(err, time.Now())
		s.run = journal.Run{Run: n, Started: exit.Started, Argv: s.cfg.Argv}
		s.log.Error("agent could not be started", "run", n, "cmd", s.cfg.Argv[0], "exit_code", exit.Code, "err", err)
		return exit
	}
	s.proc = p
	s.state = "running"
	s.run = journal.Run{Run: n, PID: p.PID(), StartTime: p.StartTime(), Started: p.Started(),
		Reason: journal.ReasonRunning, Argv: s.cfg.Argv}
	err = s.db.Update(func(tx *journal.Tx) error {
		if err := tx.PutRun(s.run); err != nil {
			return err
		}
		if relaunch {
			if err := tx.AddRestart(); err != nil {
				return err
			}
		}
		return tx.SetChild(&journal.Child{Run: n, PID: p.PID(), StartTime: p.StartTime(),
			PGID: p.PGID(), Tag: s.TagPrefix() + strconv.FormatUint(n, 10),
			BootID: child.BootID(), Started: p.Started()})
	})
	if err != nil {
		s.log.Error("journal: recording the child's start failed", "run", n, "err", err)
	}
	if relaunch {
		s.restarts++
	}
	s.log.Info("child started", "run", n, "pid", p.PID(), "cmd", s.cfg.Argv[0])
	return s.watch(ctx, p)
}

// watch waits for p to die, handling stop requests and control requests.
func (s *Supervisor) watch(ctx context.Context, p *child.Process) child.Exit {
	quit := s.quit
	var graceC <-chan time.Time // armed once a stop is under way
	for {
		select {
		case <-p.Done():
			s.proc = nil
			return p.Exit()
		case sig := <-s.sigc:
			s.onSignal(sig, p)
		case <-quit:
			quit = nil
			s.requestStop(nil, p)
		case req := <-s.reqc:
			s.serve(req)
		case <-graceC:
			s.log.Warn("child did not stop within the grace period: killing its process tree",
				"pid", p.PID(), "stop_timeout", s.cfg.StopTimeout)
			_ = p.Kill()
			graceC = nil
			continue
		}
		if graceC == nil && s.stop != nil && !s.stop.fromTTY && !s.stop.forced && !s.stop.graceArmed {
			s.stop.graceArmed = true
			t := time.NewTimer(time.Until(s.stop.deadline))
			defer t.Stop()
			graceC = t.C
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
		s.stop = &stopRequest{sig: sig, at: now, deadline: now.Add(s.cfg.StopTimeout), fromTTY: true}
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
		s.log.Warn("second signal during the stop: killing the process tree at once", "signal", sig.String(), "pid", p.PID())
		s.stop.forced = true
		s.stop.sig = sig
		_ = p.Kill()
		return
	}
	s.stop = &stopRequest{sig: sig, at: now, deadline: now.Add(s.cfg.StopTimeout)}
	s.state = "stopping"
	name := "shutdown"
	if sig != nil {
		name = sig.String()
	}
	s.log.Info("stopping the child", "reason", name, "pid", p.PID(),
		"stop_signal", unix.SignalName(s.cfg.StopSignal), "stop_timeout", s.cfg.StopTimeout)
	if err := p.Terminate(s.cfg.StopSignal); err != nil {
		s.log.Warn("signalling the child failed", "pid", p.PID(), "err", err)
	}
}

// stopRequested reports whether exit counts as a requested stop: supervise
// asked the child to stop, or a terminal Ctrl-C reached it shortly before.
func (s *Supervisor) stopRequested(exit child.Exit) bool {
	if s.stop == nil {
		return false
	}
	if s.stop.fromTTY {
		return !exit.Ended.After(s.stop.deadline)
	}
	return true
}

// classify decides how a run ended and whether the death is dirty.
func (s *Supervisor) classify(exit child.Exit) (reason string, dirty bool) {
	switch {
	case s.stopRequested(exit):
		return journal.ReasonStopped, false
	case exit.ExecErr != nil:
		return journal.ReasonExecFailed, true
	case exit.Signal != 0:
		return journal.ReasonSignal, true
	case exit.Code != 0:
		return journal.ReasonExit, true
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
	s.run = r
	s.lastExit = &r
	s.state = "exited"

	if r.Dirty {
		s.guard = s.cfg.Guard.Death(s.guard, r.Ended)
	}
	dec, st := s.cfg.Policy.Next(s.backoff, crashloop.Run{Started: r.Started, Ended: r.Ended,
		Dirty: r.Dirty, ExecFailed: exit.ExecErr != nil}, rand.Float64())
	s.backoff = st
	err := s.db.Update(func(tx *journal.Tx) error {
		if err := tx.PutRun(r); err != nil {
			return err
		}
		if err := tx.SetChild(nil); err != nil {
			return err
		}
		if err := tx.PutState("backoff", s.backoff); err != nil {
			return err
		}
		if err := tx.PutState("guard", s.guard); err != nil {
			return err
		}
		_, err := tx.PruneRuns(s.cfg.KeepRuns, 100)
		return err
	})
	if err != nil {
		s.log.Error("journal: recording the child's death failed", "run", r.Run, "err", err)
	}

	next := dec.Action.String()
	switch {
	case s.stop != nil:
		next = "stop"
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
	if s.guard.Open {
		s.log.Warn("crash-loop guard is open: automatic resumes are held until a run proves healthy",
			"chain", s.guard.Chain)
	}
	return dec
}

// sleep waits out a backoff delay, serving signals and requests; it
// returns false when a stop was requested meanwhile.
func (s *Supervisor) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	s.state = "backoff"
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case sig := <-s.sigc:
			s.log.Info("stop requested during backoff", "signal", sig.String())
			s.stop = &stopRequest{sig: sig, at: time.Now()}
			return false
		case <-s.quit:
			s.stop = &stopRequest{at: time.Now()}
			return false
		case req := <-s.reqc:
			s.serve(req)
		}
	}
}

// ErrNotRunning is returned by requests to a supervisor whose loop ended.
var ErrNotRunning = errors.New("supervisor is not running")

// StatePath returns the journal path inside a state dir.
func StatePath(stateDir string) string { return filepath.Join(stateDir, "journal.db") }

// ControlPath returns the control socket path inside a state dir.
func ControlPath(stateDir string) string { return filepath.Join(stateDir, "control.sock") }
