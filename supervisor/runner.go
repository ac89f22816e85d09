package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/internal/signame"
	"github.com/supervise-dev/supervise/internal/trace"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/profile"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// perform does what the machine asked, in order, and returns the first
// commit error.
func (s *Supervisor) perform(fx []machine.Effect) error {
	var first error
	saved := false
	for _, e := range fx {
		switch e := e.(type) {
		case machine.Save:
			s.save(e)
			saved = true
		case machine.Commit:
			if err := s.commit(e); err != nil && first == nil {
				first = err
			}
		case machine.Launch:
			s.launch(e)
		case machine.Backoff:
			s.backoff(e.Delay)
		case machine.Signal:
			s.signal(e)
		case machine.Arm:
			s.arm(e)
		case machine.Log:
			s.log.Log(context.Background(), slog.Level(e.Level), e.Msg, e.Args...)
		default:
			s.performOther(e)
		}
	}
	if saved {
		s.flushAsync()
	}
	return first
}

// performOther does the effects that are neither commits, launches,
// signals, timers nor logs.
func (s *Supervisor) performOther(e machine.Effect) {
	switch e := e.(type) {
	case machine.Publish:
		s.publish()
	case machine.Count:
		s.met.count(e)
	case machine.Refuse:
		s.refused.Add(e.PID)
	case machine.StampFingerprint:
		s.stampFingerprint(e)
	case machine.DeliverLive:
		s.deliverLive(e)
	case machine.AwaitVerify:
		s.run.awaitVerify = true
	case machine.HoldLogs:
		s.logHold.start()
	case machine.ObserveMarker:
		s.observeMarker(e)
	case machine.ObserveStart:
		s.observeStart(e)
	case machine.ObserveDeath:
		s.observeDeath(e)
	case machine.Notice:
		s.met.events.tell(e, s.cfg.Name, s.clock.Now())
	case machine.Report:
		s.report(e.Lines)
	case machine.Fatal:
		s.fatal(errors.New(e.Err))
	case machine.End:
		s.run.end = &e
	case machine.Reply:
		s.run.reply = &e
	}
}

// save queues records for the next group commit.
func (s *Supervisor) save(e machine.Save) {
	for _, id := range e.IDs {
		s.cs.dirty[id] = true
	}
	s.cs.runDirty = s.cs.runDirty || e.Run
	s.cs.policyDirty = s.cs.policyDirty || e.Policy
}

// commit performs a synchronous commit of what is pending and e's records.
func (s *Supervisor) commit(e machine.Commit) error {
	var fn func(tx *journal.Tx) error
	switch e.Kind {
	case machine.CommitBoot:
		fn = func(tx *journal.Tx) error { return s.writeBoot(tx, e) }
	case machine.CommitLaunch:
		fn = func(tx *journal.Tx) error { return s.writeLaunch(tx, e) }
	case machine.CommitDeath:
		fn = func(tx *journal.Tx) error { return s.writeDeath(tx, e) }
	}
	update := s.db.Update
	if e.Kind == machine.CommitDeath {
		// Durable after one fdatasync, bbolt's own commit finishing
		// while the next child forks (journal/redo.go).
		update = s.db.UpdateLogged
	}
	err := s.commitVia(update, fn)
	if e.Kind == machine.CommitDeath {
		s.cfg.Trace.Mark(trace.Committed)
	}
	if err != nil && e.Why != "" && e.Kind != machine.CommitBoot {
		s.log.Error("journal: "+e.Why+" failed", "run", e.Run.Run, "err", err)
	}
	return err
}

func (s *Supervisor) writeBoot(tx *journal.Tx, e machine.Commit) error {
	if e.Orphan != nil {
		if err := tx.PutRun(*e.Orphan); err != nil {
			return err
		}
		if err := tx.PutState(policyGuard, s.m.Guard); err != nil {
			return err
		}
	}
	if err := tx.SetChild(nil); err != nil {
		return err
	}
	if err := s.reserve(tx, e.Reserve); err != nil {
		return err
	}
	startTime, _ := child.StartTime(context.Background(), s.id.self)
	if err := tx.SetOwner(journal.Owner{PID: s.id.self, StartTime: startTime,
		BootID: child.BootID(), Started: s.id.started}); err != nil {
		return err
	}
	return tx.SetClean(false)
}

