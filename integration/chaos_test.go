package integration

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
)

// The chaos suite: a seeded random schedule of faults against a real
// supervise and a real agent streaming turn markers, then an offline check
// of the journal against a model of what must hold (reliability.md 5).
//
// SUPERVISE_CHAOS_ITERATIONS sizes the run (default: a short one for go
// test); SUPERVISE_CHAOS_SEED replays a schedule. The seed is printed on
// failure.

// Fault classes the driver injects.
const (
	faultKillChild        = "kill -9 child (random offset)"
	faultKillAtTurnBegin  = "kill -9 child within 1ms of turn-begin"
	faultKillAtDelivery   = "kill -9 child during resume delivery"
	faultTermChild        = "SIGTERM child"
	faultStopChild        = "SIGSTOP child (watchdog)"
	faultKillSupervisor   = "kill -9 supervise (during journal writes)"
	faultStopSupervisor   = "SIGTERM supervise (requested stop) and restart"
	chaosWatchdog         = "600ms"
	chaosStopTimeout      = "300ms"
	defaultChaosIteration = 12
)

var faultWeights = []struct {
	class  string
	weight int
}{
	{faultKillChild, 30}, {faultKillAtTurnBegin, 15}, {faultKillAtDelivery, 12}, {faultTermChild, 8},
	{faultStopChild, 5}, {faultKillSupervisor, 20}, {faultStopSupervisor, 10},
}

func TestChaos(t *testing.T) {
	iterations := defaultChaosIteration
	if v := os.Getenv("SUPERVISE_CHAOS_ITERATIONS"); v != "" {
		iterations, _ = strconv.Atoi(v)
	} else if testing.Short() {
		iterations = 4
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SUPERVISE_CHAOS_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	c := &chaosRun{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 1)), e: newEnv(t), faults: map[string]int{},
		checks: map[string]int{}, snapshots: map[int]map[string]record.Session{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chaos seed %d: replay with SUPERVISE_CHAOS_SEED=%d SUPERVISE_CHAOS_ITERATIONS=%d go test -run TestChaos ./integration/",
				seed, seed, iterations)
		}
	})
	c.run(iterations)
	c.check()
	c.report(iterations)
}

type chaosRun struct {
	t      *testing.T
	seed   uint64
	rng    *rand.Rand
	e      *env
	sv     *proc
	log    *tail
	faults map[string]int
	// fault records which fault ended each run (by run number).
	fault map[int]string
	// journalChecks counts the mid-run durability checks after kill -9 of
	// supervise.
	journalChecks int
	// checks counts each invariant checked, by name.
	checks map[string]int
	// snapshots are the journal's sessions read right after a kill -9 of
	// supervise in a run (before that run's death was decided): ground
	// truth the model prunes its branches with.
	snapshots map[int]map[string]record.Session
	m         *model
}

func (c *chaosRun) start() {
	c.sv = c.e.run("--watchdog", chaosWatchdog, "--stop-timeout", chaosStopTimeout, "--guard-trip", "0",
		"--keep-runs", "100000", "--backoff-initial", "20ms", "--backoff-max", "200ms", "--log-level", "warn")
}

