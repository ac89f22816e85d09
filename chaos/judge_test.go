package chaos

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/supervisor"
)

// How a kill is judged, fed supervise's events directly: the harness sees
// the same start, markers and death events as from a real supervise, in an
// order chosen here, and kills a real process standing in for the agent.

type judge struct {
	t   *testing.T
	h   *harness
	out *bytes.Buffer
	run uint64
	tag string
}

func newJudge(t *testing.T, at Point, kills int) *judge {
	out := &bytes.Buffer{}
	rep := &Report{At: at, Planned: kills, Kills: []Kill{}, Failures: []string{}, FailedChecks: []string{}}
	h := &harness{cfg: Config{Kills: kills, At: at}, out: out, limit: 1, rep: rep,
		rng: rand.New(rand.NewPCG(1, 2)), sessions: map[string]*sessState{}, runs: map[uint64]*runState{}}
	h.plan = plan(kills, 1)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("harness output:\n%s", out)
		}
	})
	return &judge{t: t, h: h, out: out, tag: fmt.Sprintf("SUPERVISE_TREE=judge%d.", rand.Uint64())}
}

// start starts a stand-in agent (sleep) as the next run and tells the
// harness; the returned wait reports whether it was killed by SIGKILL.
func (j *judge) start(delivered ...string) (killed func() bool) {
	j.t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		j.t.Fatal(err)
	}
	j.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	st, err := child.StartTime(context.Background(), cmd.Process.Pid)
	if err != nil {
		j.t.Fatal(err)
	}
	j.run++
	j.h.handle(context.Background(), supervisor.Event{Kind: supervisor.EventStart, Run: j.run, PID: cmd.Process.Pid,
		StartTime: st, Tag: j.tag + fmt.Sprint(j.run), Delivered: delivered})
	return func() bool {
		err := cmd.Wait()
		ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
		return err != nil && ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
	}
}

func (j *judge) markers(ms ...supervisor.Marker) {
	for i := range ms {
		ms[i].Run, ms[i].Session = j.run, "node"
	}
	j.h.handle(context.Background(), supervisor.Event{Kind: supervisor.EventMarkers, Run: j.run, Markers: ms})
}

func (j *judge) death(decisions ...supervisor.SessionStatus) {
	j.h.handle(context.Background(), supervisor.Event{Kind: supervisor.EventDeath, Run: j.run, Dirty: true,
		Signal: 9, Reason: "signal", Decisions: decisions})
}

func begin(turn string) supervisor.Marker { return supervisor.Marker{Event: "turn-begin", Turn: turn} }
func end(turn string) supervisor.Marker {
	return supervisor.Marker{Event: "turn-end", Turn: turn, Outcome: "completed"}
}
func phase(p, tool string) supervisor.Marker {
	return supervisor.Marker{Event: "phase", Phase: p, Tool: tool}
}

// toolTurn plays a turn up to its tool's end, the kill point.
func (j *judge) toolTurn(turn string) {
	j.markers(begin(turn))
	j.markers(phase("tool", "append"))
	j.markers(phase("model", ""))
}

func (j *judge) clean() {
	j.t.Helper()
	if len(j.h.rep.Failures) > 0 {
		j.t.Fatalf("failures: %s", strings.Join(j.h.rep.Failures, "; "))
	}
}

// The turn-end the agent sent before the kill landed is journaled at the
// death (supervise drains the socket first) and supervise decides nothing:
// a miss, not a kill, and the next run's fresh turn is not a resumed turn
// beginning early.
func TestJudgeTurnEndDrainedAtDeathIsAMiss(t *testing.T) {
	j := newJudge(t, ToolEnd, 3)
	killed := j.start()
	j.markers(begin("t1"), phase("tool", "append"), phase("model", ""), end("t1")) // one batch: no kill point left open
	j.toolTurn("t2")
	if !killed() {
		t.Fatal("the agent was not killed at t2's tool end")
	}
	j.markers(end("t2")) // drained at the death
	j.death()
	j.clean()
	if len(j.h.rep.Kills) != 0 || j.h.rep.Misses != 1 || j.h.open != nil || j.h.inflight != nil {
		t.Fatalf("kills %+v, misses %d, open %v: want one miss and nothing owed", j.h.rep.Kills, j.h.rep.Misses, j.h.open)
	}
	j.start()
	j.markers(begin("t3"), phase("tool", "append"))
	j.clean()
	j.markers(phase("model", "")) // the kill is made again here
	if len(j.h.rep.Kills) != 1 || j.h.rep.Kills[0].Turn != "t3" {
		t.Fatalf("kills %+v: the missed kill was not made again at t3's tool end", j.h.rep.Kills)
	}
}