func (s *Supervisor) writeLaunch(tx *journal.Tx, e machine.Commit) error {
	if err := tx.PutRun(e.Run); err != nil {
		return err
	}
	if e.Relaunch {
		if err := tx.AddRestart(); err != nil {
			return err
		}
	}
	p := s.run.proc
	return tx.SetChild(&journal.Child{Run: e.Run.Run, PID: p.PID(), StartTime: p.StartTime(),
		PGID: p.PGID(), Tag: s.tag(e.Run.Run), BootID: child.BootID(), Started: p.Started()})
}

func (s *Supervisor) writeDeath(tx *journal.Tx, e machine.Commit) error {
	if err := tx.PutRun(e.Run); err != nil {
		return err
	}
	if err := tx.SetChild(nil); err != nil {
		return err
	}
	if err := s.putPolicy(tx); err != nil {
		return err
	}
	if e.Reserve != 0 {
		if err := s.reserve(tx, e.Reserve); err != nil {
			return err
		}
	}
	_, err := tx.PruneRuns(s.cfg.KeepRuns, 100)
	return err
}

// reserve records the number of the next run before its fork, in the
// commit that precedes it (boot, or the previous run's death), so that a
// supervisor killed between the fork and the launch commit can never hand
// the same number to two runs.
func (s *Supervisor) reserve(tx *journal.Tx, n uint64) error {
	s.run.reserved = n
	return tx.PutRun(record.Run{Run: n, Reason: record.ReasonStarting, Started: s.clock.Now()})
}

// putPolicy stores the backoff and guard state.
func (s *Supervisor) putPolicy(tx *journal.Tx) error {
	if err := tx.PutState(policyBackoff, s.m.Backoff); err != nil {
		return err
	}
	if err := tx.PutState(policyBudget, s.m.Budget); err != nil {
		return err
	}
	s.cs.policyDirty = false
	return tx.PutState(policyGuard, s.m.Guard)
}

// backoff waits delay before the next launch (none: at once).
func (s *Supervisor) backoff(delay time.Duration) {
	if delay <= 0 {
		s.run.launchNow = true
		return
	}
	s.timers.set(s.clock, int(machine.TimerBackoff), s.clock.Now().Add(delay))
}

// signal signals the child, if one runs.
func (s *Supervisor) signal(e machine.Signal) {
	p := s.run.proc
	if p == nil {
		return
	}
	var err error
	switch {
	case e.Kill:
		err = p.Kill()
	case e.Plain:
		err = p.Signal(syscall.Signal(e.Sig))
	default:
		err = p.Terminate(syscall.Signal(e.Sig))
	}
	if err != nil && !e.Kill {
		s.log.Warn("signalling the child failed", "pid", p.PID(), "err", err)
	}
}

// arm sets or stops a timer.
func (s *Supervisor) arm(e machine.Arm) {
	if e.ResetPing {
		s.in.lastPing.Store(int64(s.clock.Now().Sub(s.in.base)))
	}
	if e.Disarm {
		s.timers.clear(int(e.Timer))
		return
	}
	s.timers.set(s.clock, int(e.Timer), e.At)
}

// childTrace is the Spec.Trace through which child marks its trace points
// (the fork call, the reap) on r; nil when tracing is off.
func childTrace(r *trace.Recorder) func(child.TracePoint) {
	if r == nil {
		return nil
	}
	return func(p child.TracePoint) {
		switch p {
		case child.TraceForkCall:
			r.Mark(trace.ForkCall)
		case child.TraceReaped:
			r.Mark(trace.Reaped)
		}
	}
}

