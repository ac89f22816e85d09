package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/notify"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// Group commit. The loop marks sessions (and the run's heartbeat) dirty as
// markers arrive; one writer goroutine commits one batch at a time, and
// whatever arrived meanwhile goes into the next batch, so 64 sessions
// marking at once cost a handful of fsyncs, not 64. A barrier's fd rides
// with the batch that holds every marker received before it and is acked
// (notify.Answerer.Ack) only after that batch committed. A failed commit acks
// nothing. A write the kernel refused for want of space (ENOSPC, EDQUOT
// from write) landed nowhere: its changes and fds go back to pending and
// are retried. Any other error from the disk (EIO, EROFS, a failed fsync)
// fails closed: after a failed fsync the kernel may have dropped the dirty
// pages and a later fsync can succeed without them, so no later commit
// could be trusted; nothing more is committed, every barrier is
// answered '0', and supervise stops the agent and exits 1 (see failClosed).

// batch is one commit: copies of the records to write and the barriers it
// acknowledges.
type batch struct {
	sessions []record.Session
	run      *record.Run
	policy   *policy
	fds      []answer
	markers  []Marker // for the observer, told once the batch commits
}

// answer is a barrier waiting for its batch: acked ('1') once the batch
// commits, or nacked ('0') then if a datagram its sender sent since its
// previous barrier was refused.
type answer struct {
	fd      *os.File
	refused bool
}

// send answers the barrier through ans.
func (a answer) send(ans *notify.Answerer) error {
	if a.refused {
		return ans.Nack(a.fd)
	}
	return ans.Ack(a.fd)
}

// sent counts and logs, rate-limited, a barrier whose fd got no byte
// because writing it would have blocked, or the fd was not a pipe or a
// socket: the agent reads "unconfirmed", and supervise did not wait.
func (s *Supervisor) sent(err error) {
	if errors.Is(err, notify.ErrBarrierWouldBlock) || errors.Is(err, notify.ErrBarrierNotPipe) {
		s.cs.acksUnsent++
		s.cs.ackLogs.warn(s.log, s.clock.Now(), "barrier not answered: its fd would block or is not a pipe or socket; the agent reads it as unconfirmed", "err", err)
	}
}

// Keys of the policy state in the journal (journal.Tx.State).
const (
	policyBackoff = "backoff" // crashloop.State
	policyGuard   = "guard"   // crashloop.GuardState
	policyBudget  = "budget"  // machine.Budget: the state dir's token spend
)

// policy is the backoff and guard state, committed when it changes.
type policy struct {
	backoff crashloop.State
	guard   crashloop.GuardState
	budget  machine.Budget
}

// writer is the goroutine that commits batches.
type writer struct {
	db  *journal.DB
	in  chan *batch
	out chan error
}

func startWriter(db *journal.DB, delay time.Duration) *writer {
	w := &writer{db: db, in: make(chan *batch), out: make(chan error, 1)}
	go func() {
		for b := range w.in {
			time.Sleep(delay) // failpoint: a slow disk (0 in production)
			w.out <- db.Update(func(tx *journal.Tx) error { return b.write(tx) })
		}
		close(w.out)
	}()
	return w
}

func (b *batch) write(tx *journal.Tx) error {
	for _, s := range b.sessions {
		if err := tx.PutSession(s); err != nil {
			return err
		}
	}
	if b.run != nil {
		if err := tx.PutRun(*b.run); err != nil {
			return err
		}
	}
	if b.policy != nil {
		if err := tx.PutState(policyBackoff, b.policy.backoff); err != nil {
			return err
		}
		if err := tx.PutState(policyBudget, b.policy.budget); err != nil {
			return err
		}
		return tx.PutState(policyGuard, b.policy.guard)
	}
	return nil
}

// commitState is the loop's side of group commit.
type commitState struct {
	w        *writer
	dirty    map[string]bool // sessions changed since the last batch
	runDirty bool            // the run record changed (heartbeat)
	fds      []answer        // barriers waiting for the next batch
	markers  []Marker        // markers for the observer, in the next batch
	inflight *batch
	retry    *time.Timer // armed after a failed commit
	backoff  time.Duration
	commits  uint64
	errors   uint64
	// failed is the disk error that made the journal fail closed; once set,
	// nothing more is committed or acknowledged.
	failed error
	// failing is the error of the last commit while commits fail and are
	// retried (a full disk), nil once one succeeds: markers for sessions
	// the journal does not hold yet are refused meanwhile.
	failing error
	// policyDirty: the backoff or guard changed since last committed.
	policyDirty bool
	// held: a death is being handled, and its own commit (synchronous,
	// before the next fork) takes what the last datagrams and heartbeats
	// saved; no batch starts before it, which the death's commit would
	// first have to wait for.
	held bool
	// acksUnsent counts barriers whose fd got no byte (it would have
	// blocked, or was not a pipe or socket); ackLogs rate-limits saying so.
	acksUnsent uint64
	ackLogs    rateLog
	// answers answers the barriers, keeping its pipe from one answer to
	// the next; closed when Run returns.
	answers notify.Answerer
}