func (c *chaosRun) run(iterations int) {
	c.fault = map[int]string{}
	// A slow disk (every commit waits 3ms) widens the window in which a
	// premature acknowledgement could be caught by a kill -9.
	c.e.set("TESTAGENT_SCRIPT=pinger 100ms; take-resumes; chaos "+strconv.FormatUint(c.seed, 10),
		"SUPERVISE_FAILPOINT_COMMIT_DELAY=3ms")
	c.log = newTail(c.e.logPath)
	c.log.onTimeout = c.diagnose
	c.start()
	run := c.log.waitStart(c.t, 0)
	for i := 0; i < iterations; i++ {
		class := c.pick()
		c.faults[class]++
		switch class {
		case faultKillChild:
			c.log.waitAcked(c.t, run, c.rng.IntN(6))
			time.Sleep(time.Duration(c.rng.IntN(3000)) * time.Microsecond)
			c.killChild(run, syscall.SIGKILL)
		case faultKillAtTurnBegin:
			c.log.waitSend(c.t, run, "turn-begin")
			c.killChild(run, syscall.SIGKILL)
		case faultKillAtDelivery:
			// Kill the next run as soon as it starts, while it takes its
			// resumes (if it has any).
			c.killChild(run, syscall.SIGKILL)
			c.fault[run] = faultKillChild
			run = c.log.waitStart(c.t, run)
			c.faults[faultKillChild]++
			c.killChild(run, syscall.SIGKILL)
		case faultTermChild:
			c.log.waitAcked(c.t, run, c.rng.IntN(6))
			c.killChild(run, syscall.SIGTERM)
		case faultStopChild:
			c.log.waitAcked(c.t, run, c.rng.IntN(6))
			c.killChild(run, syscall.SIGSTOP)
		case faultKillSupervisor:
			c.log.waitAcked(c.t, run, c.rng.IntN(6))
			time.Sleep(time.Duration(c.rng.IntN(2000)) * time.Microsecond)
			c.sv.signal(syscall.SIGKILL)
			c.sv.wait(20 * time.Second)
			c.checkJournalNow(run)
			c.start()
		case faultStopSupervisor:
			c.log.waitAcked(c.t, run, c.rng.IntN(6))
			c.sv.signal(syscall.SIGTERM)
			if code := c.sv.wait(20 * time.Second); code != 0 {
				c.t.Fatalf("seed %d: supervise exit %d after SIGTERM", c.seed, code)
			}
			c.start()
		}
		c.fault[run] = class
		run = c.log.waitStart(c.t, run)
	}
	c.log.waitAcked(c.t, run, 2)
	c.sv.signal(syscall.SIGTERM)
	if code := c.sv.wait(30 * time.Second); code != 0 {
		c.t.Errorf("seed %d: final stop exit %d", c.seed, code)
	}
}

// diagnose records what every process of the test is doing (state, wait
// channel, kernel stack) and makes supervise dump its goroutines (SIGQUIT),
// so that a hang can be told apart: supervise stuck, or the agent.
func (c *chaosRun) diagnose() {
	var b strings.Builder
	for _, pid := range c.e.tagged() {
		read := func(f string) string {
			v, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
			return strings.TrimSpace(strings.ReplaceAll(string(v), "\x00", " "))
		}
		fmt.Fprintf(&b, "pid %d: %s\n  stat: %s\n  wchan: %s\n  stack:\n%s\n", pid, read("cmdline"), read("stat"), read("wchan"), read("stack"))
	}
	c.t.Logf("chaos: processes at the timeout:\n%s", b.String())
	if log, err := os.ReadFile(c.e.logPath); err == nil {
		c.t.Logf("chaos: the agent log's last 2 KiB (%d torn records dropped so far):\n%q", c.log.torn, log[max(0, len(log)-2048):])
	}
	if c.sv != nil && c.sv.running() {
		c.sv.cmd.Process.Signal(syscall.SIGQUIT) // Go dumps every goroutine to stderr
		time.Sleep(500 * time.Millisecond)
	}
}

func (c *chaosRun) pick() string {
	total := 0
	for _, f := range faultWeights {
		if c.excluded(f.class) {
			continue
		}
		total += f.weight
	}
	n := c.rng.IntN(total)
	for _, f := range faultWeights {
		if c.excluded(f.class) {
			continue
		}
		if n < f.weight {
			return f.class
		}
		n -= f.weight
	}
	return faultKillChild
}

// excluded reports a fault class this backend cannot take part in. Under
// the portable backend (macOS's, no parent-death signal) an agent outlives
// a kill -9 of supervise and keeps sending unacknowledged markers until the
// next supervise kills it, which the model (built on the agent dying with
// supervise) cannot replay. TestKill9SupervisorThenRestart covers that
// fault under this backend.
func (c *chaosRun) excluded(class string) bool {
	return portableBackend && class == faultKillSupervisor
}

func (c *chaosRun) killChild(run int, sig syscall.Signal) {
	pid := c.log.pid(run)
	if pid == 0 {
		c.t.Fatalf("seed %d: no pid for run %d", c.seed, run)
	}
	syscall.Kill(pid, sig)
}

// readJournal opens the journal offline (read-only), verifies every page,
// and returns its sessions and runs.
func (c *chaosRun) readJournal() (map[string]record.Session, []record.Run) {
	c.t.Helper()
	db, err := journal.Open(filepath.Join(c.e.stateDir, "journal.db"), journal.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		c.t.Fatalf("seed %d: journal does not open: %v", c.seed, err)
	}
	defer db.Close()
	if err := db.Verify(); err != nil {
		c.t.Fatalf("seed %d: journal fails tx.Check: %v", c.seed, err)
	}
	sessions := map[string]record.Session{}
	var runs []record.Run
	db.View(func(tx *journal.Tx) error {
		forEachSession(tx, func(s record.Session) { sessions[s.ID] = s })
		var err error
		runs, err = tx.LastRuns(1 << 30)
		return err
	})
	sort.Slice(runs, func(i, j int) bool { return runs[i].Run < runs[j].Run })
	return sessions, runs
}