// launch starts the run the machine prepared: the resume file first (its
// deliveries committed before the fork), then the child.
func (s *Supervisor) launch(e machine.Launch) {
	s.run.reserved = 0
	argv, env := s.deliver(e)
	if s.run.unsaved = s.unsavedResume(e.Task, e.IDs); s.run.unsaved != "" {
		s.log.Warn("resuming a conversation the CLI never saved: its resume cannot work", "run", e.Run, "why", s.run.unsaved)
	}
	spec := child.Spec{
		Args:       argv,
		Env:        append(s.childEnv(e.Run), env...),
		Dir:        s.cfg.Dir,
		Foreground: s.cfg.Foreground,
		Stdin:      s.cfg.Stdin,
		Stdout:     s.cfg.Stdout,
		Stderr:     s.cfg.Stderr,
		Cgroup:     s.runCgroup(e.Run),
		Tag:        s.tag(e.Run),
		Credential: s.cfg.User,
		Trace:      childTrace(s.cfg.Trace),
	}
	s.cfg.Trace.Mark(trace.CgroupReady)
	spec.Env = s.startProxy(e.Run, spec.Env)
	spec.Env = append(spec.Env, s.cfg.User.Env()...) // last: they win
	if s.cfg.Agent.Launch != nil {
		if err := s.cfg.Agent.Launch(spec.Env); err != nil {
			s.log.Error("the agent's profile could not prepare this launch: its turns may be unseen", "run", e.Run, "err", err)
		}
	}
	tailW, outW := s.streams(&spec, e)
	s.refused.Forget() // the last tree's pids mean nothing now
	s.notify.ForgetRefusals()
	// Datagrams the child sends before its start is recorded wait for it
	// in accept, rather than being taken for a stranger's.
	pending := &treeRoot{run: e.Run, tag: spec.Tag, ready: make(chan struct{})}
	s.root.Store(pending)
	s.cfg.Trace.Mark(trace.ForkStart)
	p, err := s.reaper.Start(spec)
	s.cfg.Trace.Mark(trace.Started)
	if cerr := err; err != nil && spec.Cgroup != nil {
		spec.Cgroup = nil
		if p, err = s.reaper.Start(spec); err == nil {
			s.cgroupFailed(cerr)
		}
	}
	s.logHold.release()
	if tailW != nil {
		tailW.Close() // the child has its own copy; the pipe ends when its tree's copies close
	}
	if outW != nil {
		outW.Close()
	}
	if err != nil {
		s.run.tail, s.run.outTail = nil, nil
		s.stopProxy()
		s.root.Store(nil)
		close(pending.ready)
		s.endRunCgroup()
		exit := child.FailedExit(err, s.clock.Now())
		s.log.Error("agent could not be started", "run", e.Run, "cmd", argv[0], "exit_code", exit.Code, "err", err)
		s.step(machine.Exited{ExecFailed: true, ExecErr: err.Error(), Code: exit.Code, Started: exit.Started,
			Ended: exit.Ended, How: exit.String(), Argv: argv, Random: rand.Float64()})
		return
	}
	s.run.proc = p
	s.root.Store(&treeRoot{pid: p.PID(), run: e.Run, tag: spec.Tag})
	close(pending.ready)
	// The launch counts as the first ping.
	s.in.lastPing.Store(int64(p.Started().Sub(s.in.base)))
	s.run.pingsAtLaunch = s.in.pings.Load()
	s.step(machine.Started{Run: e.Run, PID: p.PID(), StartTime: p.StartTime(), At: p.Started(), Argv: argv})
}

// deliver writes the resume file of a launch and records its deliveries;
// it returns the argv and the extra environment of the child.
func (s *Supervisor) deliver(e machine.Launch) (argv []string, env []string) {
	path := ResumePath(s.cfg.StateDir)
	if e.Items == nil {
		if s.run.resumeFile {
			os.Remove(path) // never let a stale file look current
			s.run.resumeFile = false
		}
		if s.cfg.ResumeSignal != 0 {
			env = append(env, "SUPERVISE_RESUME_FILE="+path)
		}
		return e.Argv, env
	}
	switch err := resume.WriteFile(path, e.Items); {
	case err != nil && e.Task:
		// The continuation is in the argv; launching the task instead
		// would run it again as a new session.
		s.log.Error("writing the resume file failed: the --resume-exec launch goes ahead without it", "err", err)
	case err != nil:
		s.log.Error("writing the resume file failed: resumes not delivered this run", "err", err)
		s.step(machine.Delivered{Run: e.Run, Unsent: true})
		return s.cfg.Argv, nil
	default:
		s.run.resumeFile = true
		s.giveResumeFile(path)
		env = append(env, "SUPERVISE_RESUME_FILE="+path)
	}
	s.step(machine.Delivered{Run: e.Run, IDs: e.IDs, Via: e.Via})
	return e.Argv, env
}

