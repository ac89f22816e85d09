package machine

import (
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// claudeLost is what Claude Code 2.1.197 says to `claude -p -r ID` for a
// conversation whose transcript it never wrote.
const claudeLost = "No conversation found with session ID: s1"

// lostRig runs a task whose first run is killed mid-turn (after a tool
// phase if tool), and whose resume launch the CLI refuses: it exits 1
// before any marker, saying claudeLost. It returns the refusal's effects.
func lostRig(t *testing.T, tool bool) (*rig, []Effect) {
	t.Helper()
	cfg := taskConfig()
	cfg.Guard.Trip = 0 // the guard is TestRuleGuard's
	r := newRig(t, cfg)
	r.launch()
	r.begin("s1", "")
	if tool {
		r.marker(marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "Bash"})
		r.marker(marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseModel})
	}
	if n := nextOf(t, r.killed(sigKILL)); !n.relaunch {
		t.Fatalf("the kill was not followed by the resume launch: %+v", n)
	}
	l := r.launch()
	if len(l.IDs) != 1 || l.IDs[0] != "s1" {
		t.Fatalf("the relaunch did not resume s1: %+v", l)
	}
	r.advance(300 * 1e6)
	fx := r.step(Exited{PID: 1000 + int(r.run), Code: 1, Started: r.m.Run.Started, Ended: r.now, Said: claudeLost, Lost: true})
	return r, fx
}

// Nothing ran in the interrupted turn: the task starts again once as a
// new session, which takes the lost session's crash count; it completes
// and the task ends 0, saying nothing about hooks.
func TestRuleLostConversationRerun(t *testing.T) {
	r, fx := lostRig(t, false)
	if s := r.sess("s1"); s.State != record.Closed || !strings.Contains(s.Reason, claudeLost) {
		t.Fatalf("lost session: state %s reason %q; want closed with the CLI's words", s.State, s.Reason)
	}
	if !savedBeforeCommit(fx, "s1") {
		t.Error("the lost session's close is not journaled before the relaunch")
	}
	if n := nextOf(t, fx); !n.relaunch {
		t.Fatalf("after the lost conversation: %+v, want the task started again", n)
	}
	if !logged(fx, "starting the task again once, as a new session") {
		t.Error("the rerun is not logged with its reason")
	}
	l := r.launch()
	if len(l.IDs) != 0 || l.Argv[0] != "agent" || len(l.Argv) != 1 {
		t.Fatalf("the rerun launched %v (resumes %v), want the task argv", l.Argv, l.IDs)
	}
	r.begin("s2", "")
	if got := r.sess("s2").CrashCount; got != 1 {
		t.Errorf("the rerun's session has crash count %d, want the lost one's 1 (it counts like a resume)", got)
	}
	r.end("s2", "", marker.OutcomeCompleted)
	fx = r.die(0, 0, 0)
	if n := nextOf(t, fx); !n.end || n.code != ExitOK {
		t.Fatalf("the completed rerun ended %+v, want exit 0", n)
	}
	if strings.Contains(reported(r.fx), "hooks are not wired") {
		t.Errorf("the report blames the hooks:\n%s", reported(r.fx))
	}
}

// The rerun counts toward the breaker: killed mid-turn, its session is
// parked at once (crash count 2 with --resume-limit 1).
func TestRuleLostConversationRerunCounts(t *testing.T) {
	r, _ := lostRig(t, false)
	r.launch()
	r.begin("s2", "")
	fx := r.killed(sigKILL)
	if s := r.sess("s2"); s.State != record.Parked || s.CrashCount != 2 {
		t.Fatalf("rerun killed mid-turn: state %s crash_count %d, want parked at 2", s.State, s.CrashCount)
	}
	if n := nextOf(t, fx); !n.end || n.code != ExitParked {
		t.Fatalf("ended %+v, want exit %d", n, ExitParked)
	}
}

