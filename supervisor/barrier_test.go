package supervisor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// barrierAnswer applies a BARRIER=1 from pid and returns the byte the
// sender reads before EOF ("" for a bare close).
func barrierAnswer(t *testing.T, s *Supervisor, pid int32) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s.take(inMsg{Message: marker.Message{PID: pid, Barrier: true, Fd: w}})
	for s.cs.inflight != nil { // let the batch commit and answer
		s.committed(<-s.cs.w.out)
	}
	r.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBarrierAfterSessionCeiling is issue 12 finding 2: past the session
// ceiling a new session's marker is refused, and the sender's next barrier
// answers '0' (not '1', "journaled"); the one after that, with nothing
// refused in between, answers '1' again. The refusal warning is
// rate-limited and counts what it suppressed.
func TestBarrierAfterSessionCeiling(t *testing.T) {
	s := newTestSupervisor(t)
	var logs bytes.Buffer
	s.log = slog.New(slog.NewJSONHandler(&logs, nil))
	for i := range machine.MaxSessions {
		id := fmt.Sprintf("open%d", i)
		s.m.Sessions[id] = &record.Session{ID: id, State: record.InTurn}
	}
	const pid, other = 4242, 4343
	begin := time.Now()
	const refused = 20000
	for i := range refused {
		s.take(inMsg{Message: marker.Message{PID: pid, Session: fmt.Sprintf("new%d", i), Event: marker.EventTurnBegin}})
	}
	elapsed := time.Since(begin)
	if got := barrierAnswer(t, s, pid); got != "0" {
		t.Errorf("barrier after a refused marker answered %q, want \"0\"", got)
	}
	if got := barrierAnswer(t, s, pid); got != "1" {
		t.Errorf("the next barrier, nothing refused since, answered %q, want \"1\"", got)
	}
	if got := barrierAnswer(t, s, other); got != "1" {
		t.Errorf("another sender's barrier answered %q, want \"1\"", got)
	}
	var lines int
	var total uint64
	sc := bufio.NewScanner(&logs)
	for sc.Scan() {
		var rec struct {
			Level, Msg string
			Suppressed uint64
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Level != "WARN" {
			continue
		}
		lines++
		total += 1 + rec.Suppressed
	}
	if limit := 2 + int(elapsed/time.Second); lines > limit {
		t.Errorf("%d warnings for %d refused markers in %v, want at most %d", lines, refused, elapsed, limit)
	}
	if lines == 0 {
		t.Error("no warning for the refused markers")
	}
	// The last line's suppressed count is logged with the next one; what
	// was logged so far accounts for no more than what was refused.
	if total > refused {
		t.Errorf("warnings account for %d refusals, more than %d", total, refused)
	}
}
