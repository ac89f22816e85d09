package machine

import (
	"fmt"
	"hash"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// The seeded simulation of the machine (FoundationDB's deterministic
// simulation, TigerBeetle's VOPR): a generator drives Step with long random
// event sequences, as the runner would send them (a launch is followed at
// once by its delivery and its start, a DeliverLive by its delivery, a
// stamp request by the fingerprint), and with what the agent may send at
// any time: markers of every kind for open, parked, unknown and closed
// sessions, model traffic with usage and limits (hostile counts
// included), heartbeats, exits of every reason, stop signals, timers,
// manual resumes, fingerprint changes, evictions and restarts of
// supervise itself (with the run it left behind and damaged records).
// After every step it checks what must always hold (simChecker). Runs of
// SUPERVISE_SIM_STEPS steps (default 1 000 000; -short or -race: 100 000) from
// the seed SUPERVISE_SIM_SEED (default: the clock's); a failure prints
// the seed and the step, and becomes a fixed case of TestSimulationSeeds.

func simSteps(t *testing.T) int {
	if v := os.Getenv("SUPERVISE_SIM_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("SUPERVISE_SIM_STEPS=%q: %v", v, err)
		}
		return n
	}
	if testing.Short() || raceEnabled {
		return 100_000
	}
	return 1_000_000
}

func TestSimulation(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SUPERVISE_SIM_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SUPERVISE_SIM_SEED=%q: %v", v, err)
		}
		seed = s
	}
	n := simSteps(t)
	// The simulation allocates little that lives: the collector may wait
	// longer between cycles (a few MiB more held, half the time).
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	sim := newSim(t, seed, false)
	sim.run(n)
	t.Logf("simulated %d steps (seed %d, %d universes, %d boots, %d launches, %d deaths, %d markers refused for a park, %d parks lifted by hand, %d offline)",
		sim.steps, seed, sim.universes, sim.boots, sim.launches, sim.deaths, sim.refusedParked, sim.lifts, sim.offlineLifts)
}

// The same seed gives the same effects: two machines driven by the same
// seed emit the same effects in the same order, step by step (Go's map
// order differs from run to run, so an effect emitted in map order shows).
func TestSimulationDeterministic(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	n := 50_000
	if testing.Short() {
		n = 10_000
	}
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	a, b := newSim(t, seed, true), newSim(t, seed, true)
	a.run(n)
	b.run(n)
	if a.sum.Sum64() != b.sum.Sum64() || a.steps != b.steps {
		t.Fatalf("seed %d: two runs of the same seed differ (%d steps, %x; %d steps, %x)", seed, a.steps,
			a.sum.Sum64(), b.steps, b.sum.Sum64())
	}
	t.Logf("simulated %d steps twice (seed %d): the same effects", a.steps, seed)
}

// Seeds that once found a bug, replayed as fixed cases.
func TestSimulationSeeds(t *testing.T) {
	for _, seed := range simSeeds {
		sim := newSim(t, seed, false)
		sim.run(20_000)
	}
}

// simSeeds are seeds whose runs found bugs, replayed with the generator
// as it is now (each bug is also a table case of its own):
//
//	1                    a manual resume after a folded delivery took the delivery back
//	                     (TestRuleFoldThenManualResume); a --resume-exec template's park
//	                     not committed before the next launch (TestRuleTemplateParkCommitted)
//	1796168966995440223  usage past --max-tokens of a session the breaker had parked: its
//	                     model calls were still forwarded (TestRuleBudgetPastWhileParked)
//	1796168986931166357  the fold bug again, in task mode
var simSeeds = []uint64{1, 1796168966995440223, 1796168986931166357, 2, 3}