// The killed run's turn-end heard after its death was recorded (a
// `supervise notify` of the killed tree still in flight): supervise ended
// the turn it had decided to resume, so the resume is no longer owed. A
// miss, not "the next run began turn t3 before the resumed turn t2 ended".
func TestJudgeLateTurnEndOfKilledRunIsAMiss(t *testing.T) {
	j := newJudge(t, ToolEnd, 3)
	killed := j.start()
	j.toolTurn("t1")
	if !killed() {
		t.Fatal("the agent was not killed")
	}
	j.death(supervisor.SessionStatus{ID: "node", State: "resume_pending", Turn: "t1", CrashCount: 1})
	j.markers(end("t1")) // late: after the death, still run 1's
	j.clean()
	if len(j.h.rep.Kills) != 0 || j.h.rep.Misses != 1 || j.h.open != nil {
		t.Fatalf("kills %+v, misses %d, open %v: want one miss and nothing owed", j.h.rep.Kills, j.h.rep.Misses, j.h.open)
	}
	j.start() // supervise hands no resume: the turn ended
	j.markers(begin("t2"), phase("tool", "append"))
	j.clean()
}

// A kill that landed (its turn's end came in no batch before the death)
// is judged as before: the decision, the resume, the completed turn.
func TestJudgeLandedKill(t *testing.T) {
	j := newJudge(t, ToolEnd, 1)
	killed := j.start()
	j.toolTurn("t1")
	if !killed() {
		t.Fatal("the agent was not killed")
	}
	j.death(supervisor.SessionStatus{ID: "node", State: "resume_pending", Turn: "t1", CrashCount: 1})
	j.start("node")
	j.markers(supervisor.Marker{Event: "resumed", Turn: "t1"}, end("t1"))
	j.clean()
	if k := j.h.rep.Kills; len(k) != 1 || !k[0].Resumed || !k[0].Completed || k[0].Decision != "resume_pending" || !j.h.done {
		t.Fatalf("kills %+v, done %v", k, j.h.done)
	}
}

// B9: a run that reports resumed for the interrupted turn and then begins
// it again (a turn-begin with its id, or with the id the resumed marker
// renumbered it to) fails turn-once, though supervise ignores that
// turn-begin as repeated for the open turn; once, however often it is
// repeated. Resumed, then the turn going on and ending, or a new turn with
// a fresh id, passes.
func TestJudgeTurnBegunAgainAfterResumed(t *testing.T) {
	ignored := func(turn string) supervisor.Marker {
		m := begin(turn)
		m.Ignored = true
		return m
	}
	for _, c := range []struct {
		name    string
		resumed string // the turn id the resumed marker names
		after   [][]supervisor.Marker
		fail    bool
	}{
		{"same id", "t1", [][]supervisor.Marker{{ignored("t1")}, {phase("model", "")}, {end("t1")}}, true},
		{"same id, one batch, twice", "t1", [][]supervisor.Marker{{ignored("t1"), ignored("t1"), end("t1")}}, true},
		{"renumbered id", "c1", [][]supervisor.Marker{{ignored("c1")}, {end("c1")}}, true},
		{"interrupted id under a renumbered resume", "c1", [][]supervisor.Marker{{ignored("t1")}, {end("c1")}}, true},
		{"honest", "t1", [][]supervisor.Marker{{phase("model", "")}, {end("t1")}, {begin("t2")}, {end("t2")}}, false},
		{"honest, renumbered", "c1", [][]supervisor.Marker{{end("c1")}, {begin("t2")}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := newJudge(t, TurnBegin, 1)
			killed := j.start()
			j.markers(begin("t1"))
			if !killed() {
				t.Fatal("the agent was not killed at t1's turn-begin")
			}
			j.death(supervisor.SessionStatus{ID: "node", State: "resume_pending", Turn: "t1", CrashCount: 1})
			j.start("node")
			j.markers(supervisor.Marker{Event: "resumed", Turn: c.resumed})
			for _, b := range c.after {
				j.markers(b...)
			}
			k := j.h.rep.Kills
			if len(k) != 1 || !k[0].Resumed || !k[0].Completed {
				t.Fatalf("kills %+v: want one kill, resumed and completed", k)
			}
			if !c.fail {
				j.clean()
				return
			}
			f := strings.Join(j.h.rep.Failures, "; ")
			if !j.h.rep.Failed(CheckTurnOnce) || len(j.h.rep.Failures) != 1 || !slices.Equal(k[0].Failed, []string{CheckTurnOnce}) ||
				!strings.Contains(f, "run 2 reported resumed and then began turn") || !strings.Contains(f, "again") {
				t.Fatalf("want turn-once once, against kill 1; failures: %s; kill %+v", f, k[0])
			}
		})
	}
}

