package machine

import (
	"testing"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

func TestInteractiveArgv(t *testing.T) {
	for argv, want := range map[string]bool{
		"claude": true, "codex": true, "gemini --yolo": true, "claude --model=opus": true,
		"claude -p": false, "claude -p fix": false, "codex exec fix": false, "gemini --prompt=x": false,
		"hermes -z hi": false, "claude --model opus": false, "claude fix the tests": false,
	} {
		if got := InteractiveArgv(splitWords(argv)); got != want {
			t.Errorf("InteractiveArgv(%q) = %v, want %v", argv, got, want)
		}
	}
}

func splitWords(s string) []string {
	var out []string
	w := ""
	for _, c := range s + " " {
		if c == ' ' {
			if w != "" {
				out = append(out, w)
			}
			w = ""
			continue
		}
		w += string(c)
	}
	return out
}

func interactiveConfig() Config {
	cfg := taskConfig()
	cfg.Argv = []string{"claude"}
	cfg.Task.Exec = []string{"claude", "-r", "{session}", "{message}"}
	cfg.Task.Interactive = true
	return cfg
}

// Interactive: a kill mid-turn relaunches the template; the relaunched CLI
// reports its continuation as a new turn-begin under a new id; at /exit
// (exit 0, no turn open) supervise ends 0 and parks nothing.
func TestInteractiveResumeNewTurnTakesIt(t *testing.T) {
	for _, sameID := range []bool{true, false} {
		r := newRig(t, interactiveConfig())
		if r.m.Policy.BlockRerun || r.m.Policy.Tail || !r.m.Policy.Interactive {
			t.Fatalf("policy %+v: an interactive task is never refused as a rerun and keeps no tails", r.m.Policy)
		}
		l := r.launch()
		if l.Tail {
			t.Fatal("an interactive launch keeps tails: the person's terminal would be piped")
		}
		r.begin("s1", "")
		r.marker(marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "Bash"})
		fx := r.killed(sigKILL)
		if n := nextOf(t, fx); !n.relaunch {
			t.Fatalf("next %+v, want the template relaunched", n)
		}
		l = r.launch()
		if len(l.Argv) < 3 || l.Argv[2] != "s1" {
			t.Fatalf("relaunch %q, want claude -r s1 ...", l.Argv)
		}
		next := "s1"
		if !sameID {
			next = "s2"
		}
		r.begin(next, "")
		r.end(next, "", marker.OutcomeCompleted)
		fx = r.die(0, 0, 0)
		if n := nextOf(t, fx); !n.end || n.code != ExitOK {
			t.Fatalf("same id %v: next %+v, want the end with 0", sameID, n)
		}
		for _, id := range []string{"s1", next} {
			if s := r.sess(id); s.State == record.Parked {
				t.Fatalf("same id %v: session %s parked: %s", sameID, id, s.Reason)
			}
		}
	}
}

// At the next interactive start, the session a hangup stopped mid-turn is
// not resumed: a person's own quit is not a crash (the terminal's line that
// names it is the observer's, package observe).
func TestInteractiveNotices(t *testing.T) {
	r := newRig(t, interactiveConfig())
	r.launch()
	r.begin("s1", "")
	r.marker(marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "Bash"})
	r.advance(time.Second)
	r.step(Exited{PID: 1000 + int(r.run), Code: 137, Signal: sigKILL, Started: r.m.Run.Started, Ended: r.now, How: "killed by SIGKILL"})
	if s := r.sess("s1"); s.State != record.ResumePending {
		t.Fatalf("after a kill mid-tool s1 is %s, want resume_pending", s.State)
	}

	// A hangup stops the session mid-turn; the next supervise names it.
	r.launch()
	r.begin("s1", "")
	r.step(StopRequested{Signal: 1, Name: "SIGHUP"})
	r.die(0, 129, 1)
	if s := r.sess("s1"); s.State != record.Stopped {
		t.Fatalf("after the hangup s1 is %s, want stopped", s.State)
	}
	next := newRig(t, interactiveConfig())
	next.step(Booted{NextRun: 10, Sessions: []record.Session{*r.sess("s1")}})
	fx := next.step(LaunchDue{})
	l, ok := find[Launch](fx)
	if !ok || len(l.IDs) != 0 {
		t.Fatalf("launch %+v: the stopped session must not be resumed silently", l)
	}
}