// sim is one simulated world: a machine, the runner's part the machine
// relies on (the journal's commits, the child's life), and the checker.
type sim struct {
	t    *testing.T
	seed uint64
	rng  *rand.Rand
	m    *Machine
	now  time.Time
	cfg  Config

	phase    simPhase
	pid      int
	stamp    []string // a StampFingerprint asked for these
	fp       string   // the agent's fingerprint now
	journal  map[string]record.Session
	pending  map[string]bool // saved, not yet committed
	policy   Budget          // the budget as committed
	guard    crashloop.GuardState
	backoff  crashloop.State
	reserved uint64 // the run number reserved before its fork, not yet launched; 0: none

	guardBefore  crashloop.GuardState // the guard before the step
	restartAsked bool                 // a restart was taken in the current run, no stop after it
	lastRun      uint64
	verifying    bool

	// what the checker remembers
	autoResumes  map[string]int
	died         bool     // an Exited was stepped whose death commit is not yet seen
	deliveredIDs []string // the sessions the run being forked was handed

	recent  [12]Event  // the last events, for a failure's report
	snaps   [2]simSnap // reused: a step and the one it performs at once
	depth   int
	hashing bool
	sum     hash.Hash64

	steps, universes, boots, launches, deaths, refusedParked, lifts, offlineLifts int
	sinceUniverse                                                                 int
}

type simPhase int

const (
	simWaitLaunch simPhase = iota // booted, or backing off: LaunchDue next
	simWaitVerify                 // AwaitVerify: Verified next
	simRunning
	simOver // End or Fatal: supervise is gone
)

func newSim(t *testing.T, seed uint64, hashing bool) *sim {
	s := &sim{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), hashing: hashing,
		sum: fnv.New64a(), now: t0}
	s.universe()
	return s
}

// universe starts a fresh state dir with a random configuration.
func (s *sim) universe() {
	s.universes++
	s.sinceUniverse = 0
	r := s.rng
	policy := crashloop.DefaultPolicy()
	policy.Restart = []crashloop.Restart{crashloop.OnFailure, crashloop.Always, crashloop.Never}[r.IntN(3)]
	if r.IntN(4) == 0 {
		policy.GiveUp = 1 + r.IntN(5)
	}
	cfg := Config{Policy: policy, Guard: crashloop.DefaultGuard(), Resume: resume.Policy{Limit: r.IntN(4)},
		StopSignal: sigTERM, StopSignalName: "SIGTERM", StopTimeout: 10 * time.Second,
		Argv: []string{"agent"}, StateDir: "/state", ResumeOff: r.IntN(10) == 0,
		Fingerprint: r.IntN(2) == 0, LiveResume: r.IntN(3) == 0, Foreground: r.IntN(3) == 0}
	if r.IntN(2) == 0 {
		cfg.Resume.MaxAge = time.Hour
	}
	if r.IntN(3) == 0 {
		cfg.MaxTokens = 1000
	}
	if r.IntN(3) == 0 {
		cfg.MaxTokensTotal = 5000
	}
	if r.IntN(4) == 0 {
		cfg.MaxOpenSessions = 3
	}
	if r.IntN(3) == 0 {
		cfg.Watchdog = 5 * time.Second
	}
	if r.IntN(3) == 0 {
		cfg.Deadlines = Deadlines{Turn: 30 * time.Second, Model: 10 * time.Second, Tool: 20 * time.Second}
	}
	if r.IntN(3) == 0 {
		cfg.StartTimeout = time.Duration(1+r.IntN(30)) * time.Second
	}
	if r.IntN(3) == 0 {
		cfg.SilenceTimeout = time.Duration(1+r.IntN(30)) * time.Second
	}
	if r.IntN(3) == 0 {
		cfg.Limit = LimitConfig{Resumes: 1 + r.IntN(3), Off: r.IntN(4) == 0, Max: time.Duration(r.IntN(2)) * 5 * time.Minute}
	}
	if r.IntN(5) < 2 {
		cfg.Task = TaskConfig{On: true, ID: "task1", Exec: []string{"agent", "-r", "{session}", "{message}"},
			Rerun: r.IntN(4) == 0, Interactive: r.IntN(3) == 0}
	}
	s.cfg = cfg
	s.journal, s.pending, s.policy = map[string]record.Session{}, map[string]bool{}, Budget{}
	s.guard, s.backoff, s.reserved = crashloop.GuardState{}, crashloop.State{}, 0
	s.lastRun, s.fp = 0, "fp0"
	s.boot(nil)
}

