package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/notify"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// treeRoot is the child whose tree may talk to the notify socket.
type treeRoot struct {
	pid int
	run uint64
	tag string // SUPERVISE_TREE=... entry of this run
	// ready, when set, marks a tree being started: its pid is not known
	// yet; it is closed once the started root replaces this one.
	ready chan struct{}
	// heard counts datagrams accepted from this tree (Serve goroutine).
	heard atomic.Uint64
}

// intake is the notify Serve goroutine's side of the supervisor. Heartbeats
// are recorded here and never wait for the loop, so a loop busy with a slow
// fsync cannot stall intake or cause a false hang verdict; everything else
// is handed to the loop in arrival order.
type intake struct {
	base     time.Time    // monotonic origin
	lastPing atomic.Int64 // ns since base of the last WATCHDOG=1
	pings    atomic.Uint64

	mu    sync.Mutex
	beats map[string]time.Time // session heartbeats not yet taken by the loop

	// Serve-goroutine-only state of the sender check.
	members map[int32]member
	// accepted is the run whose tree the datagram being handled was
	// accepted for (0: supervise itself); set by accept, read by handle.
	accepted uint64
	// fence starts the STATUS= of supervise's own fence datagrams: the
	// prefix and a random nonce, so that where datagrams carry no sender
	// pid (the portable backend) an agent cannot send one by accident.
	fence string
}

// inMsg is a datagram handed to the loop, with the run whose tree sent it.
type inMsg struct {
	marker.Message
	run   uint64 // 0: from supervise itself
	fence bool   // supervise's own fence datagram
}

type member struct {
	child.Member
	run uint64
	ok  bool
}

func newIntake(base time.Time) *intake {
	in := &intake{base: base, beats: map[string]time.Time{}, members: map[int32]member{}}
	nonce := make([]byte, 6)
	rand.Read(nonce)
	in.fence = fencePrefix + hex.EncodeToString(nonce) + "-"
	return in
}

// ping records a WATCHDOG=1 at now.
func (in *intake) ping(now time.Time) {
	in.lastPing.Store(int64(now.Sub(in.base)))
	in.pings.Add(1)
}

// sincePing is the monotonic time since the last WATCHDOG=1.
func (in *intake) sincePing(now time.Time) time.Duration {
	return now.Sub(in.base) - time.Duration(in.lastPing.Load())
}

// lastPingTime is the wall-clock time of the last WATCHDOG=1, for records.
func (in *intake) lastPingTime() time.Time {
	return in.base.Add(time.Duration(in.lastPing.Load())).Round(0)
}

func (in *intake) beat(session string, now time.Time) {
	in.mu.Lock()
	if len(in.beats) < machine.MaxSessions {
		in.beats[session] = now
	}
	in.mu.Unlock()
}

// take returns and forgets the session heartbeats seen since the last take.
func (in *intake) take() map[string]time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.beats) == 0 {
		return nil
	}
	b := in.beats
	in.beats = map[string]time.Time{}
	return b
}

// accept is the notify sender check, called on the Serve goroutine for
// every datagram: only the current child's tree may talk, verified by pid
// plus start time; supervise itself may send fences. Where datagrams carry
// no sender pid (pid 0, the portable backend), the socket's 0700 directory
// already limited senders to this uid: a datagram is taken as the live
// tree's while there is one, and dropped between runs.
func (s *Supervisor) accept(pid int32) bool {
	s.in.accepted = 0
	if int(pid) == s.id.self {
		return true
	}
	r := s.root.Load()
	if r != nil && r.ready != nil {
		// The child was forked but its start is not recorded yet: a fast
		// agent's first datagram waits for it, rather than being taken for
		// a stranger's. The wait is on supervise's own fork, never on the
		// agent.
		select {
		case <-r.ready:
		case <-time.After(startWait):
		}
		r = s.root.Load()
		if r != nil && r.ready != nil {
			return false
		}
	}
	if r == nil {
		return false
	}
	s.in.accepted = r.run
	if pid == 0 && !notify.Credentials {
		r.heard.Add(1)
		return true
	}
	if int(pid) == r.pid {
		// Our unreaped child: its pid cannot have been reused.
		r.heard.Add(1)
		return true
	}
	in := s.in
	if m, ok := in.members[pid]; ok && m.run == r.run && m.Still() {
		if m.ok {
			r.heard.Add(1)
		}
		return m.ok
	}
	mem, ok := child.InTree(int(pid), r.pid, r.tag)
	if len(in.members) >= 4096 {
		clear(in.members)
	}
	in.members[pid] = member{Member: mem, run: r.run, ok: ok}
	if ok {
		r.heard.Add(1)
	}
	return ok
}

