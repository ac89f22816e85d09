package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	oklog "github.com/oklog/run"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/cmd/supervise/internal/console"
	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/internal/failpoint"
	"github.com/supervise-dev/supervise/internal/gctarget"
	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/internal/trace"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/observe"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/runflags"
	"github.com/supervise-dev/supervise/supervisor"
)

// runCmd is `supervise run`: flags, the agent's argv, then supervise.
func runCmd(ctx context.Context, args []string, stdin *os.File, stdout, stderr io.Writer) int {
	tr := trace.FromEnv() // bench-only trace points: nil, and free, unless $SUPERVISE_BENCH_TRACE is set
	tr.Mark(trace.MainStart)
	fs := flag.NewFlagSet("supervise run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f runflags.Flags
	f.Register(fs)
	fs.Usage = func() { runflags.Usage(fs.Output(), fs, usageText) } // the top-level help, every run flag in its group
	set, err := runflags.Parse(fs, args, stdout, stderr)
	if err != nil {
		return runflags.ExitCode(err)
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "supervise: no agent to run: supervise [flags] -- AGENT [ARGS...]")
		return exitUsage
	}
	// A terminal on stderr is written only through a queue that never
	// blocks supervise (a stopped output, ^S, must not hold a decision);
	// its settings are kept to be put back between runs.
	term := console.Open(stderr)
	defer term.Close()
	stderr = term.Writer(stderr)
	// The log goes to stderr, or (interactive, below) to a file in the
	// state dir once that is prepared.
	dest := runflags.NewLogDest(stderr)
	defer dest.Close()
	cfg, log, err := f.Config(set, argv, stdin, dest)
	if err != nil {
		fmt.Fprintf(stderr, "supervise: %v\n", err)
		return exitUsage
	}
	cfg.Report = stderr // the lines a person must read at a task's end: never only in the log file
	cfg.Trace = tr
	// Under `supervise chaos`: report each step to the harness.
	obs, closeObs, err := observe.FromEnv(log)
	if err != nil {
		fmt.Fprintf(stderr, "supervise: %v\n", err)
		return exitUsage
	}
	defer closeObs()
	var it *console.Interactive
	if cfg.Foreground && term.IsTerminal() {
		// An interactive agent holds the terminal: supervise says
		// nothing on it while a child runs, one line between runs, after
		// it put the terminal back as it found it.
		it = console.NewInteractive(dest, term)
		cfg.Report = it.Stderr()
		obs = observe.Terminal(term.Observed(), observe.AgentName(argv), cfg.ResumeExec != nil, obs)
	}
	cfg.Observe = obs
	return supervise(ctx, cfg, f.MetricsAddr, log, stderr, it)
}