// deliverLive rewrites the resume file for the running child and signals
// it (--resume-signal).
func (s *Supervisor) deliverLive(e machine.DeliverLive) {
	s.run.liveDelivered = false
	if err := resume.WriteFile(ResumePath(s.cfg.StateDir), e.Items); err != nil {
		s.log.Error("writing the resume file failed", "err", err)
		return
	}
	s.run.resumeFile = true
	s.giveResumeFile(ResumePath(s.cfg.StateDir))
	run := s.m.Run.Run
	s.step(machine.Delivered{Run: run, IDs: e.Fresh, Live: true})
	if err := s.run.proc.Signal(s.cfg.ResumeSignal); err != nil {
		s.log.Warn("signalling the resume to the agent failed", "err", err)
		return
	}
	s.run.liveDelivered = true
	s.log.Info("delivering resumes to the running agent", "run", run, "sessions", e.Fresh, "signal", s.cfg.ResumeSignal.String())
}

// stampFingerprint hands the machine the agent's fingerprint for breaker
// parks, or starts hashing it ahead of the park that may follow.
func (s *Supervisor) stampFingerprint(e machine.StampFingerprint) {
	if s.fprint == nil {
		return
	}
	if e.Warm {
		s.fprint.warm()
		return
	}
	s.step(machine.Fingerprinted{IDs: e.IDs, Fingerprint: s.fprint.get()})
}

// fingerprintIfNeeded is the agent's fingerprint when a launch may lift a
// park with it.
func (s *Supervisor) fingerprintIfNeeded() *record.Fingerprint {
	if s.fprint == nil || !s.m.NeedFingerprint() {
		return nil
	}
	return s.fprint.get()
}

// report prints lines a person must read, after the log lines before them.
func (s *Supervisor) report(lines []string) {
	s.logHold.release()
	w := s.cfg.Report
	if w == nil {
		w = os.Stderr
	}
	for _, l := range lines {
		fmt.Fprintln(w, "supervise: "+l)
	}
}

// wait waits for one event and hands it to the machine.
func (s *Supervisor) wait() {
	var done <-chan struct{}
	if p := s.run.proc; p != nil {
		done = p.Done()
	}
	var quit chan struct{}
	if !s.run.quitSeen {
		quit = s.ch.quit
	}
	if s.timers.flush == nil {
		s.timers.flush = s.clock.NewTimer(time.Second)
	}
	s.logHold.release()
	s.betweenRuns()
	s.tick(s.clock.Now())
	select {
	case <-done:
		s.reaped()
	case <-s.timers.c(int(machine.TimerBackoff)):
		s.timers.clear(int(machine.TimerBackoff))
		s.run.launchNow = true
	case sig := <-s.ch.sigc:
		s.stopSignal(sig)
	case <-quit:
		s.run.quitSeen = true
		s.step(machine.StopRequested{})
	case req := <-s.ch.reqc:
		s.serve(req)
	case m := <-s.ch.msgc:
		if !m.fence {
			s.take(m)
		}
	case x := <-s.px.c:
		s.traffic(x)
	case err := <-s.cs.w.out:
		s.committed(err)
	case <-s.retryC():
		s.retryFired()
	case <-s.timers.flush.C():
		s.timers.flush.Reset(time.Second)
		s.flushTick()
	case <-s.timers.c(int(machine.TimerWatchdog)):
		s.timerFired(machine.TimerWatchdog)
	case <-s.timers.c(int(machine.TimerDeadline)):
		s.timerFired(machine.TimerDeadline)
	case <-s.timers.c(int(machine.TimerGrace)):
		s.timerFired(machine.TimerGrace)
	case err := <-s.verifyc:
		s.verified(err)
	}
}

