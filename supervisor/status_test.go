package supervisor

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// status says how each session's last turn ended (last_outcome), live and
// from the journal, in JSON and in the table; a turn under way has none.
func TestStatusLastOutcome(t *testing.T) {
	s := newRuleSupervisor(t)
	s.started(t, s.prepare(t))
	for _, m := range []marker.Message{
		{Session: "s1", Event: marker.EventTurnBegin, Turn: "t1"},
		{Session: "s1", Event: marker.EventTurnEnd, Turn: "t1", Outcome: marker.OutcomeCompleted},
		{Session: "s2", Event: marker.EventTurnBegin, Turn: "u1"},
		{Session: "s2", Event: marker.EventTurnEnd, Turn: "u1", Outcome: marker.OutcomeFailed},
		{Session: "s3", Event: marker.EventTurnBegin, Turn: "v1"},
	} {
		m.PID = 100
		s.take(inMsg{Message: m, run: s.m.Run.Run})
	}
	want := map[string]string{"s1": "completed", "s2": "failed", "s3": ""}
	check := func(how string, raw []byte) {
		t.Helper()
		var st struct {
			Sessions []map[string]any `json:"sessions"`
		}
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatalf("%s: %v\n%s", how, err, raw)
		}
		got := map[string]string{}
		for _, ss := range st.Sessions {
			v, _ := ss["last_outcome"].(string)
			got[ss["id"].(string)] = v
		}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("%s: %s last_outcome %q, want %q\n%s", how, id, got[id], w, raw)
			}
		}
	}
	sn, err := s.status()
	if err != nil {
		t.Fatal(err)
	}
	var live bytes.Buffer
	if err := sn.writeJSON(&live, s.db, View{}); err != nil {
		t.Fatal(err)
	}
	check("live", live.Bytes())
	if err := s.commitSync(nil); err != nil {
		t.Fatal(err)
	}
	var stored bytes.Buffer
	if err := WriteStatusJSON(&stored, s.db, "t", s.cfg.StateDir, View{All: true}); err != nil {
		t.Fatal(err)
	}
	check("from the journal", stored.Bytes())

	st, err := ReadStatus(s.db, "t", s.cfg.StateDir, false)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := WriteText(&text, st, s.clock.Now()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(text.String(), "\n")
	head := -1
	for i, l := range lines {
		if strings.Contains(l, "ID") && strings.Contains(l, "LAST") {
			head = i
		}
	}
	if head < 0 {
		t.Fatalf("no LAST column:\n%s", text.String())
	}
	col := strings.Index(lines[head], "LAST")
	for i, id := range []string{"s1", "s2", "s3"} {
		row := lines[head+1+i]
		if w := want[id]; !strings.HasPrefix(row[col:], map[bool]string{true: w, false: "-"}[w != ""]+" ") {
			t.Errorf("%s's row %q: want %q under LAST", id, row, w)
		}
	}
}

// A 256-byte session id (the protocol's limit) does not break the table:
// it is cut with an ellipsis there, every column stays aligned, the
// resume command and the JSON keep it whole.
func TestStatusLongSessionID(t *testing.T) {
	long := strings.Repeat("x", 250) + "-tail"
	st := Status{Name: "t", StateDir: "/state", Sessions: []SessionStatus{
		{ID: "s1", State: "idle", Turn: "t1", LastOutcome: "completed"},
		{ID: long, State: "parked", CrashCount: 2, Turn: strings.Repeat("T", 256), Reason: "mid-turn at 2 consecutive dirty deaths",
			ResumeCommand: ResumeCommand("/state", long)},
	}}
	var b bytes.Buffer
	if err := WriteText(&b, st, time.Now()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	var head int
	for i, l := range lines {
		if strings.HasPrefix(l, "  ID ") {
			head = i
		}
	}
	col := strings.Index(lines[head], "STATE")
	for _, row := range lines[head+1 : head+3] {
		if runes := []rune(row); len(runes) < col || !strings.HasPrefix(string(runes[col:]), "idle") && !strings.HasPrefix(string(runes[col:]), "parked") {
			t.Errorf("row %q: its state is not under STATE (column %d)\n%s", row, col, out)
		}
		if strings.Contains(row, "-tail") {
			t.Errorf("row %q holds the whole id", row)
		}
	}
	if !strings.Contains(lines[head+2], strings.Repeat("x", maxCell-1)+"…") {
		t.Errorf("the long id is not cut with an ellipsis:\n%s", out)
	}
	if !strings.Contains(out, "resume it with: supervise resume --state-dir /state "+long) {
		t.Errorf("the resume command lost the whole id:\n%s", out)
	}
	raw, err := json.Marshal(st)
	if err != nil || !strings.Contains(string(raw), `"id":"`+long+`"`) {
		t.Errorf("the JSON lost the whole id: %v", err)
	}
}

// A session's declared effects, tokens and rate-limit wait appear in
// status, in JSON and in the table.
func TestStatusEffectsTokensRetry(t *testing.T) {
	retry := time.Date(2026, 12, 1, 12, 0, 30, 0, time.UTC)
	sess := record.Session{ID: "s1", State: record.Waiting, Wait: "reconnect", RetryAt: retry,
		Effects: []string{"write:a.go", "Bash:npm test#1f"}, Tokens: &record.Tokens{Input: 30, Output: 12}}
	st := sessionStatus(sess, "/state", "")
	if len(st.Effects) != 2 || st.Tokens == nil || st.Tokens.Input != 30 || st.RetryAt == nil || !st.RetryAt.Equal(retry) {
		t.Fatalf("status %+v", st)
	}
	var b strings.Builder
	if err := WriteText(&b, Status{Sessions: []SessionStatus{st}}, retry.Add(-10*time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 side effects of the turn declared done: write:a.go, Bash:npm test#1f",
		"42 tokens (30 in, 12 out)", "rate limit resets at 2026-12-01T12:00:30Z (in 10s)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// A parked session's status says which park it is and who can lift it.
func TestStatusParkedBy(t *testing.T) {
	for by, want := range map[string]string{record.ParkedByBreaker: "changed agent", record.ParkedByBudget: "a person",
		"damaged": "a person"} {
		st := sessionStatus(record.Session{ID: "s", State: record.Parked, ParkedBy: by}, "/sd", "")
		if st.ParkedBy != by || !strings.Contains(st.LiftedBy, want) || !strings.HasPrefix(st.LiftedBy, "a person") {
			t.Errorf("%s: parked_by %q lifted_by %q", by, st.ParkedBy, st.LiftedBy)
		}
	}
	if st := sessionStatus(record.Session{ID: "s", State: record.Idle, ParkedBy: "breaker"}, "/sd", ""); st.ParkedBy != "" {
		t.Errorf("an idle session shows parked_by %q", st.ParkedBy)
	}
}
