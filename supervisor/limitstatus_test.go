package supervisor

import (
	"strings"
	"testing"
	"time"
)

// A session waiting out a limit shows its wait and the countdown to its
// reset in the table, and a note with the reset's time.
func TestStatusLimitCountdown(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := now.Add(90 * time.Second)
	s := SessionStatus{ID: "s1", State: "waiting", Wait: "limit", RetryAt: &at}
	if got := stateCell(s, now); got != "waiting (limit, 1m30s)" {
		t.Errorf("state cell %q", got)
	}
	if got := stateCell(s, at.Add(time.Second)); got != "waiting (limit, due)" {
		t.Errorf("state cell past the reset %q", got)
	}
	var b strings.Builder
	writeSessionNotes(&b, s, now)
	if !strings.Contains(b.String(), at.Format(time.RFC3339)) || !strings.Contains(b.String(), "in 1m30s") {
		t.Errorf("note %q lacks the reset and its countdown", b.String())
	}
}