// startWait bounds how long a datagram from a tree being started waits for
// its start to be recorded (a fork and exec: milliseconds).
const startWait = 5 * time.Second

// handle receives every accepted datagram, on the Serve goroutine.
func (s *Supervisor) handle(m marker.Message) {
	now := s.clock.Now()
	x := inMsg{Message: m, run: s.in.accepted, fence: s.isFence(m)}
	if x.run != 0 && !s.current(x.run) {
		// Accepted for a tree that has died since (the datagram was read
		// just before the death): too late for its run, wrong for the next.
		closeBare(m)
		return
	}
	if !x.fence {
		if m.Watchdog {
			s.in.ping(now)
		}
		if m.IsHeartbeatOnly() {
			if m.Session != "" {
				s.in.beat(m.Session, now)
			}
			return
		}
	}
	select {
	case s.ch.msgc <- x:
	case <-s.ch.done:
		// The loop is gone and will commit nothing more.
		closeBare(m)
	}
}

// current reports whether run's tree is the live one.
func (s *Supervisor) current(run uint64) bool {
	r := s.root.Load()
	return r != nil && r.run == run
}

// closeBare closes a barrier's fd without the acknowledgement byte, which
// the agent reads as unconfirmed, never as an ack.
func closeBare(m marker.Message) {
	if m.Fd != nil {
		notify.Release(m.Fd)
	}
}

// fencePrefix marks the STATUS= of a fence datagram supervise sends itself.
const fencePrefix = "supervise-fence-"

// isFence reports whether m is supervise's own fence: sent from its own
// pid, or, where datagrams carry no pid, carrying this instance's nonce.
func (s *Supervisor) isFence(m marker.Message) bool {
	if m.PID != 0 {
		return int(m.PID) == s.id.self
	}
	return !notify.Credentials && strings.HasPrefix(m.Status, s.in.fence)
}

// drain makes sure every datagram that reached the notify socket before now
// has been applied: it sends a fence datagram to its own socket and applies
// messages until the fence comes back (datagrams are delivered in order).
// Called when a child dies, before the sender check forgets its tree, so a
// marker sent just before a kill -9 is never lost.
func (s *Supervisor) drain() {
	if r := s.root.Load(); r != nil && r.heard.Load() == 0 && len(s.ch.msgc) == 0 && !s.notify.Pending() {
		// The tree never said a word and nothing is queued: there is
		// nothing to drain (the one datagram that could be between recvmsg
		// and the sender check would be unacknowledged anyway).
		return
	}
	s.run.fenceSeq++
	want := s.in.fence + strconv.FormatUint(s.run.fenceSeq, 10)
	c := &notify.Client{Socket: s.notify.Path(), Timeout: time.Second}
	// Send from a goroutine while reading: under a flood the socket queue
	// may be full, and it only empties as this loop takes messages.
	sent := make(chan error, 1)
	go func() {
		sent <- c.Notify(context.Background(), "STATUS="+want)
		c.Close()
	}()
	deadline := time.NewTimer(2 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case err := <-sent:
			if err != nil {
				s.log.Warn("notify: fence not sent; applying what is queued", "err", err)
				s.applyQueued()
				return
			}
			sent = nil
		case m := <-s.ch.msgc:
			if m.fence {
				if m.Status == want {
					return
				}
				continue // a late fence from an earlier drain
			}
			s.take(m)
		case <-deadline.C:
			s.log.Warn("notify: fence did not come back in time; some late messages may be dropped")
			return
		}
	}
}

// applyQueued applies the messages already handed to the loop.
func (s *Supervisor) applyQueued() {
	for {
		select {
		case m := <-s.ch.msgc:
			if !m.fence {
				s.take(m)
			}
		default:
			return
		}
	}
}