// boot starts a supervise on the state dir as the journal holds it;
// orphan is the run a killed one left behind.
func (s *sim) boot(orphan *record.Run) {
	s.boots++
	s.m = New(s.cfg)
	s.autoResumes = map[string]int{}
	s.stamp, s.died, s.restartAsked = nil, false, false
	var open []record.Session
	for _, id := range sortedKeys(s.journal) {
		if sess := s.journal[id]; sess.State.Open() {
			open = append(open, cloneSession(sess))
		}
	}
	if s.rng.IntN(20) == 0 {
		// A record that failed its check is loaded parked, as damaged.
		open = append(open, record.Session{ID: "dmg" + strconv.Itoa(s.rng.IntN(3)), State: record.Parked,
			ParkedBy: "damaged", Reason: "the journal record is damaged", Turn: "t1"})
	}
	s.verifying = s.rng.IntN(5) == 0
	s.phase = simWaitLaunch
	next := s.lastRun + 1
	if s.reserved != 0 {
		next = s.reserved // as the runner reads a reservation (readBoot)
	}
	s.step(Booted{NextRun: next, Sessions: open, Orphan: orphan, Budget: s.policy, Verifying: s.verifying,
		Guard: s.guard, Backoff: s.backoff})
}

func (s *sim) run(n int) {
	for s.steps < n {
		s.sinceUniverse++
		switch {
		case s.phase == simOver && s.sinceUniverse > 5000:
			s.universe()
		case s.phase == simOver:
			if s.rng.IntN(2) == 0 {
				s.offlineResume()
			}
			s.boot(nil)
		default:
			s.next()
		}
	}
}

// pool of session ids: known ones, fresh ones, and one a template refuses.
var simIDs = []string{"s0", "s1", "s2", "s3", "s4", "u0", "u1", "-x", "dmg0", "proxy-a"}

func (s *sim) id() string {
	if s.rng.IntN(4) == 0 {
		return simIDs[5+s.rng.IntN(len(simIDs)-5)]
	}
	return simIDs[s.rng.IntN(5)]
}

func (s *sim) turn() string { return []string{"", "t1", "t2", "t3"}[s.rng.IntN(4)] }

// advance moves the clock: mostly by little, at times by hours.
func (s *sim) advance() {
	switch r := s.rng.IntN(100); {
	case r < 60:
		s.now = s.now.Add(time.Duration(s.rng.IntN(300)) * time.Millisecond)
	case r < 97:
		s.now = s.now.Add(time.Duration(s.rng.IntN(15000)) * time.Millisecond)
	default:
		s.now = s.now.Add(time.Duration(s.rng.IntN(7200)) * time.Second)
	}
}

