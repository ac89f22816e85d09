package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/notify"
)

// TestBinary builds supervise-notify and runs it against a notify server:
// the markers arrive as `supervise notify` sends them, with the word
// notify before the event or without it, a hook payload on stdin is
// mapped, and each call's barrier is answered.
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "supervise-notify")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	srv, err := notify.Listen(notify.Config{Dir: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan marker.Message, 16)
	served := make(chan error, 1)
	barriers := make(chan struct{}, 16)
	go func() {
		served <- srv.Serve(func(m marker.Message) {
			if m.Fd != nil {
				notify.Ack(m.Fd)
				barriers <- struct{}{}
				return
			}
			got <- m
		})
	}()
	t.Cleanup(func() { srv.Close(); <-served })
	for _, c := range []struct {
		args  []string
		stdin string
		event marker.Event
	}{
		{[]string{"turn-begin", "--session", "s1"}, "", marker.EventTurnBegin},
		{[]string{"notify", "turn-end", "--session", "s1", "--outcome", "completed"}, "", marker.EventTurnEnd},
		{[]string{"hook"}, `{"hook_event_name":"Stop","session_id":"s2"}`, marker.EventTurnEnd},
	} {
		cmd := exec.Command(bin, c.args...)
		cmd.Env = append(cmd.Environ(), "NOTIFY_SOCKET="+srv.Path())
		cmd.Stdin = strings.NewReader(c.stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("supervise-notify %v: %v\n%s", c.args, err, out)
		}
		m := <-got
		if m.Event != c.event {
			t.Errorf("supervise-notify %v sent event %q, want %q", c.args, m.Event, c.event)
		}
		<-barriers // its barrier came, and was answered: the call exited 0
	}
	// Outside supervise it does nothing and exits 0, as `supervise notify`.
	cmd := exec.Command(bin, "turn-begin", "--session", "s1")
	cmd.Env = append(cmd.Environ(), "NOTIFY_SOCKET=")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "nothing sent") {
		t.Errorf("outside supervise: %v, %q; want exit 0 and nothing sent", err, out)
	}
}