// barrier handles a BARRIER=1: its fd is acked once everything received
// before it is durable.
// It is answered '0' instead when the sender had a datagram refused since
// its previous barrier, by the notify server (m.Refused) or by the loop.
func (s *Supervisor) barrier(m marker.Message) {
	cs := &s.cs
	a := answer{fd: m.Fd, refused: m.Refused || s.refused.Take(m.PID)}
	switch {
	case cs.failed != nil:
		s.sent(s.cs.answers.Nack(a.fd)) // '0': the journal takes nothing more
	case a.refused && cs.failing != nil:
		s.sent(a.send(&s.cs.answers)) // '0' now: the refusal is certain, the disk may stay full
	case s.pendingWork():
		cs.fds = append(cs.fds, a)
		s.flushAsync()
	case cs.inflight != nil:
		cs.inflight.fds = append(cs.inflight.fds, a)
	default:
		s.sent(a.send(&s.cs.answers)) // nothing outstanding: everything earlier is durable
	}
}

// takeBatch moves everything pending into a batch.
func (s *Supervisor) takeBatch() *batch {
	cs := &s.cs
	b := &batch{fds: cs.fds, markers: cs.markers}
	cs.markers = nil
	for id := range cs.dirty {
		if sess, ok := s.m.Sessions[id]; ok {
			b.sessions = append(b.sessions, *sess)
		}
	}
	if cs.runDirty && s.m.Run.Run != 0 {
		r := s.m.Run
		b.run = &r
	}
	if cs.policyDirty {
		b.policy = &policy{backoff: s.m.Backoff, guard: s.m.Guard, budget: s.m.Budget}
		cs.policyDirty = false
	}
	clear(cs.dirty)
	cs.runDirty = false
	cs.fds = nil
	return b
}

func (s *Supervisor) pendingWork() bool {
	cs := &s.cs
	return len(cs.dirty) > 0 || cs.runDirty || len(cs.fds) > 0 || cs.policyDirty
}

// flushAsync starts a commit of what is pending, unless one is in flight
// (the next starts when it returns), a retry is scheduled, or a death's
// commit is about to take it (held).
func (s *Supervisor) flushAsync() {
	cs := &s.cs
	if cs.inflight != nil || cs.retry != nil || cs.failed != nil || cs.held || !s.pendingWork() {
		return
	}
	cs.inflight = s.takeBatch()
	cs.w.in <- cs.inflight
}

// committed handles the writer's result for the batch in flight.
func (s *Supervisor) committed(err error) {
	cs := &s.cs
	b := cs.inflight
	cs.inflight = nil
	if err != nil {
		s.requeue(b, err)
		return
	}
	s.acked(b)
	s.flushAsync()
}

func (s *Supervisor) acked(b *batch) {
	s.cs.commits++
	s.cs.backoff = 0
	s.cs.failing = nil
	s.observeBatch(b)
	for _, a := range b.fds {
		s.sent(a.send(&s.cs.answers))
	}
}

// requeue puts a failed batch back and schedules a retry with backoff.
// Nothing in it is acknowledged.
func (s *Supervisor) requeue(b *batch, err error) {
	cs := &s.cs
	cs.errors++
	if errors.Is(err, journal.ErrCorrupt) {
		s.fatal(err)
	}
	if cs.failed != nil || storageFailure(err) {
		s.failClosed(b, err)
		return
	}
	cs.failing = err
	for _, sess := range b.sessions {
		cs.dirty[sess.ID] = true
	}
	if b.run != nil {
		cs.runDirty = true
	}
	if b.policy != nil {
		cs.policyDirty = true
	}
	cs.fds = append(b.fds, cs.fds...)
	cs.markers = append(b.markers, cs.markers...)
	if cs.backoff == 0 {
		cs.backoff = 100 * time.Millisecond
	} else if cs.backoff < 5*time.Second {
		cs.backoff *= 2
	}
	s.log.Error("journal: commit failed; nothing in it is acknowledged, retrying", "err", err,
		"retry_in", cs.backoff, "waiting_barriers", len(cs.fds))
	if cs.retry == nil {
		cs.retry = time.NewTimer(cs.backoff)
	}
}