// checkJournalNow runs right after kill -9 of supervise, before the next
// one starts: the journal must hold every marker the agent saw
// acknowledged (the model's state, with the in-flight marker either way).
func (c *chaosRun) checkJournalNow(run int) {
	c.t.Helper()
	sessions, runs := c.readJournal()
	m := c.replay(runs, run)
	c.checks["journal opens and passes tx.Check"]++
	c.checks["acknowledged markers present after kill -9 of supervise"]++
	c.snapshots[run] = sessions
	if !m.matches(sessions) {
		c.t.Fatalf("seed %d: after kill -9 of supervise in run %d the journal matches no model state (an acknowledged marker lost, or a wrong decision):\n%s",
			c.seed, run, m.diff(sessions))
	}
	c.journalChecks++
}

// check is the offline checker after the whole schedule.
func (c *chaosRun) check() {
	t := c.t
	sessions, runs := c.readJournal()
	events := c.log.all()
	// No two children at once, no survivor of a dead tree.
	c.checks["journal opens and passes tx.Check"]++
	for _, ev := range events {
		if ev.kind == "start" {
			c.checks["no two agent trees at once (checked at each start)"]++
		}
		if ev.kind == "overlap" {
			t.Errorf("seed %d: run %d started while processes of another tree lived: %s", c.seed, ev.run, ev.arg)
		}
		if ev.kind == "dup" {
			t.Errorf("seed %d: run %d was handed the same resume twice: %s", c.seed, ev.run, ev.arg)
		}
	}
	c.checks["no process of a dead tree survives (at each start and at the end)"] = c.checks["no two agent trees at once (checked at each start)"] + 1
	if left := c.e.tagged(); len(left) > 0 {
		t.Errorf("seed %d: processes survived the final stop: %v", c.seed, left)
	}
	// No session resumed twice for the same interruption (session plus the
	// run whose death made the resume).
	seen := map[string]int{}
	for _, ev := range events {
		if ev.kind == "took" && ev.arg != "none" {
			f := strings.Fields(ev.arg)
			key := f[0] + " " + f[2]
			c.checks["no session resumed twice for one interruption"]++
			if prev, ok := seen[key]; ok {
				t.Errorf("seed %d: %s taken in run %d and again in run %d", c.seed, key, prev, ev.run)
			}
			seen[key] = ev.run
		}
	}
	// Each run ended the way its fault says.
	for _, r := range runs {
		want, ok := c.fault[int(r.Run)]
		if !ok || r.Reason == record.ReasonStarting {
			continue
		}
		c.checks["each run ended as its fault says"]++
		if got := classify(r); !faultAllows(want, got) {
			t.Errorf("seed %d: run %d (%s) recorded as %s", c.seed, r.Run, want, got)
		}
	}
	// The journal's final sessions are exactly what the model allows.
	m := c.replay(runs, 0)
	c.checks["final sessions match the model (state, crash_count, parked, turn)"] += len(sessions)
	if !m.matches(sessions) {
		t.Errorf("seed %d: final journal does not match the model:\n%s", c.seed, m.diff(sessions))
	}
	c.m = m
}

func classify(r record.Run) string {
	switch {
	case r.Reason == record.ReasonSignal:
		return "signal " + strconv.Itoa(r.Signal)
	}
	return string(r.Reason)
}

func faultAllows(fault, got string) bool {
	switch fault {
	case faultKillChild, faultKillAtTurnBegin, faultKillAtDelivery:
		return got == "signal 9"
	case faultTermChild:
		return got == "signal 15"
	case faultStopChild:
		return got == string(record.ReasonWatchdog)
	case faultKillSupervisor:
		return got == string(record.ReasonSupervisorDied)
	case faultStopSupervisor:
		return got == string(record.ReasonStopped)
	}
	return false
}