// supervise opens the state dir and runs the actors until the loop ends.
func supervise(ctx context.Context, cfg supervisor.Config, metricsAddr string, log *slog.Logger, stderr io.Writer, it *console.Interactive) int {
	// Go's default GC target until the first collection, 50 from then on.
	gctarget.Tune()
	fp := failpoint.FromEnv() // test failpoints, read once; all off in production
	// Catch the stop signals before anything else: a SIGTERM during the
	// boot (journal check, cleaning up after a dead predecessor) must stop
	// supervise cleanly, not kill it by the default action. Signals that
	// arrive before the loop runs wait in the channel for it.
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigc)
	// A closed stderr (the log reader went away: a dead `| tee`, a log
	// shipper restarting) must not kill supervise, and the agent with it:
	// Go exits by SIGPIPE on a write to a broken fd 1 or 2 unless SIGPIPE
	// is notified. Notified, not ignored: an ignored signal would stay
	// ignored across exec, in the agent and its tools.
	pipec := make(chan os.Signal, 1)
	signal.Notify(pipec, syscall.SIGPIPE)
	defer signal.Stop(pipec)
	// The state dir must be private (internal/statedir): refused when
	// another user owns it or could write to it; its real path is used
	// from here on, so no link in the path can be swapped later.
	created := statedir.Missing(cfg.StateDir) // directories Prepare makes: removed again if the agent never starts
	dir, tightened, err := statedir.Prepare(cfg.StateDir)
	if err != nil {
		fmt.Fprintf(stderr, "supervise: %v\n", err)
		return exitInternal
	}
	if tightened && cfg.User == nil { // with --user it is opened to 0711 again, on purpose
		log.Info("state dir was readable by others: tightened it to 0700", "state_dir", dir)
	}
	cfg.StateDir = dir
	db, verifyLater, err := journal.OpenState(cfg.StateDir, fp, log)
	cfg.Trace.Mark(trace.JournalOpened)
	cfg.VerifyInBackground, cfg.Failpoints = verifyLater, fp
	if err != nil {
		fmt.Fprintf(stderr, "supervise: %v\n", err)
		if errors.Is(err, journal.ErrLocked) {
			return exitLocked
		}
		return exitInternal
	}
	unused := false // the state dir is new and the agent never started
	defer func() {
		// After db.Close (deferred below, so run first): a launch that
		// failed before the agent ever ran (`supervise -- no-such-agent`,
		// exit 127) leaves no state dir behind for ls and status to list.
		if unused {
			it.DropLog()
			if err := statedir.RemoveUnused(dir, created); err != nil {
				log.Warn("could not remove the unused state dir", "state_dir", dir, "err", err)
			}
		}
	}()
	defer db.Close()
	it.Start(cfg, db)

	reaper, err := child.NewReaper(log.With("component", "child"))
	if err != nil {
		fmt.Fprintf(stderr, "supervise: %v\n", err)
		return exitInternal
	}
	defer reaper.Close()

	sup, err := supervisor.New(cfg, db, reaper)
	if err != nil {
		fmt.Fprintf(stderr, "supervise: %v\n", err)
		return exitInternal
	}
	ctl, err := supervisor.ListenControl(statedir.ControlPath(cfg.StateDir), sup)
	if err != nil {
		sup.CloseNotify()
		fmt.Fprintf(stderr, "supervise: %v\n", err)
		return exitInternal
	}
	var web *supervisor.HTTP
	if metricsAddr != "" {
		if web, err = supervisor.ListenHTTP(metricsAddr, sup); err != nil {
			sup.CloseNotify()
			ctl.Close()
			fmt.Fprintf(stderr, "supervise: %v\n", err)
			return exitInternal
		}
		log.Info("serving /metrics and /healthz", "addr", web.Addr())
	}

	code := exitInternal
	var g oklog.Group
	{
		// Signals and the last resort: every SIGTERM, SIGINT or SIGHUP goes
		// to the loop (stop on the first, kill on the second); when the loop
		// cannot act (a journal fault, a stop not acted on in time, a stall),
		// this kills the agent's tree and exits 1.
		cancel := make(chan struct{})
		g.Add(func() error { return sup.Watch(sigc, cancel, os.Exit) }, func(error) { close(cancel) })
	}
	{
		// Supervision loop: launch, watch, journal, decide, relaunch. It
		// returns when supervision is over; interrupting it stops the child
		// gracefully first.
		g.Add(func() error {
			var err error
			code, err = sup.Run(ctx)
			if err != nil {
				log.Error("supervision ended", "err", err, "exit_code", code)
			}
			return errLoopDone
		}, func(error) {
			sup.Shutdown()
		})
	}
	{
		// Notify socket: heartbeats and turn markers from the agent's tree.
		g.Add(func() error {
			if err := sup.ServeNotify(); err != nil {
				return fmt.Errorf("notify socket: %w", err)
			}
			return nil
		}, func(error) {
			sup.CloseNotify()
		})
	}
	{
		// Control socket: status while the journal is locked.
		g.Add(func() error {
			if err := ctl.Serve(); err != nil {
				return fmt.Errorf("control socket: %w", err)
			}
			return nil
		}, func(error) {
			ctl.Close()
		})
	}
	if web != nil {
		// Metrics and health: /metrics for Prometheus, /healthz for a
		// liveness probe that fails when the loop is wedged.
		g.Add(func() error {
			if err := web.Serve(); err != nil {
				return fmt.Errorf("metrics address: %w", err)
			}
			return nil
		}, func(error) {
			web.Close()
		})
	}
	if up, ok := supervisor.UpwardFromEnv(); ok {
		// Upward notification: supervise reports to its own service
		// manager (READY, WATCHDOG while healthy, STATUS, STOPPING).
		upCtx, cancel := context.WithCancel(ctx)
		g.Add(func() error {
			return sup.RunUpward(upCtx, up)
		}, func(error) {
			cancel()
		})
	}
	if fp.ActorFail != "" {
		// Failpoint (tests only): an actor that fails as a socket actor
		// does when its socket breaks.
		stop := make(chan struct{})
		g.Add(func() error {
			return fp.FailActor(stop)
		}, func(error) {
			close(stop)
		})
	}
	// The loop is the only actor that may end the group: any other that
	// returns first (a broken socket) stopped the agent for nothing the user
	// asked, so supervise failed, and exits non-zero for its manager
	// (systemd's Restart=on-failure) to act.
	if err := g.Run(); !errors.Is(err, errLoopDone) {
		log.Error("supervise failed: an actor stopped the loop", "err", err)
		return exitInternal
	}
	unused = created > 0 && (code == exitcode.CannotExec || code == exitcode.NotFound) && neverStarted(db)
	return code
}

// neverStarted reports whether the journal records no run whose agent
// started (every run failed to exec) and no session.
func neverStarted(db *journal.DB) bool {
	started := false
	err := db.View(func(tx *journal.Tx) error {
		runs, err := tx.LastRuns(1 << 20)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.Reason != record.ReasonExecFailed || r.PID != 0 {
				started = true
			}
		}
		return tx.ForEachSessionBrief(func(journal.SessionBrief, func() (record.Session, error)) error {
			started = true
			return errStop
		})
	})
	return !started && (err == nil || errors.Is(err, errStop))
}

var errStop = errors.New("stop")

var errLoopDone = errors.New("supervision loop ended")
