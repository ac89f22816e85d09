package notifycmd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/notify"
)

// call runs `supervise notify ARGS` in-process with stdin as its input.
func call(t *testing.T, args ...string) (int, string, string) {
	return callIn(t, "", args...)
}

func callIn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

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
		served <- srv.Serve(func(m marker.Message) {
			if m.Fd != nil {
				notify.Ack(m.Fd)
				return
			}
			got <- fmt.Sprintf("event=%s session=%s turn=%s outcome=%s phase=%s tool=%s prompt=%s watchdog=%v ready=%v stopping=%v status=%q effect=%q",
				m.Event, m.Session, m.Turn, m.Outcome, m.Phase, m.Tool, m.Prompt, m.Watchdog, m.Ready, m.Stopping, m.Status, m.Effect)
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
		{[]string{"effect", "--session", "s1", "--key", "write:a.go"}, `event=effect session=s1 turn= outcome= phase= tool= prompt= watchdog=false ready=false stopping=false status="" effect="write:a.go"`},
		{[]string{"effect", "--session", "s1", "--key", "two\nlines"}, `effect="two lines"`},
		{[]string{"heartbeat", "--session", "s1"}, "event=heartbeat session=s1"},
		{[]string{"heartbeat"}, "watchdog=true"},
		{[]string{"ready"}, "ready=true"},
		{[]string{"stopping"}, "stopping=true"},
		{[]string{"status", "--text", "busy"}, `status="busy"`},
	} {
		code, _, stderr := call(t, c.args...)
		if code != 0 {
			t.Errorf("notify %v: exit %d: %s", c.args, code, stderr)
			continue
		}
		if m := <-got; !strings.Contains(m, c.want) {
			t.Errorf("notify %v sent %s, want %s", c.args, m, c.want)
		}
	}
	// barrier sends no message of its own: only the barrier, answered.
	if code, _, stderr := call(t, "barrier"); code != 0 {
		t.Errorf("notify barrier: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{
		{"turn-end", "--session", "s1", "--outcome", "done"},
		{"phase", "--session", "s1", "--phase", "thinking"},
		{"effect", "--session", "s1"},
		{"effect", "--session", "s1", "--key", " "},
		{"turn-begin"},
	} {
		if code, _, _ := call(t, args...); code != 2 {
			t.Errorf("notify %v: exit %d, want 2", args, code)
		}
	}
	select {
	case m := <-got:
		t.Errorf("a refused command sent %s", m)
	default:
	}
}

// The command line's errors, word for word, with their exit status: 2 for
// usage, except that the hook event never exits 2 (agents read it as
// "block"); outside supervise, events do nothing and exit 0.
func TestUsageErrors(t *testing.T) {
	srv, err := notify.Listen(notify.Config{Dir: filepath.Join(t.TempDir(), "run")})
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan marker.Message, 16)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(func(m marker.Message) { sent <- m }) }()
	t.Cleanup(func() { srv.Close(); <-served })
	t.Setenv("NOTIFY_SOCKET", "")
	os.Unsetenv("NOTIFY_SOCKET")
	for _, c := range []struct {
		sock   bool // under supervise: the events' own checks apply
		args   []string
		env    string
		stdin  string
		code   int
		stderr string // a prefix of stderr
	}{
		{sock: true, args: nil, code: 2, stderr: "supervise notify: no EVENT given\n\nUsage: supervise notify EVENT [flags]"},
		{sock: true, args: []string{"bogus"}, code: 2, stderr: "supervise notify: unknown event \"bogus\" (see supervise notify --help)\n"},
		{args: []string{"turn-begin"}, code: 2, stderr: "supervise notify turn-begin: --session is required\n"},
		{sock: true, args: []string{"turn-end", "--session", "s"}, code: 2, stderr: "supervise notify turn-end: --outcome must be completed, failed or cancelled\n"},
		{sock: true, args: []string{"phase", "--session", "s"}, code: 2, stderr: "supervise notify phase: --phase must be model, tool or idle\n"},
		{sock: true, args: []string{"phase", "--session", "s", "--phase", "model", "--detail", "x"}, code: 2, stderr: "supervise notify phase: --detail goes with --phase tool\n"},
		{sock: true, args: []string{"effect", "--session", "s"}, code: 2, stderr: "supervise notify effect: --key is required (it names the side effect that completed)\n"},
		{args: []string{"effect", "--key", "k"}, code: 2, stderr: "supervise notify effect: --session is required\n"},
		{sock: true, args: []string{"waiting", "--session", "s", "--wait", "x"}, code: 2, stderr: "supervise notify waiting: --wait must be input, approval or reconnect\n"},
		{args: []string{"turn-begin", "--session", "s", "extra"}, code: 2, stderr: "supervise notify: unexpected argument \"extra\"\n"},
		{args: []string{"--bogus"}, code: 2, stderr: "flag provided but not defined: -bogus\n"},
		{args: []string{"heartbeat"}, env: "SUPERVISE_TIMEOUT=zz", code: 2, stderr: "supervise: invalid value \"zz\" for SUPERVISE_TIMEOUT: not a duration: a number with a unit, e.g. 10s, 500ms or 1m30s\n"},
		{args: []string{"turn-begin", "--hook-json"}, stdin: "{", code: 2, stderr: "supervise notify: --hook-json: unexpected EOF\n"},
		{args: []string{"heartbeat"}, code: 0, stderr: "supervise notify: NOTIFY_SOCKET is not set (not running under supervise): nothing sent\n"},
		{args: []string{"turn-begin", "--hook-json"}, stdin: `{"session_id":"s"}`, code: 0, stderr: "supervise notify: NOTIFY_SOCKET is not set"},
		// The hook event: never 2.
		{args: []string{"hook", "--bogus"}, code: 1, stderr: "flag provided but not defined: -bogus\n"},
		{args: []string{"hook", "a", "b"}, code: 1, stderr: "supervise notify hook: unexpected argument \"b\"\n"},
		{args: []string{"hook", "notjson"}, code: 1, stderr: "supervise notify hook: "},
		{args: []string{"hook"}, stdin: "not read outside supervise", code: 0, stderr: ""},
		{args: []string{"hook", "--print", `{"hook_event_name":"Stop"}`}, code: 1, stderr: "supervise notify hook: the "},
		{args: []string{"hook", "--print", `{"session_id":"s","hook_event_name":"Stop"}`}, code: 0, stderr: "turn-end --session \"s\" --outcome \"completed\"\n"},
		{args: []string{"hook", "--print", `{"session_id":"s","hook_event_name":"SomethingElse"}`}, code: 0, stderr: ""},
		{args: []string{"hook", "--print", `{"session_id":"s","hook_event_name":"PostToolUse","tool_name":"Write","tool_input":{"file_path":"/p/a.go","content":"x"}}`},
			code: 0, stderr: "effect --session \"s\" --key \"Write:/p/a.go#"},
		{args: []string{"-h"}, code: 0, stderr: ""},
	} {
		if c.env != "" {
			k, v, _ := strings.Cut(c.env, "=")
			t.Setenv(k, v)
		}
		if c.sock {
			t.Setenv("NOTIFY_SOCKET", srv.Path())
		}
		code, _, stderr := callIn(t, c.stdin, c.args...)
		os.Unsetenv("NOTIFY_SOCKET")
		if code != c.code || !strings.HasPrefix(stderr, c.stderr) || (c.stderr == "" && stderr != "") {
			t.Errorf("notify %v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.stderr)
		}
		if c.env != "" {
			k, _, _ := strings.Cut(c.env, "=")
			os.Unsetenv(k)
		}
	}
	select {
	case m := <-sent:
		t.Errorf("a refused command sent %+v", m)
	default:
	}
}