func (c *chaosRun) report(iterations int) {
	var classes []string
	for k := range c.faults {
		classes = append(classes, k)
	}
	sort.Strings(classes)
	var b strings.Builder
	fmt.Fprintf(&b, "chaos seed %d, %d iterations: faults injected:", c.seed, iterations)
	for _, k := range classes {
		fmt.Fprintf(&b, " [%s: %d]", k, c.faults[k])
	}
	if c.m != nil {
		fmt.Fprintf(&b, "; runs %d, acked markers %d, resumes taken %d, journal checks after kill -9 %d, model branches at end %d",
			c.m.runs, c.m.acked, c.m.took, c.journalChecks, len(c.m.branches))
	}
	if c.log != nil {
		fmt.Fprintf(&b, ", agent log records torn by a kill %d", c.log.torn)
	}
	var names []string
	for k := range c.checks {
		names = append(names, k)
	}
	sort.Strings(names)
	fmt.Fprintf(&b, "; invariants checked:")
	for _, k := range names {
		fmt.Fprintf(&b, " [%s: %d]", k, c.checks[k])
	}
	if c.t.Failed() {
		fmt.Fprintf(&b, "; VIOLATIONS FOUND")
	} else {
		fmt.Fprintf(&b, "; violations: 0")
	}
	c.t.Log(b.String())
	if out := os.Getenv("SUPERVISE_CHAOS_REPORT"); out != "" {
		os.WriteFile(out, []byte(b.String()+"\n"), 0o644)
	}
}

// The model: an independent statement of the decision table of docs/design.md, applied
// to what the agent logged, with the journal's record of how each run
// ended. A marker sent but not acknowledged when a fault hit may or may not
// have been applied, so the model keeps every possibility (branches) and
// prunes them with what the next run observed (which resumes it got).

type msess struct {
	state      record.SessionState
	count      int
	turn       string
	resumeRun  int // run the pending resume was delivered to
	hasPending bool
	ended      bool // a turn-end set the outcome; a turn-begin clears it
}

type branch map[string]msess

func (b branch) clone() branch {
	n := make(branch, len(b))
	for k, v := range b {
		n[k] = v
	}
	return n
}