// next picks one event for the phase the world is in and steps it.
func (s *sim) next() {
	s.advance()
	r := s.rng.IntN(1000)
	switch s.phase {
	case simWaitVerify:
		if r < 30 {
			s.step(Verified{Err: "bad page"})
			return
		}
		s.verifying = false
		s.step(Verified{})
		if s.phase == simWaitVerify {
			s.phase = simWaitLaunch
		}
		return
	case simWaitLaunch:
		switch {
		case r < 700:
			var fp *record.Fingerprint
			if s.m.NeedFingerprint() || s.rng.IntN(3) == 0 {
				if s.rng.IntN(4) == 0 {
					s.fp = "fp" + strconv.Itoa(s.rng.IntN(3))
				}
				fp = &record.Fingerprint{Sum: s.fp}
			}
			s.step(LaunchDue{Fingerprint: fp})
		case r < 780:
			s.manual()
		case r < 820:
			s.step(StopRequested{Signal: []int{0, sigTERM, sigINT, 1}[s.rng.IntN(4)], Name: "sig"})
		case r < 826:
			s.step(RestartRequested{})
		case r < 860 && s.verifying:
			s.verifying = false
			s.step(Verified{})
		case r < 900:
			// The flush, with the output the run wrote so far and, now and
			// then, the CLI's word that it waits out a limit itself.
			ev := TimerFired{Timer: TimerFlush, Written: int64(s.rng.IntN(3))}
			if s.rng.IntN(8) == 0 {
				ev.RetryingUntil = s.now.Add(time.Duration(s.rng.IntN(120)) * time.Second)
			}
			s.step(ev)
		case r < 930:
			s.evict()
		case r < 945:
			s.crash()
		default:
			s.step(TimerFired{Timer: TimerBackoff})
		}
		return
	}
	switch {
	case r < 380:
		s.marker()
	case r < 560:
		s.traffic()
	case r < 600:
		beats := map[string]time.Time{}
		for range 1 + s.rng.IntN(3) {
			beats[s.id()] = s.now
		}
		s.step(Beats{Sessions: beats, Stored: s.stored(sortedKeys(beats)...), Ping: s.now})
	case r < 700:
		ev := TimerFired{Timer: Timer(1 + s.rng.IntN(4)), SincePing: time.Duration(s.rng.IntN(10)) * time.Second,
			Queued: s.rng.IntN(4) == 0, IgnoresSIGINT: s.rng.IntN(2) == 0, RSS: uint64(s.rng.IntN(3)) << 30, MaxRSS: 1 << 30}
		if ev.Timer == TimerFlush {
			// The output the run wrote so far and, now and then, the
			// CLI's words that it waits out a limit itself, for any delay.
			ev.Written = int64(s.rng.IntN(3))
			if s.rng.IntN(6) == 0 {
				ev.RetryingUntil = s.reset()
			}
		}
		s.step(ev)
	case r < 780:
		s.exit()
	case r < 800:
		s.restartAsked = false // a stop asked during a restart wins
		s.step(StopRequested{Signal: []int{0, sigTERM, sigINT, 1}[s.rng.IntN(4)], Name: "sig"})
	case r < 815:
		// supervise restart: taken only when no stop nor abort is under way.
		s.restartAsked = s.restartAsked || (s.m.Stop == nil && s.m.Abort == nil)
		s.step(RestartRequested{})
	case r < 850:
		s.manual()
	case r < 880 && len(s.stamp) > 0:
		ids := s.stamp
		s.stamp = nil
		s.step(Fingerprinted{IDs: ids, Fingerprint: &record.Fingerprint{Sum: s.fp}})
	case r < 900:
		s.evict()
	case r < 905:
		s.crash()
	default:
		s.marker()
	}
}

// evict drops settled sessions, some of them busy (in a commit under
// way): by a salt drawn now, not by draws in the machine's visiting order.
func (s *sim) evict() {
	salt := s.rng.IntN(4)
	s.step(Evict{Keep: s.rng.IntN(4), Busy: func(id string) bool { return (int(id[len(id)-1])+salt)%4 == 0 }})
}

// stored returns the journal's records of the ids the machine does not hold.
func (s *sim) stored(ids ...string) map[string]record.Session {
	out := map[string]record.Session{}
	for _, id := range ids {
		if sess, ok := s.journal[id]; ok && !s.m.Held(id) {
			out[id] = cloneSession(sess)
		}
	}
	return out
}

func (s *sim) storedOne(id string) *record.Session {
	if sess, ok := s.stored(id)[id]; ok {
		return &sess
	}
	return nil
}

func (s *sim) manual() {
	id := s.id()
	s.step(ManualResume{ID: id, Stored: s.storedOne(id)})
}