// storageFailure reports whether a failed commit is an error of the disk
// that a retry cannot be trusted to repair: anything from the operating
// system except a write refused for want of space. bbolt returns write
// errors as *fs.PathError and fsync errors as a bare errno, so an ENOSPC
// from fsync (delayed allocation on ext4, thin provisioning, NFS: the data
// may be lost) fails closed too.
func storageFailure(err error) bool {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return false
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "write" && (errno == syscall.ENOSPC || errno == syscall.EDQUOT) {
		return false
	}
	return true
}

// failClosed handles a disk error that no later commit can be trusted to
// repair: the batch's barriers and every later one are answered '0' (not
// journaled; never acknowledged), nothing more is committed, the next start is made to
// check every page of the journal, and the agent is stopped; supervise
// exits 1 so that its own manager sees the failure.
func (s *Supervisor) failClosed(b *batch, err error) {
	cs := &s.cs
	for _, a := range append(b.fds, cs.fds...) {
		s.sent(s.cs.answers.Nack(a.fd)) // '0': not journaled, and never will be
	}
	cs.fds = nil
	if cs.retry != nil {
		cs.retry.Stop()
		cs.retry = nil
	}
	if cs.failed != nil {
		return
	}
	cs.failed = err
	s.markVerifyFailed("journal write failed: " + err.Error())
	s.log.Error("journal: the disk failed a write or fsync; failing closed: no marker is acknowledged from now on, "+
		"stopping the agent and exiting 1; the next start checks the journal", "err", err)
	if s.fatalErr == nil {
		s.fatalErr = fmt.Errorf("journal write failed, failed closed: %w", err)
	}
	s.Shutdown()
}

// retryC is the retry timer's channel, nil when none is armed.
func (s *Supervisor) retryC() <-chan time.Time {
	if s.cs.retry == nil {
		return nil
	}
	return s.cs.retry.C
}

func (s *Supervisor) retryFired() {
	s.cs.retry = nil
	s.flushAsync()
}

// commitSync waits for the batch in flight, then commits everything pending
// together with fn in one transaction, and returns when it is durable.
func (s *Supervisor) commitSync(fn func(*journal.Tx) error) error {
	return s.commitVia(s.db.Update, fn)
}

// commitVia is commitSync through update: the journal's Update, or its
// UpdateLogged (a death's commit, durable after one sync: journal/redo.go).
func (s *Supervisor) commitVia(update func(func(*journal.Tx) error) error, fn func(*journal.Tx) error) error {
	cs := &s.cs
	for cs.inflight != nil { // committed may start the next batch
		s.committed(<-cs.w.out)
	}
	if cs.retry != nil {
		cs.retry.Stop()
		cs.retry = nil
	}
	if cs.failed != nil {
		for _, a := range cs.fds {
			s.sent(s.cs.answers.Nack(a.fd))
		}
		cs.fds = nil
		return fmt.Errorf("journal failed closed earlier: %w", cs.failed)
	}
	b := s.takeBatch()
	time.Sleep(s.cfg.Failpoints.CommitDelay) // failpoint: a slow disk (0 in production)
	err := update(func(tx *journal.Tx) error {
		if err := b.write(tx); err != nil {
			return err
		}
		if fn != nil {
			return fn(tx)
		}
		return nil
	})
	if err != nil {
		s.requeue(b, err)
		return err
	}
	s.acked(b)
	return nil
}

// stopWriter ends the writer goroutine after the last commit; barriers
// still unacknowledged are closed bare (unconfirmed to the agent).
func (s *Supervisor) stopWriter() {
	cs := &s.cs
	for cs.inflight != nil {
		s.committed(<-cs.w.out)
	}
	close(cs.w.in)
	for range cs.w.out {
	}
	for _, a := range cs.fds {
		notify.Release(a.fd)
	}
	cs.fds = nil
}

// markVerifyFailed leaves the marker that makes the next start check the
// journal (and move it aside if damaged), through statedir: never through
// a link planted in the state dir.
func (s *Supervisor) markVerifyFailed(why string) {
	if err := statedir.WriteFile(s.cfg.StateDir, filepath.Base(VerifyFailedPath(s.cfg.StateDir)), []byte(why+"\n")); err != nil {
		s.log.Error("could not leave the marker that makes the next start check the journal", "err", err)
	}
}