func (b branch) key() string {
	ids := make([]string, 0, len(b))
	for id := range b {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var s strings.Builder
	for _, id := range ids {
		v := b[id]
		fmt.Fprintf(&s, "%s=%s/%d/%s/%d/%v;", id, v.state, v.count, v.turn, v.resumeRun, v.ended)
	}
	return s.String()
}

// apply applies one marker line ("turn-begin s1 t3", ...), as the
// supervisor's session handling does.
func (b branch) apply(line string) {
	f := strings.Fields(line)
	if len(f) < 2 {
		return
	}
	ev, id := f[0], f[1]
	turn := ""
	if len(f) > 2 && f[2] != "-" {
		turn = f[2]
	}
	s, ok := b[id]
	if !ok {
		s = msess{state: record.Idle}
	}
	if s.state == record.Parked {
		return // refused: only a person lifts a park (issue 29)
	}
	// A marker that contradicts the session's turn is a no-op
	// (supervisor.outOfSequence).
	if turn != "" && s.turn != "" {
		same, open, ended := turn == s.turn, s.state == record.InTurn || s.state == record.Waiting, s.state == record.Idle && s.ended
		if ev == "turn-begin" && same && (open || ended) || ev == "turn-end" && same && ended {
			b[id] = s
			return
		}
	}
	switch ev {
	case "turn-begin":
		s.state, s.turn, s.hasPending, s.resumeRun, s.ended = record.InTurn, turn, false, 0, false
	case "turn-end":
		s.ended = true
		if turn != "" {
			s.turn = turn
		}
		s.state, s.hasPending, s.resumeRun = record.Idle, false, 0
		if len(f) > 3 && f[3] == "completed" {
			s.count = 0
		}
	case "waiting":
		if turn != "" {
			s.turn = turn
		}
		s.state = record.Waiting
	case "phase":
		if s.state == record.Waiting {
			s.state = record.InTurn
		}
	case "resumed":
		if turn != "" {
			s.turn = turn
		}
		s.state, s.hasPending, s.resumeRun = record.InTurn, false, 0
	case "closed":
		s.state, s.hasPending, s.resumeRun = record.Closed, false, 0
	}
	b[id] = s
}

// launch delivers every pending resume to run n.
func (b branch) launch(n int) (delivered []string) {
	for id, s := range b {
		if s.state == record.ResumePending {
			s.resumeRun = n
			b[id] = s
			delivered = append(delivered, id)
		}
	}
	sort.Strings(delivered)
	return delivered
}

// death applies the table of docs/design.md for the death of run n.
func (b branch) death(n int, requested bool) {
	for id, s := range b {
		midTurn := s.state == record.InTurn || s.state == record.Waiting
		pending := s.state == record.ResumePending
		if requested {
			// A requested stop stops what ran: a turn in progress, or a
			// resume handed to the stopped run; a resume never handed to
			// it stays owed.
			if midTurn || (pending && s.resumeRun == n) {
				s.state, s.hasPending, s.resumeRun = record.Stopped, false, 0
				b[id] = s
			}
			continue
		}
		if (pending && s.resumeRun != n) || (!midTurn && !pending) {
			continue
		}
		s.count++
		switch {
		case s.state == record.Waiting, s.count > 1:
			s.state, s.hasPending, s.resumeRun = record.Parked, false, 0
		default:
			s.state, s.hasPending, s.resumeRun = record.ResumePending, true, 0
		}
		b[id] = s
	}
}

type model struct {
	branches []branch
	runs     int
	acked    int
	took     int
	err      string
}

// replay runs the model over every run the journal knows, up to (and
// without the death of) stopAt when it is not 0.
func (c *chaosRun) replay(runs []record.Run, stopAt int) *model {
	events := c.log.all()
	byRun := map[int][]event{}
	for _, ev := range events {
		byRun[ev.run] = append(byRun[ev.run], ev)
	}
	m := &model{branches: []branch{{}}}
	for _, r := range runs {
		n := int(r.Run)
		if r.Reason == record.ReasonStarting && n != stopAt {
			continue // a reservation never launched
		}
		m.runs++
		evs := byRun[n]
		started := false
		for _, ev := range evs {
			if ev.kind == "start" {
				started = true
			}
		}
		// Launch: pending resumes are delivered (committed before the fork;
		// a run killed before it logged its start may not have got that far).
		var next []branch
		for _, b := range m.branches {
			if !started {
				next = append(next, b.clone())
			}
			nb := b.clone()
			delivered := nb.launch(n)
			if ok := observe(evs, delivered); ok {
				next = append(next, nb)
			}
		}
		m.branches = dedupe(next)
		// The run's markers: acked ones for sure, the last unacked one maybe.
		var pending string
		for _, ev := range evs {
			switch ev.kind {
			case "send":
				if pending != "" {
					m.fork(pending)
				}
				pending = ev.arg
			case "acked":
				m.acked++
				for _, b := range m.branches {
					b.apply(ev.arg)
				}
				pending = ""
			case "barrier-err":
				// resolved below as an unacknowledged marker
			case "took":
				if ev.arg != "none" {
					m.took++
				}
			}
		}
		if pending != "" {
			m.fork(pending)
		}
		if n == stopAt {
			break
		}
		if snap, ok := c.snapshots[n]; ok {
			// The journal was read at this point: only branches that match
			// it exactly can be the truth.
			var keep []branch
			for _, b := range m.branches {
				if branchMatches(b, snap) {
					keep = append(keep, b)
				}
			}
			if len(keep) == 0 {
				m.err = fmt.Sprintf("no model branch matches the journal read after kill -9 of supervise in run %d", n)
				return m
			}
			m.branches = keep
		}
		if r.Ended.IsZero() {
			continue // the final run, stopped below by the requested stop
		}
		requested := r.Reason == record.ReasonStopped && !r.Dirty
		for _, b := range m.branches {
			b.death(n, requested)
		}
		m.branches = dedupe(m.branches)
		if len(m.branches) == 0 {
			m.err = fmt.Sprintf("no model branch explains the resumes observed in run %d", n)
			return m
		}
		if len(m.branches) > 1<<14 {
			m.err = "model ambiguity exploded"
			return m
		}
	}
	return m
}

// fork keeps every branch both with and without line applied.
func (m *model) fork(line string) {
	var next []branch
	for _, b := range m.branches {
		next = append(next, b.clone())
		nb := b.clone()
		nb.apply(line)
		next = append(next, nb)
	}
	m.branches = dedupe(next)
}

// observe checks a run's resume observations against a delivery: every
// session it took was delivered, and once it reported took-done, it took
// exactly the delivered ones.
func observe(evs []event, delivered []string) bool {
	var took []string
	done := false
	for _, ev := range evs {
		switch ev.kind {
		case "took":
			if ev.arg != "none" {
				took = append(took, strings.Fields(ev.arg)[0])
			}
		case "took-done":
			done = true
		}
	}
	sort.Strings(took)
	set := map[string]bool{}
	for _, d := range delivered {
		set[d] = true
	}
	for _, t := range took {
		if !set[t] {
			return false
		}
	}
	return !done || len(took) == len(delivered)
}

func dedupe(bs []branch) []branch {
	seen := map[string]bool{}
	var out []branch
	for _, b := range bs {
		k := b.key()
		if !seen[k] {
			seen[k] = true
			out = append(out, b)
		}
	}
	return out
}

// matches reports whether some branch equals the journal's sessions in
// state, crash count and turn.
func (m *model) matches(sessions map[string]record.Session) bool {
	if m.err != "" {
		return false
	}
	for _, b := range m.branches {
		if branchMatches(b, sessions) {
			return true
		}
	}
	return false
}

func branchMatches(b branch, sessions map[string]record.Session) bool {
	for id, s := range b {
		j, ok := sessions[id]
		if !ok || j.State != s.state || j.CrashCount != s.count || j.Turn != s.turn {
			return false
		}
	}
	for id := range sessions {
		if _, ok := b[id]; !ok {
			return false
		}
	}
	return true
}

func (m *model) diff(sessions map[string]record.Session) string {
	var b strings.Builder
	if m.err != "" {
		fmt.Fprintf(&b, "model: %s\n", m.err)
	}
	fmt.Fprintf(&b, "journal:\n")
	ids := []string{}
	for id := range sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s := sessions[id]
		fmt.Fprintf(&b, "  %s %s count=%d turn=%s\n", id, s.State, s.CrashCount, s.Turn)
	}
	for i, br := range m.branches {
		if i == 4 {
			fmt.Fprintf(&b, "  ... %d more branches\n", len(m.branches)-4)
			break
		}
		fmt.Fprintf(&b, "model branch %d: %s\n", i, br.key())
	}
	return b.String()
}

