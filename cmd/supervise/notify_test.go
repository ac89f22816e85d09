package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/notify"
)

// Every event of `supervise notify` reaches a real notify socket as the
// datagram the protocol says, barrier included; bad outcomes and phases
// are usage errors and send nothing.
func TestNotifyEvents(t *testing.T) {
	srv, err := notify.Listen(notify.Config{Dir: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 16)
	served := make(chan error, 1)
	go func() {
		served <- srv.Serve(func(m notify.Message) {
			if m.Fd != nil {
				notify.Ack(m.Fd)
				return
			}
			got <- fmt.Sprintf("event=%s session=%s turn=%s outcome=%s phase=%s tool=%s prompt=%s watchdog=%v ready=%v stopping=%v status=%q",
				m.Event, m.Session, m.Turn, m.Outcome, m.Phase, m.Tool, m.Prompt, m.Watchdog, m.Ready, m.Stopping, m.Status)
		})
	}()
	t.Cleanup(func() { srv.Close(); <-served })
	t.Setenv("NOTIFY_SOCKET", srv.Path())
	for _, c := range []struct {
		args []string
		want string // a substring of what the server received
	}{
		{[]string{"turn-begin", "--session", "s1", "--turn", "t1", "--prompt", "go"}, "event=turn-begin session=s1 turn=t1 outcome= phase= tool= prompt=go"},
		{[]string{"phase", "--session", "s1", "--phase", "tool", "--tool", "Bash"}, "event=phase session=s1 turn= outcome= phase=tool tool=Bash"},
		{[]string{"waiting", "--session", "s1", "--turn", "t1"}, "event=waiting session=s1 turn=t1"},
		{[]string{"turn-end", "--session", "s1", "--turn", "t1", "--outcome", "cancelled"}, "event=turn-end session=s1 turn=t1 outcome=cancelled"},
		{[]string{"resumed", "--session", "s1", "--turn", "t1"}, "event=resumed session=s1 turn=t1"},
		{[]string{"closed", "--session", "s1"}, "event=closed session=s1 turn="},
		{[]string{"heartbeat", "--session", "s1"}, "event=heartbeat session=s1"},
		{[]string{"heartbeat"}, "watchdog=true"},
		{[]string{"ready"}, "ready=true"},
		{[]string{"stopping"}, "stopping=true"},
		{[]string{"status", "--text", "busy"}, `status="busy"`},
	} {
		code, _, stderr := call(t, append([]string{"notify"}, c.args...)...)
		if code != 0 {
			t.Errorf("notify %v: exit %d: %s", c.args, code, stderr)
			continue
		}
		if m := <-got; !strings.Contains(m, c.want) {
			t.Errorf("notify %v sent %s, want %s", c.args, m, c.want)
		}
	}
	for _, args := range [][]string{
		{"turn-end", "--session", "s1", "--outcome", "done"},
		{"phase", "--session", "s1", "--phase", "thinking"},
		{"turn-begin"},
	} {
		if code, _, _ := call(t, append([]string{"notify"}, args...)...); code != 2 {
			t.Errorf("notify %v: exit %d, want 2", args, code)
		}
	}
	select {
	case m := <-got:
		t.Errorf("a refused command sent %s", m)
	default:
	}
}
