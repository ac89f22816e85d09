package notify

import (
	"context"
	"errors"
	"testing"
)

// TestSessionIDMayNotStartWithDash: a session id lands in --resume-exec argv
// templates, so one that begins with '-' is refused at the parser (the
// barrier answers 0) and by the client before it sends anything.
func TestSessionIDMayNotStartWithDash(t *testing.T) {
	for _, id := range []string{"--evil", "-r", "-"} {
		if m, err := Parse([]byte("X_SUPERVISE_SESSION=" + id + "\nX_SUPERVISE_EVENT=turn-begin")); !errors.Is(err, ErrProtocol) {
			t.Errorf("Parse accepted session %q: %+v, %v", id, m, err)
		}
		c := &Client{Socket: "/nonexistent/notify.sock"}
		if err := c.TurnBegin(context.Background(), id, "", ""); !errors.Is(err, ErrProtocol) {
			t.Errorf("client sent session %q: %v", id, err)
		}
	}
	if _, err := Parse([]byte("X_SUPERVISE_SESSION=a-b\nX_SUPERVISE_EVENT=turn-begin")); err != nil {
		t.Errorf("a dash inside the id refused: %v", err)
	}
}