// timerFired reads what the machine needs to judge timer k and hands it
// over.
func (s *Supervisor) timerFired(k machine.Timer) {
	s.timers.clear(int(k))
	ev := machine.TimerFired{Timer: k}
	now := s.clock.Now()
	p := s.run.proc
	switch k {
	case machine.TimerWatchdog:
		ev.SincePing = s.in.sincePing(now)
		if ev.SincePing >= s.m.Watchdog.Period {
			ev.Queued = s.notify.Pending()
			ev.JobStopped = p != nil && stoppedByJobControl(p.PID())
		}
	case machine.TimerDeadline:
		ev.Queued = s.notify.Pending()
	case machine.TimerGrace:
		ev.IgnoresSIGINT = p != nil && s.m.Stop != nil && s.m.Stop.FromTTY && ignoresInterrupt(p.PID())
	}
	s.step(ev)
}

// flushTick is the loop's once-a-second work.
func (s *Supervisor) flushTick() {
	s.cfg.Failpoints.BlockWhileWedged()
	now := s.clock.Now()
	s.flushBeats()
	ev := machine.TimerFired{Timer: machine.TimerFlush, MaxRSS: s.cfg.MaxRSS}
	ev.Written, ev.RetryingUntil = s.outputSigns(now)
	if p := s.run.proc; s.cfg.MaxRSS > 0 && p != nil && s.m.Stop == nil && s.m.Abort == nil {
		ev.RSS = child.TreeRSS(p.PID())
	}
	s.step(ev)
	if p := s.run.proc; p != nil {
		p.WatchInner() // a wrapper's inner process: its death by a signal is the run's (child.Exit.InnerSignal)
	}
	s.evictSettled()
	s.maybePrune(now)
	if _, err := os.Lstat(StatePath(s.cfg.StateDir)); errors.Is(err, fs.ErrNotExist) {
		// Removed under supervise (the state dir, or the journal in it):
		// what it journals now no start would find. Fail closed.
		s.fatal(fmt.Errorf("the journal %s is gone: %w", StatePath(s.cfg.StateDir), errJournalGone))
	} else if err := s.db.CheckName(); err != nil {
		// Swapped under supervise (cp and mv over it, a symlinked state
		// dir): noticed within a second even while nothing commits. The
		// journal is poisoned, and the last resort ends the run.
		s.fatal(fmt.Errorf("the journal %s: %w", StatePath(s.cfg.StateDir), err))
	}
}

// reaped handles the death of the child: every datagram it sent is applied
// first, then the machine decides.
func (s *Supervisor) reaped() {
	s.cfg.Trace.Mark(trace.DeathSeen)
	p := s.run.proc
	// What the drain and the heartbeats save goes into the death's commit:
	// a batch started now would be one more commit (two fdatasyncs) that
	// the death's would wait for, before the next fork.
	s.cs.held = true
	s.drain()
	s.signalsBefore(p.Exit().Signal)
	s.root.Store(nil)
	for _, k := range []machine.Timer{machine.TimerWatchdog, machine.TimerDeadline, machine.TimerGrace} {
		s.timers.clear(int(k))
	}
	s.endRunCgroup()
	s.stopProxy() // what the proxy saw before the death, in order
	s.flushBeats()
	s.run.proc = nil
	if s.run.resumeFile {
		// Its run is over: the next launch writes a fresh one if a resume
		// is owed, so a large file is never left behind.
		os.Remove(ResumePath(s.cfg.StateDir))
		s.run.resumeFile = false
	}
	exit := p.Exit()
	cli := s.agentCLI()
	said := s.run.tail.said(cli)
	lim := s.lastLimit(exit.Ended)
	if said == "" {
		said = s.run.outTail.said(cli)
	}
	s.run.tail, s.run.outTail = nil, nil
	s.run.written, s.run.grew = 0, time.Time{}
	how := exit.String()
	if exit.InnerSignal != 0 && exit.Signal == 0 && exit.Code != 0 {
		// A wrapper CLI (Gemini's) exited after its inner process was
		// killed: the death is the kill, not the wrapper's own error.
		how += " after its inner process was killed by " + signalName(exit.InnerSignal)
	}
	lost := profile.LostConversation(said)
	if s.run.unsaved != "" {
		lost = true
		if said == "" {
			said = s.run.unsaved
		}
		s.run.unsaved = ""
	}
	s.step(machine.Exited{PID: exit.PID, Code: exit.Code, Signal: int(exit.Signal), InnerSignal: int(exit.InnerSignal),
		Started: exit.Started, Ended: exit.Ended, How: how, OOMKills: s.cg.ooms, Said: said, Random: rand.Float64(), Limit: lim,
		Lost: lost})
	s.cs.held = false
	s.flushAsync() // whatever the death's commit did not take
}

