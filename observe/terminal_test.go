package observe

import (
	"bytes"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/internal/tty"
	"github.com/supervise-dev/supervise/supervisor"
)

func TestDeathLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   supervisor.Event
		want string
	}{
		{"killed mid-tool, resumed", supervisor.Event{Kind: supervisor.EventDeath, Reason: "signal", Signal: 9, Dirty: true, ExitCode: 137,
			Decisions: []supervisor.SessionStatus{{ID: "6fce", State: "resume_pending", Phase: "tool", Tool: "Bash"}}},
			"supervise: claude was killed (SIGKILL) mid-tool (Bash); continuing session 6fce"},
		{"exit 1 mid-turn, parked", supervisor.Event{Kind: supervisor.EventDeath, Reason: "exit", ExitCode: 1, Dirty: true,
			Decisions: []supervisor.SessionStatus{{ID: "a1", State: "parked", Turn: "t1", Phase: "model", Reason: "two deaths", ResumeCommand: "supervise resume --state-dir /s a1"}}},
			"supervise: claude exited with status 1 mid-turn; session a1 parked (two deaths); to continue it: supervise resume --state-dir /s a1"},
		{"dirty, no session", supervisor.Event{Kind: supervisor.EventDeath, Reason: "signal", Signal: 11, Dirty: true},
			"supervise: claude was killed (SIGSEGV)"},
		{"watchdog", supervisor.Event{Kind: supervisor.EventDeath, Reason: "watchdog", Signal: 9, ExitCode: 137, Dirty: true},
			"supervise: claude ended: killed by the watchdog after it stopped responding"},
		{"clean exit", supervisor.Event{Kind: supervisor.EventDeath, Reason: "exit"}, ""},
		{"lost conversation, started anew", supervisor.Event{Kind: supervisor.EventDeath, Reason: "exit", ExitCode: 1, Dirty: true,
			Decisions: []supervisor.SessionStatus{{ID: "b2", State: "closed", Reason: "its conversation is lost: asked to resume it, the CLI said \"No conversation found\"; it was lost before the CLI saved it"}}},
			"supervise: claude exited with status 1; session b2's conversation was lost before claude saved it, so it cannot be resumed: starting claude again as a new conversation"},
		{"hostile id", supervisor.Event{Kind: supervisor.EventDeath, Reason: "signal", Signal: 9, Dirty: true,
			Decisions: []supervisor.SessionStatus{{ID: "x\x1b[2Jy", State: "resume_pending"}}},
			"supervise: claude was killed (SIGKILL); continuing session x?[2Jy"},
	} {
		if got := DeathLine("claude", true, tc.ev); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestDeathLineWithoutTemplate(t *testing.T) {
	ev := supervisor.Event{Kind: supervisor.EventDeath, Reason: "signal", Signal: 9, Dirty: true,
		Decisions: []supervisor.SessionStatus{{ID: "6fce", State: "resume_pending", Phase: "tool", Tool: "Bash"}}}
	want := "supervise: claude was killed (SIGKILL) mid-tool (Bash); session 6fce is owed a resume, handed to the next claude (supervise status shows whether it took it)"
	if got := DeathLine("claude", false, ev); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestTerminalWritesOnlyAtDeath(t *testing.T) {
	var w bytes.Buffer
	var seen []string
	restored, flushedAt := 0, -1
	term := Term{W: &w, Restore: func() { restored++ }, Rows: func() int { return 2 }, Flush: func() { flushedAt = w.Len() }}
	obs := Terminal(term, "claude", true, func(ev supervisor.Event) { seen = append(seen, ev.Kind) })
	obs(supervisor.Event{Kind: supervisor.EventStart})
	obs(supervisor.Event{Kind: supervisor.EventMarkers})
	if w.Len() != 0 || restored != 0 {
		t.Errorf("wrote %q (restored %d times) while the child runs", w.String(), restored)
	}
	obs(supervisor.Event{Kind: supervisor.EventDeath, Reason: "signal", Signal: 9, Dirty: true})
	// The modes off, the dead frame scrolled up, the screen cleared, then
	// the line at its top.
	if got, want := w.String(), tty.Reset+"\x1b[9999;1H\r\n\r\n"+tty.ClearSeq+"supervise: claude was killed (SIGKILL)\r\n"; got != want {
		t.Errorf("at the death wrote\n%q\nwant\n%q", got, want)
	}
	if restored != 1 {
		t.Errorf("the terminal's settings were restored %d times at a death, want 1", restored)
	}
	if flushedAt != w.Len() {
		t.Errorf("flushed after %d of %d bytes: the line must be on the terminal before the next run", flushedAt, w.Len())
	}
	if strings.Join(seen, ",") != "start,markers,death" {
		t.Errorf("the next observer saw %v", seen)
	}
	// A clean exit needs no word: the modes are turned off, the screen the
	// person left stays.
	w.Reset()
	obs(supervisor.Event{Kind: supervisor.EventDeath, Reason: "exit"})
	if got := w.String(); got != tty.Reset || restored != 2 {
		t.Errorf("at a clean exit wrote %q (restored %d), want only the modes off", got, restored)
	}
}

func TestStartNotice(t *testing.T) {
	st := supervisor.Status{StateDir: "/s d", Sessions: []supervisor.SessionStatus{
		{ID: "s1", State: "stopped", Phase: "tool", Tool: "Bash"},
		{ID: "s2", State: "idle"},
		{ID: "s3", State: "parked", Reason: "mid-turn at 2 consecutive dirty deaths"},
		{ID: "s4", State: "stopped"},
	}}
	tpl := []string{"claude", "-r", "{session}", "{message}"}
	got := StartNotice(st, tpl, 2)
	want := []string{
		"supervise: session s1 was stopped mid-turn (in Bash); to continue it: supervise resume --state-dir '/s d' s1 (or, outside supervise: claude -r s1)",
		"supervise: session s3 is parked (mid-turn at 2 consecutive dirty deaths); to continue it: supervise resume --state-dir '/s d' s3 (or, outside supervise: claude -r s3)",
		"supervise: and 1 more stopped or parked: supervise status --state-dir '/s d'",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := StartNotice(supervisor.Status{Sessions: []supervisor.SessionStatus{{ID: "a", State: "idle"}}}, nil, 5); len(got) != 0 {
		t.Errorf("nothing to name, got %q", got)
	}
}

func TestOwnResume(t *testing.T) {
	for tpl, want := range map[string]string{
		"codex resume {session} {message}":     "codex resume id-1",
		"gemini -r {session} -i {message}":     "gemini -r id-1",
		"claude -r {session} -- {message}":     "claude -r id-1",
		"agent --session={session} {turn} x y": "agent --session=id-1 x y",
		"claude -p -r {session} {message}":     "claude -p -r id-1",
	} {
		if got := OwnResume(strings.Fields(tpl), "id-1"); got != want {
			t.Errorf("%s: got %q, want %q", tpl, got, want)
		}
	}
}