// offlineResume is `supervise resume` while no supervise runs: a person
// resumes one parked, stopped or owed session in the journal itself (as
// supervisor.ManualResume does offline), lifting a budget's park.
func (s *sim) offlineResume() {
	var ids []string
	for _, id := range sortedKeys(s.journal) {
		if st := s.journal[id].State; st == record.Parked || st == record.Stopped || st == record.ResumePending {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return
	}
	id := ids[s.rng.IntN(len(ids))]
	before := s.journal[id]
	after, err := resume.Manual(cloneSession(before), s.now, "")
	if err != nil {
		s.t.Fatalf("seed %d: offline resume of %s (%s): %v", s.seed, id, before.State, err)
	}
	if LiftsBudget(before) {
		s.policy = s.policy.Lift()
	}
	s.journal[id] = after
	s.offlineLifts++
}

// crash kills supervise itself, at any step, the journal as committed:
// the next one finds the run it left, or, between runs, the run it had
// reserved and never launched (a run that never started a child), as the
// runner hands them over (boot, readBoot).
func (s *sim) crash() {
	var orphan *record.Run
	switch {
	case s.m.Running():
		r := s.m.Run
		r.Ended, r.Reason, r.Dirty, r.ExitCode = s.now, record.ReasonSupervisorDied, true, -1
		orphan = &r
		s.lastRun = max(s.lastRun, r.Run)
	case s.reserved != 0:
		orphan = &record.Run{Run: s.reserved, Started: s.now, Ended: s.now, ExitCode: -1,
			Reason: record.ReasonSupervisorDied, Dirty: true}
	}
	clear(s.pending) // what was not committed is lost with it
	s.boot(orphan)
}

// simCrash, among the events that follow a Launch, kills supervise after
// the delivery's commit and before the fork's.
type simCrash struct{}

func (simCrash) event() {}

// simResets are the resets the agent's words may name, from the death:
// past, none, near, far, and absurd (the 3e7 s and 9e9 s of a lying
// retry record).
var simResets = []time.Duration{-time.Minute, 0, 30 * time.Second, 10 * time.Minute, 5 * time.Hour, 30 * 24 * time.Hour,
	30_000_000 * time.Second, 9_000_000_000 * time.Second}

func (s *sim) reset() time.Time {
	d := simResets[s.rng.IntN(len(simResets))]
	if d == 0 {
		return time.Time{}
	}
	return s.now.Add(d)
}

func (s *sim) exit() {
	e := Exited{PID: s.pid, Started: s.m.Run.Started, Ended: s.now, Random: s.rng.Float64()}
	defer func() {
		// The agent's words at any death: a limit with any reset, a lost
		// conversation, noise. They are the agent's: they may delay, and
		// never lift or skip a park.
		switch s.rng.IntN(12) {
		case 0:
			e.Limit = &Limit{Line: "You've hit your limit", Reset: s.reset(), Usage: s.rng.IntN(2) == 0}
		case 1:
			e.Lost = true
		case 2:
			e.Said = "\x1b[31mlevel=INFO msg=\"session resumed by hand\""
		}
		s.step(e)
	}()
	switch s.rng.IntN(7) {
	case 0:
		e.Code = 0
	case 1:
		e.Code = 1 + s.rng.IntN(3)
		if s.rng.IntN(3) == 0 {
			e.InnerSignal = 9 // a wrapper's exit after its inner process was killed
		}
	case 2:
		e.Signal = []int{9, 15, 11, 6, 2, 1}[s.rng.IntN(6)]
		e.Code = 128 + e.Signal
	case 3:
		// A lost conversation: Claude Code's words (exit 1), Gemini CLI's
		// in a project with earlier sessions (exit 42).
		e.Code, e.Said, e.Lost = 1, "No conversation found with session ID: x", true
		if s.rng.IntN(3) == 0 {
			e.Code, e.Said = 42, `Error resuming session: Invalid session identifier "x".`
		}
	case 4:
		e.Signal, e.Code, e.OOMKills = 9, 137, 1
	case 5:
		// A usage or rate limit, in the agent's words, with a reset or none.
		e.Code, e.Said = 1, "API Error: Request rejected (429)"
		e.Limit = &Limit{Line: e.Said}
		if s.rng.IntN(2) == 0 {
			e.Limit.Reset = s.now.Add(time.Duration(s.rng.IntN(600)) * time.Second)
		}
	default:
		e.Code = 1
		e.Said = "Error: something"
	}
}

func (s *sim) marker() {
	r := s.rng
	msg := marker.Message{PID: int32(100 + r.IntN(3)), Session: s.id(), Turn: s.turn()}
	switch r.IntN(12) {
	case 0, 1:
		msg.Event, msg.Prompt = marker.EventTurnBegin, "do it"
	case 2:
		msg.Event, msg.Outcome = marker.EventTurnEnd, []marker.Outcome{marker.OutcomeCompleted, marker.OutcomeFailed, marker.OutcomeCancelled}[r.IntN(3)]
	case 3:
		msg.Event, msg.Wait = marker.EventWaiting, []marker.Wait{marker.WaitInput, marker.WaitApproval, marker.WaitReconnect}[r.IntN(3)]
	case 4, 5:
		msg.Event, msg.Phase, msg.Tool = marker.EventPhase, []marker.Phase{marker.PhaseModel, marker.PhaseTool, marker.PhaseIdle}[r.IntN(3)], "Bash"
	case 6:
		msg.Event = marker.EventResumed
	case 7:
		msg.Event = marker.EventClosed
	case 8:
		msg.Event, msg.Effect = marker.EventEffect, "k"+strconv.Itoa(r.IntN(3))
	case 9:
		msg.Event = marker.EventHeartbeat
	case 10:
		msg = marker.Message{PID: msg.PID, Barrier: r.IntN(2) == 0, Ready: r.IntN(2) == 0, WatchdogTrigger: r.IntN(8) == 0,
			WatchdogUSec: uint64(r.IntN(2)) * 3_000_000, ExtendTimeoutUSec: uint64(r.IntN(2)) * 5_000_000}
	default:
		msg.ExtendTimeoutUSec = 2_000_000
	}
	s.step(Marker{Msg: msg, Stored: s.storedOne(msg.Session)})
}

// traffic is what the proxy forwards: never a model call the machine
// refuses (the proxy answers those itself), except usage of answers
// already under way.
func (s *sim) traffic() {
	r := s.rng
	e := Traffic{Session: s.id(), Turn: "p" + strconv.Itoa(r.IntN(3)), Tool: "Bash", Outcome: marker.OutcomeCompleted,
		Invented: r.IntN(6) == 0}
	switch r.IntN(8) {
	case 0:
		e.Kind = TrafficTurnBegin
	case 1:
		e.Kind = TrafficTool
	case 2:
		e.Kind = TrafficModel
	case 3:
		e.Kind = TrafficTurnEnd
	case 4:
		e.Kind, e.RetryAt = TrafficLimited, s.now.Add(time.Duration(r.IntN(120))*time.Second)
		if r.IntN(8) == 0 {
			e.RetryAt = s.reset() // a provider's retry-after of any size, the proxy's cap trusted to no one
		}
	case 5:
		e.Kind = TrafficStall
	default:
		e.Kind = TrafficUsage
		switch r.IntN(10) {
		case 0:
			e.Input = 1 << 62
		case 1:
			e.Input, e.Output = math.MaxInt64, 1
		case 2:
			e.Input = -1 - r.Int64N(1<<62)
		default:
			e.Input, e.Output = r.Int64N(400), r.Int64N(200)
		}
	}
	if e.Invented && s.m.Hooked() != "" {
		// The machine takes it for the hooked session: the proxy's refusal does too.
		if _, refused := s.m.Refusal(s.m.Hooked()); refused && e.Kind != TrafficUsage {
			return
		}
	}
	if _, refused := s.m.Refusal(e.Session); refused && e.Kind != TrafficUsage {
		return // the proxy answered it itself
	}
	e.Stored = s.storedOne(e.Session)
	s.step(e)
}

// step applies one event, performs its effects as the runner would, and
// checks the invariants.
func (s *sim) step(ev Event) {
	s.steps++
	if s.t.Failed() {
		return
	}
	s.recent[s.steps%len(s.recent)] = ev
	before := s.snapshot()
	s.guardBefore = s.m.Guard
	fx := s.m.Step(ev, s.now)
	s.check(ev, before, fx)
	s.depth--
	s.perform(ev, fx)
}

// perform does what the runner does with fx: commits, launches (with the
// delivery and the fork that follow at once), the live deliveries.
func (s *sim) perform(ev Event, fx []Effect) {
	if s.hashing {
		for _, e := range fx {
			hashEffect(s.sum, e)
		}
	}
	var then []Event
	for _, e := range fx {
		switch e := e.(type) {
		case Save:
			for _, id := range e.IDs {
				s.pending[id] = true
			}
			if e.Policy {
				s.policy = s.m.Budget
				s.guard = s.m.Guard
			}
		case Commit:
			s.flush()
			switch {
			case e.Kind == CommitDeath:
				s.died = false
				s.lastRun = max(s.lastRun, e.Run.Run, e.Reserve)
				s.guard, s.backoff = s.m.Guard, s.m.Backoff
			case e.Kind == CommitBoot && e.Orphan != nil:
				s.guard = s.m.Guard
			case e.Kind == CommitLaunch && e.Run.Run == s.reserved:
				s.reserved = 0 // recorded as launched
			}
			if e.Reserve != 0 {
				s.reserved = e.Reserve
			}
			if e.Reserve > s.lastRun {
				s.lastRun = e.Reserve - 1
			}
		case Launch:
			if s.died {
				s.fail(ev, "Launch of run %d before the Commit of the death that decided it", e.Run)
			}
			s.launches++
			then = append(then, s.forkEvents(e)...)
		case Backoff:
			s.phase = simWaitLaunch
		case AwaitVerify:
			s.phase = simWaitVerify
		case StampFingerprint:
			s.stamp = append(s.stamp, e.IDs...)
		case DeliverLive:
			then = append(then, Delivered{Run: s.m.Run.Run, IDs: e.Fresh, Via: "resume file", Live: true})
		case End, Fatal:
			s.flush()
			s.phase = simOver
			return
		}
	}
	if s.rng.IntN(2) == 0 {
		s.flush() // the group commit
	}
	for _, e := range then {
		if s.phase == simOver {
			return
		}
		if _, ok := e.(simCrash); ok {
			s.crash()
			return
		}
		s.step(e)
		if st, ok := e.(Started); ok {
			s.checkStarted(st)
			s.restartAsked = false
		}
	}
}

// forkEvents are what the runner steps at once after a Launch: the
// delivery (or its failure), then the fork, or an exec failure.
func (s *sim) forkEvents(l Launch) []Event {
	var evs []Event
	if len(l.IDs) > 0 {
		if s.rng.IntN(30) == 0 {
			evs = append(evs, Delivered{Run: l.Run, Unsent: true})
			l.IDs = nil
		} else {
			evs = append(evs, Delivered{Run: l.Run, IDs: l.IDs, Via: l.Via})
		}
	}
	if s.rng.IntN(60) == 0 {
		return append(evs, simCrash{}) // supervise dies before the fork's commit
	}
	s.lastRun = max(s.lastRun, l.Run)
	if s.rng.IntN(40) == 0 {
		return append(evs, Exited{ExecFailed: true, ExecErr: "exec: not found", Code: 127, Started: s.now, Ended: s.now, Argv: l.Argv})
	}
	s.pid = 1000 + int(l.Run)
	s.phase = simRunning
	s.deliveredIDs = l.IDs
	return append(evs, Started{Run: l.Run, PID: s.pid, At: s.now, Argv: l.Argv})
}

func (s *sim) flush() {
	for id := range s.pending {
		if sess, ok := s.m.Sessions[id]; ok {
			s.journal[id] = cloneSession(*sess)
		}
	}
	clear(s.pending)
}

func cloneSession(sess record.Session) record.Session {
	sess.Effects = slices.Clone(sess.Effects)
	if sess.Tokens != nil {
		t := *sess.Tokens
		sess.Tokens = &t
	}
	if sess.Resume != nil {
		r := *sess.Resume
		sess.Resume = &r
	}
	if sess.Fingerprint != nil {
		f := *sess.Fingerprint
		sess.Fingerprint = &f
	}
	return sess
}

func (s *sim) fail(ev Event, format string, args ...any) {
	s.t.Helper()
	var last string
	for i := range len(s.recent) {
		if r := s.recent[(s.steps+1+i)%len(s.recent)]; r != nil {
			last += "\n\t" + trim(fmt.Sprintf("%T %+v", r, r), 400)
		}
	}
	s.t.Fatalf("simulation seed %d, step %d (universe %d), event %s: %s\nlast events:%s\nreplay: SUPERVISE_SIM_SEED=%d go test -run 'TestSimulation$' ./supervisor/machine",
		s.seed, s.steps, s.universes, trim(fmt.Sprintf("%T %+v", ev, ev), 600), fmt.Sprintf(format, args...), last, s.seed)
}

func trim(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// hashEffect writes e to h, pointers followed (their addresses differ
// from run to run).
func hashEffect(h hash.Hash64, e Effect) {
	switch e := e.(type) {
	case Commit:
		o := e.Orphan
		e.Orphan = nil
		fmt.Fprintf(h, "%T%+v", e, e)
		if o != nil {
			fmt.Fprintf(h, "%+v", *o)
		}
	default:
		fmt.Fprintf(h, "%T%+v", e, e)
	}
}