// A miss of a repeat kill (aimed at the resumed turn, which ended first)
// leaves that resumed turn completed, and nothing owed.
func TestJudgeMissedRepeatKill(t *testing.T) {
	j := newJudge(t, ToolEnd, 3) // plan: fresh, fresh, repeat
	for i, turn := range []string{"t1", "t2"} {
		var killed func() bool
		if i == 0 {
			killed = j.start()
		} else {
			killed = j.start("node")
			j.markers(supervisor.Marker{Event: "resumed", Turn: "t1"}, end("t1"))
		}
		j.toolTurn(turn)
		if !killed() {
			t.Fatalf("kill %d did not land", i+1)
		}
		j.death(supervisor.SessionStatus{ID: "node", State: "resume_pending", Turn: turn, CrashCount: 1})
	}
	killed := j.start("node")
	j.markers(supervisor.Marker{Event: "resumed", Turn: "t2"})
	j.markers(phase("tool", "append"))
	j.markers(phase("model", "")) // the repeat kill
	if !killed() {
		t.Fatal("the repeat kill did not land")
	}
	j.markers(end("t2"))
	j.death()
	j.clean()
	k := j.h.rep.Kills
	if len(k) != 2 || !k[1].Completed || k[1].KilledAgain || j.h.open != nil || j.h.rep.Misses != 1 {
		t.Fatalf("kills %+v, open %v, misses %d: want kill 2's resumed turn completed and one miss", k, j.h.open, j.h.rep.Misses)
	}
}

// Misses are made again at the next kill point however many there are,
// and neither fail nor end the run: a timeout then says why the kills
// missed. (Random kills are not said to miss for want of a barrier.)
func TestJudgeMissesRetriedUntilTimeout(t *testing.T) {
	j := newJudge(t, ToolEnd, 3)
	for i := range 2 * maxMissed {
		killed := j.start()
		turn := fmt.Sprintf("t%d", i+1)
		j.toolTurn(turn)
		if !killed() {
			t.Fatalf("kill %d was not made again", i+1)
		}
		j.markers(end(turn))
		j.death()
	}
	j.clean()
	if j.h.done || j.h.rep.Misses != 2*maxMissed || len(j.h.rep.Kills) != 0 {
		t.Fatalf("done %v, misses %d, kills %+v", j.h.done, j.h.rep.Misses, j.h.rep.Kills)
	}
	if !strings.Contains(j.out.String(), "10 kills in a row at tool-end append landed after the agent had sent the turn's end") {
		t.Errorf("the log does not say why the kills miss:\n%s", j.out)
	}
	j.h.timedOut()
	if f := strings.Join(j.h.rep.Failures, "; "); !j.h.rep.Failed(CheckTimeout) ||
		!strings.Contains(f, "the last 20 kill(s), at tool-end append, all landed after the agent had sent the turn's end") ||
		!strings.Contains(f, "a barrier after it") {
		t.Errorf("timeout failure: %s", f)
	}
}

// supervise's drop lines are counted from its log, text or JSON, however
// the writes split them; other lines are not.
func TestDropWatch(t *testing.T) {
	var sink bytes.Buffer
	d := &dropWatch{w: &sink}
	log := `time=2026-12-01T23:53:10.180Z level=WARN msg="notify datagram dropped" component=notify reason=sender dropped=3 pid=26812
time=2026-12-01T23:53:10.180Z level=WARN msg="notify datagram dropped" component=notify reason=malformed dropped=7 pid=1
{"time":"x","level":"WARN","msg":"notify datagram dropped","component":"notify","reason":"sender","dropped":2,"pid":9}
chaos: kill 1: SIGKILL to run 1 (pid 5) at tool-end, session s turn "t" reason=sender dropped=100
`
	for i := 0; i < len(log); i += 7 {
		if _, err := d.Write([]byte(log[i:min(i+7, len(log))])); err != nil {
			t.Fatal(err)
		}
	}
	if n := d.count(); n != 5 || sink.String() != log {
		t.Errorf("counted %d, want 5 (3 + 2); passed through %d of %d bytes", n, sink.Len(), len(log))
	}
}