// tail reads the agent log incrementally.
type tail struct {
	path   string
	off    int64
	events []event
	torn   int // records cut short by a kill during their write, dropped
	// onTimeout runs before a wait gives up, to record what hung.
	onTimeout func()
}

func newTail(path string) *tail { return &tail{path: path} }

func (l *tail) refresh() {
	f, err := os.Open(l.path)
	if err != nil {
		return
	}
	defer f.Close()
	f.Seek(l.off, 0)
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break // a partial last line is read next time
		}
		l.off += int64(len(line))
		if ev, ok := parseEvent(strings.TrimSuffix(line, "\n")); ok {
			l.events = append(l.events, ev)
		} else if line != "\n" {
			l.torn++
		}
	}
}

func (l *tail) all() []event {
	l.refresh()
	return l.events
}

func (l *tail) waitUntil(t *testing.T, what string, cond func([]event) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l.refresh()
		if cond(l.events) {
			return
		}
		if time.Now().After(deadline) {
			if l.onTimeout != nil {
				l.onTimeout()
			}
			t.Fatalf("chaos: timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitStart waits for the first run after prev to log its start.
func (l *tail) waitStart(t *testing.T, prev int) int {
	t.Helper()
	run := 0
	l.waitUntil(t, fmt.Sprintf("a run after %d to start", prev), func(evs []event) bool {
		for _, ev := range evs {
			if ev.kind == "start" && ev.run > prev {
				run = ev.run
				return true
			}
		}
		return false
	})
	return run
}

// waitAcked waits until run has n more acked markers than now.
func (l *tail) waitAcked(t *testing.T, run, n int) {
	t.Helper()
	count := func(evs []event) int {
		c := 0
		for _, ev := range evs {
			if ev.run == run && ev.kind == "acked" {
				c++
			}
		}
		return c
	}
	l.refresh()
	want := count(l.events) + n
	l.waitUntil(t, fmt.Sprintf("%d acked markers in run %d", want, run), func(evs []event) bool { return count(evs) >= want })
}

// waitSend waits for the next "send KIND" of run and returns at once.
func (l *tail) waitSend(t *testing.T, run int, kind string) {
	t.Helper()
	l.refresh()
	from := len(l.events)
	l.waitUntil(t, "a "+kind+" in run "+strconv.Itoa(run), func(evs []event) bool {
		for _, ev := range evs[from:] {
			if ev.run == run && ev.kind == "send" && strings.HasPrefix(ev.arg, kind+" ") {
				return true
			}
		}
		return false
	})
}

func (l *tail) pid(run int) int {
	l.refresh()
	for _, ev := range l.events {
		if ev.run == run && ev.kind == "start" {
			return ev.pid
		}
	}
	return 0
}