// A tool had run: parked, with the CLI's own words and both ways on,
// never "hooks not wired".
func TestRuleLostConversationAfterTool(t *testing.T) {
	r, fx := lostRig(t, true)
	s := r.sess("s1")
	if s.State != record.Parked || !strings.Contains(s.Reason, claudeLost) || !strings.Contains(s.Reason, "a tool had run") {
		t.Fatalf("state %s reason %q; want parked naming the CLI's words and the tool", s.State, s.Reason)
	}
	if s.CrashCount != 1 {
		t.Errorf("crash count %d: the refused resume is not a crash of the turn, want 1", s.CrashCount)
	}
	if n := nextOf(t, fx); !n.end || n.code != ExitParked {
		t.Fatalf("ended %+v, want exit %d", n, ExitParked)
	}
	rep := reported(fx)
	for _, want := range []string{claudeLost, "--rerun-task", "supervise resume"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	if strings.Contains(rep, "hooks are not wired") {
		t.Errorf("report blames the hooks:\n%s", rep)
	}
}

// Once per invocation: a second lost conversation parks.
func TestRuleLostConversationOnce(t *testing.T) {
	r, _ := lostRig(t, false)
	r.launch()
	r.begin("s2", "")
	r.advance(1e9)
	r.m.Sessions["s2"].CrashCount = 0 // as if its limit allowed one more resume
	if n := nextOf(t, r.killed(sigKILL)); !n.relaunch {
		t.Fatalf("kill of the rerun: %+v, want its resume", n)
	}
	r.launch()
	fx := r.step(Exited{PID: 1000 + int(r.run), Code: 1, Started: r.m.Run.Started, Ended: r.now, Said: "No conversation found with session ID: s2", Lost: true})
	if s := r.sess("s2"); s.State != record.Parked || !strings.Contains(s.Reason, "already started again once") {
		t.Fatalf("second lost conversation: state %s reason %q, want parked", s.State, s.Reason)
	}
	if n := nextOf(t, fx); !n.end || n.code != ExitParked {
		t.Fatalf("ended %+v, want exit %d", n, ExitParked)
	}
}

// Not a lost conversation: a resume launch that sent a marker, or whose
// words say something else, is decided as any death.
func TestRuleLostConversationOnlyWhenSaid(t *testing.T) {
	r := newRig(t, taskConfig())
	r.launch()
	r.begin("s1", "")
	r.killed(sigKILL)
	r.launch()
	fx := r.step(Exited{PID: 1000 + int(r.run), Code: 1, Started: r.m.Run.Started, Ended: r.now, Said: "API Error: 500 overloaded"})
	s := r.sess("s1")
	if s.State != record.Parked || s.CrashCount != 2 {
		t.Fatalf("state %s crash %d, want parked by the breaker", s.State, s.CrashCount)
	}
	if !strings.Contains(s.Reason, `saying "API Error: 500 overloaded"`) || !strings.Contains(s.Reason, "its own error") {
		t.Errorf("park reason %q does not name the cause and the agent's words", s.Reason)
	}
	if strings.Contains(s.Reason, "may be what kills") {
		t.Errorf("park reason %q blames the turn for an API error", s.Reason)
	}
	_ = fx
}

// Codex numbers a resumed turn's continuation afresh: the resumed marker
// carries its own id, and the turn-end that names it ends the interrupted
// turn without an out-of-sequence warning.
func TestRuleResumedTurnAlias(t *testing.T) {
	r := newRig(t, taskConfig())
	r.launch()
	r.begin("s1", "t-old")
	r.killed(sigKILL)
	r.launch()
	fx := r.marker(marker.Message{Session: "s1", Event: marker.EventResumed, Turn: "t-new"})
	fx = append(fx, r.end("s1", "t-new", marker.OutcomeCompleted)...)
	if logged(fx, "out of sequence") {
		t.Error("a normal Codex resume logged an out-of-sequence marker")
	}
	s := r.sess("s1")
	if s.Turn != "t-old" || s.State != record.Idle || s.Outcome != "completed" || s.TurnAlias != "" {
		t.Fatalf("after the resumed turn ended: turn %q state %s outcome %q alias %q", s.Turn, s.State, s.Outcome, s.TurnAlias)
	}
	// A turn-end naming a third turn is still out of sequence.
	r.begin("s1", "t3")
	if fx := r.end("s1", "t4", marker.OutcomeCompleted); !logged(fx, "out of sequence") {
		t.Error("a turn-end naming another turn was not recorded")
	}
}

// The rerun's crash count never lowers a count the new turn's session
// already has (found by the simulation, seed 1796173685536674076 at step
// 943 511: a closed session with crash count 2 took the lost one's 1, and
// was then resumed a third consecutive time past --resume-limit 2).
func TestRuleLostConversationRerunNeverLowers(t *testing.T) {
	r, _ := lostRig(t, false)
	r.launch()
	r.m.Sessions["s9"] = &record.Session{ID: "s9", State: record.Closed, CrashCount: 3, Turn: "t1"}
	r.begin("s9", "")
	if got := r.sess("s9").CrashCount; got != 3 {
		t.Errorf("the rerun's session has crash count %d, want its own 3 (higher than the lost one's 1)", got)
	}
}

// Gemini CLI 0.61 in a project with earlier sessions answers a resume of a
// conversation it does not have with exit 42 ("Invalid session
// identifier"): in task mode the task starts again once, as a new session,
// as for any lost conversation (issue 44, item 6; the runner reads the
// words with agentsaid.LostConversation).
func TestRuleLostConversationGeminiExit42(t *testing.T) {
	cfg := taskConfig()
	cfg.Argv = []string{"gemini", "-p", "do it"}
	r := newRig(t, cfg)
	r.launch()
	r.begin("proxy-1a2b3c4d", "")
	r.killed(sigKILL)
	r.launch()
	said := `Error resuming session: Invalid session identifier "proxy-1a2b3c4d".`
	fx := r.step(Exited{PID: 1000 + int(r.run), Code: 42, Started: r.m.Run.Started, Ended: r.now, Said: said, Lost: true})
	if s := r.sess("proxy-1a2b3c4d"); s.State != record.Closed || !strings.Contains(s.Reason, "Invalid session identifier") || !strings.Contains(s.Reason, "exit status 42") {
		t.Fatalf("lost session: %s %q, want closed with Gemini's words", s.State, s.Reason)
	}
	if n := nextOf(t, fx); !n.relaunch {
		t.Fatalf("next %+v, want the task started again", n)
	}
	if l := r.launch(); len(l.IDs) != 0 || l.Argv[0] != "gemini" || l.Argv[1] != "-p" {
		t.Fatalf("launch %v (resumes %v), want the task argv", l.Argv, l.IDs)
	}
}

// interactiveLost runs an interactive CLI killed in the first turn of a
// new conversation, before it saved it; the resume is answered "No
// conversation found" (exit 1, before any marker). It returns the
// answer's effects.
func interactiveLost(t *testing.T, r *rig, id string) []Effect {
	t.Helper()
	r.begin(id, "")
	if n := nextOf(t, r.killed(sigKILL)); !n.relaunch {
		t.Fatalf("the kill was not followed by the resume launch: %+v", n)
	}
	if l := r.launch(); len(l.IDs) != 1 || l.IDs[0] != id || l.Argv[1] != "-r" {
		t.Fatalf("the relaunch did not resume %s: %+v", id, l)
	}
	r.advance(300 * time.Millisecond)
	return r.step(Exited{PID: 1000 + int(r.run), Code: 1, Started: r.m.Run.Started, Ended: r.now,
		Said: "No conversation found with session ID: " + id, Lost: true})
}

// Interactive, a conversation lost before the CLI saved it (issue 44, item
// 5): the session is not parked and supervise does not end: the CLI is
// started again as a new conversation (the plain argv, no resume), the
// session is closed with a reason that says its conversation was lost
// before the CLI saved it, a Notice tells it with no resume command, and
// no report or notice ever offers `claude -r` or `supervise resume` for it.
func TestRuleInteractiveLostStartsAnew(t *testing.T) {
	r := newRig(t, interactiveConfig())
	r.launch()
	fx := interactiveLost(t, r, "s1")
	s := r.sess("s1")
	if s.State != record.Closed || s.Resume != nil || !strings.Contains(s.Reason, "lost before the CLI saved it") {
		t.Fatalf("lost session: %s %q (resume %v), want closed, saying it was lost before the CLI saved it", s.State, s.Reason, s.Resume)
	}
	if !KnownLost(*s) {
		t.Fatal("KnownLost does not know the lost session")
	}
	if !savedBeforeCommit(fx, "s1") {
		t.Error("the close is not journaled before the relaunch")
	}
	n := nextOf(t, fx)
	if !n.relaunch {
		t.Fatalf("next %+v, want the CLI started again (not the end, not a park)", n)
	}
	var told bool
	for _, nt := range all[Notice](fx) {
		if nt.Session == "s1" && nt.Event == NoticeLost && strings.Contains(nt.Reason, "lost before the CLI saved it") {
			told = true
		}
	}
	if !told || !logged(fx, "lost before the CLI saved it") {
		t.Errorf("the loss is not told plainly (Notice %v, log): %#v", told, fx)
	}
	l := r.launch()
	if len(l.IDs) != 0 || len(l.Argv) != 1 || l.Argv[0] != "claude" {
		t.Fatalf("relaunched %v (resumes %v), want the plain argv, a new conversation", l.Argv, l.IDs)
	}
	// The person goes on in the new conversation and ends it with /exit.
	r.begin("s2", "")
	r.end("s2", "", marker.OutcomeCompleted)
	fx = r.die(0, 0, 0)
	if n := nextOf(t, fx); !n.end || n.code != ExitOK {
		t.Fatalf("/exit ended %+v, want 0", n)
	}
	for _, nt := range all[Notice](r.fx) {
		if nt.Session == "s1" && (strings.Contains(nt.Command, "resume") || nt.Event == NoticeParked) {
			t.Errorf("a notice offers a resume of the lost session: %+v", nt)
		}
	}
	if rep := reported(r.fx); strings.Contains(rep, "s1") {
		t.Errorf("a report names the lost session:\n%s", rep)
	}
}

// The bound: a new conversation takes the lost one's crash count, so a
// turn that keeps killing the CLI before it saves reaches the breaker
// (parked as any turn that keeps dying), and never loops; a lost
// conversation itself is never parked, however many there are.
func TestRuleInteractiveLostBounded(t *testing.T) {
	cfg := interactiveConfig()
	cfg.Guard.Trip = 0
	cfg.Resume.Limit = 2
	r := newRig(t, cfg)
	r.launch()
	interactiveLost(t, r, "s1") // s1 killed once: crash count 1
	r.launch()
	interactiveLost(t, r, "s2") // s2 takes 1, killed: 2
	if s := r.sess("s2"); s.State != record.Closed || s.CrashCount != 2 {
		t.Fatalf("second lost conversation: %s crash %d, want closed (never parked) at 2", s.State, s.CrashCount)
	}
	r.launch()
	r.begin("s3", "")
	fx := r.killed(sigKILL) // s3 takes 2, killed: 3 > --resume-limit 2
	if s := r.sess("s3"); s.State != record.Parked || s.ParkedBy != record.ParkedByBreaker {
		t.Fatalf("third kill: %s by %q, want parked by the breaker", s.State, s.ParkedBy)
	}
	if n := nextOf(t, fx); !n.end || n.code != ExitParked {
		t.Fatalf("ended %+v, want %d", n, ExitParked)
	}
}