// signalsBefore applies the stop signals that reached supervise before it
// saw the death: a terminal's Ctrl-C reaches the agent and supervise at
// once, and an agent that dies of it was stopped by the user, not crashed,
// whichever of the two supervise hears first. The kernel signals the whole
// foreground group at once, but supervise's copy reaches the loop through
// two goroutines (os/signal's and Watch), and the agent's death can be seen
// first: so when the agent died of a signal a terminal sends (SIGINT,
// SIGQUIT, SIGHUP) while it holds supervise's terminal, and supervise has
// no stop of its own yet, the loop waits up to terminalSignalWait for its
// own copy. Only an agent killed so from outside the terminal pays the wait.
func (s *Supervisor) signalsBefore(died syscall.Signal) {
	var wait <-chan time.Time
	if s.cfg.Foreground && s.m.Stop == nil && (died == syscall.SIGINT || died == syscall.SIGQUIT || died == syscall.SIGHUP) {
		t := time.NewTimer(terminalSignalWait)
		defer t.Stop()
		wait = t.C
	}
	for {
		if wait == nil { // nothing to wait for: what is queued, then return
			select {
			case sig := <-s.ch.sigc:
				s.stopSignal(sig)
				continue
			default:
				return
			}
		}
		select {
		case sig := <-s.ch.sigc:
			s.stopSignal(sig)
			wait = nil // heard: the rest, if any, are already queued
		case <-wait:
			return
		}
	}
}

// stopSignal hands a stop signal that reached supervise to the machine.
func (s *Supervisor) stopSignal(sig os.Signal) {
	s.step(machine.StopRequested{Signal: signalNumber(sig), Name: sig.String()})
}

// terminalSignalWait bounds how long a death by a terminal's signal waits
// for supervise's own copy of it (see signalsBefore): far above the
// microseconds the hand-off takes, even on a loaded machine.
const terminalSignalWait = 500 * time.Millisecond

// signalNumber is sig's number, 0 for a signal that has none.
func signalNumber(sig os.Signal) int {
	if n, ok := sig.(syscall.Signal); ok {
		return int(n)
	}
	return 0
}

// signalName is the SIG name of sig, as logs give it.
func signalName(sig syscall.Signal) string { return signame.Of(sig) }

// streams wires the agent's stdout and stderr for run e: task mode reads
// both through pipes of the run (its tails), which also feed the agent
// log; otherwise a kept stream goes to the log's own pipe (agentlog.go),
// and one that is not is left as it is. It returns the run's write ends,
// for the caller to close once the child has its copies.
func (s *Supervisor) streams(spec *child.Spec, e machine.Launch) (tailW, outW *os.File) {
	s.run.agentLog.setRun(e.Run)
	s.run.frameRun.Store(e.Run)
	if e.Tail {
		errDst, outDst := orStd(s.cfg.Stderr, os.Stderr), orStd(s.cfg.Stdout, os.Stdout)
		if w, t, err := startTail(errDst, s.logged("stderr", errDst), s.framer()); err != nil {
			s.log.Warn("cannot keep the agent's last words: its stderr is passed through as it is", "err", err)
		} else {
			spec.Stderr, tailW, s.run.tail = w, w, t
		}
		if w, t, err := startTail(outDst, s.logged("stdout", outDst), nil); err != nil {
			s.log.Warn("cannot keep the agent's last words: its stdout is passed through as it is", "err", err)
		} else {
			spec.Stdout, outW, s.run.outTail = w, w, t
		}
	} else if l := s.run.agentLog; l != nil {
		if l.pipes[logStdout] != nil {
			spec.Stdout = l.pipes[logStdout]
		}
		if l.pipes[logStderr] != nil {
			spec.Stderr = l.pipes[logStderr]
		}
	}
	return tailW, outW
}
