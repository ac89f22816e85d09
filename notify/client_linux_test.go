package notify

import (
	"context"
	"errors"
	"fmt"
	"github.com/supervise-dev/supervise/marker"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestClientNoSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	os.Unsetenv("NOTIFY_SOCKET")
	ctx := context.Background()
	if _, err := FromEnv(); !errors.Is(err, ErrNoSocket) {
		t.Errorf("FromEnv() = %v, want ErrNoSocket", err)
	}
	if err := Notify(ctx, "READY=1"); !errors.Is(err, ErrNoSocket) {
		t.Errorf("Notify() = %v, want ErrNoSocket", err)
	}
	var c Client
	if err := c.Barrier(ctx, time.Second); !errors.Is(err, ErrNoSocket) {
		t.Errorf("Barrier() = %v, want ErrNoSocket", err)
	}
	c.Socket = "vsock:2:1234"
	if err := c.Ready(ctx); !errors.Is(err, ErrUnsupportedSocket) {
		t.Errorf("Ready() to vsock = %v, want ErrUnsupportedSocket", err)
	}
}

func TestClientFromEnv(t *testing.T) {
	handle, ch := collect()
	s := serve(t, Config{}, handle)
	t.Setenv("NOTIFY_SOCKET", s.Path())
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.Socket != s.Path() {
		t.Errorf("Socket = %q, want %q", c.Socket, s.Path())
	}
	if err := Notify(context.Background(), "READY=1"); err != nil {
		t.Fatal(err)
	}
	if m := next(t, ch); !m.Ready {
		t.Errorf("got %+v, want READY=1", m)
	}
}

func TestClientHelpers(t *testing.T) {
	t.Parallel()
	handle, ch := collect()
	s := serve(t, Config{}, handle)
	c := &Client{Socket: s.Path()}
	ctx := context.Background()
	prompt := "first line\nsecond\r\nthird\x1b[0m " + strings.Repeat("é", 600)
	tests := []struct {
		name string
		send func() error
		want marker.Message
	}{
		{"TurnBegin", func() error { return c.TurnBegin(ctx, "s1", "t1", "fix it") },
			marker.Message{Session: "s1", Event: marker.EventTurnBegin, Turn: "t1", Prompt: "fix it"}},
		{"TurnBegin without turn", func() error { return c.TurnBegin(ctx, "s1", "", "") },
			marker.Message{Session: "s1", Event: marker.EventTurnBegin}},
		{"TurnBegin flattens prompt", func() error { return c.TurnBegin(ctx, "s1", "t1", prompt) },
			marker.Message{Session: "s1", Event: marker.EventTurnBegin, Turn: "t1", Prompt: flatten(prompt, MaxPromptLen)}},
		{"TurnEnd", func() error { return c.TurnEnd(ctx, "s1", "t1", marker.OutcomeCancelled) },
			marker.Message{Session: "s1", Event: marker.EventTurnEnd, Turn: "t1", Outcome: marker.OutcomeCancelled}},
		{"Waiting", func() error { return c.Waiting(ctx, "s1", "t1") },
			marker.Message{Session: "s1", Event: marker.EventWaiting, Turn: "t1", Wait: marker.WaitInput}},
		{"WaitingFor reconnect", func() error { return c.WaitingFor(ctx, "s1", "", marker.WaitReconnect) },
			marker.Message{Session: "s1", Event: marker.EventWaiting, Wait: marker.WaitReconnect}},
		{"Phase", func() error { return c.Phase(ctx, "s1", marker.PhaseTool, "bash") },
			marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "bash"}},
		{"ToolPhase", func() error { return c.ToolPhase(ctx, "s1", "Bash", "npm test") },
			marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "Bash", Detail: "npm test"}},
		{"ToolPhase flattens and bounds detail", func() error { return c.ToolPhase(ctx, "s1", "Bash", prompt) },
			marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "Bash", Detail: OneLine(prompt, MaxDetailLen)}},
		{"ToolPhase without detail", func() error { return c.ToolPhase(ctx, "s1", "Bash", "") },
			marker.Message{Session: "s1", Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "Bash"}},
		{"Resumed", func() error { return c.Resumed(ctx, "s1", "t1") },
			marker.Message{Session: "s1", Event: marker.EventResumed, Turn: "t1"}},
		{"Effect", func() error { return c.Effect(ctx, "s1", "write:src/a.go") },
			marker.Message{Session: "s1", Event: marker.EventEffect, Effect: "write:src/a.go"}},
		{"Effect flattens and bounds the key", func() error { return c.Effect(ctx, "s1", prompt) },
			marker.Message{Session: "s1", Event: marker.EventEffect, Effect: EffectKey(prompt)}},
		{"Closed", func() error { return c.Closed(ctx, "s1") },
			marker.Message{Session: "s1", Event: marker.EventClosed}},
		{"Heartbeat", func() error { return c.Heartbeat(ctx, "s1") },
			marker.Message{Session: "s1", Event: marker.EventHeartbeat, Watchdog: true}},
		{"Ready", func() error { return c.Ready(ctx) }, marker.Message{Ready: true}},
		{"Stopping", func() error { return c.Stopping(ctx) }, marker.Message{Stopping: true}},
		{"Watchdog", func() error { return c.Watchdog(ctx) }, marker.Message{Watchdog: true}},
		{"Status", func() error { return c.Status(ctx, "two\nlines") }, marker.Message{Status: "two lines", HasStatus: true}},
	}
	for _, tt := range tests {
		if err := tt.send(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		m := next(t, ch)
		m.PID, m.UID = 0, 0
		if m != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, m, tt.want)
		}
	}
	d := OneLine("  cd /repo &&\n\tnpm test\r\n"+strings.Repeat("é", 600), MaxDetailLen)
	if !strings.HasPrefix(d, "cd /repo &&  npm test  é") || !strings.HasSuffix(d, "…") || len(d) > MaxDetailLen || !utf8.ValidString(d) {
		t.Errorf("OneLine: %q (%d bytes)", d, len(d))
	}
	if d := OneLine("npm test", MaxDetailLen); d != "npm test" {
		t.Errorf("OneLine changed a short line: %q", d)
	}
	p := flatten(prompt, MaxPromptLen)
	if strings.ContainsAny(p, "\r\n\x1b") || len(p) > MaxPromptLen || !utf8.ValidString(p) {
		t.Errorf("flattened prompt %q", p)
	}
}

func TestClientRejectsBadValues(t *testing.T) {
	t.Parallel()
	// Nothing listens: a bad message must fail before it is sent.
	c := &Client{Socket: filepath.Join(t.TempDir(), "none.sock")}
	ctx := context.Background()
	for name, err := range map[string]error{
		"empty session":    c.Closed(ctx, ""),
		"newline in turn":  c.Waiting(ctx, "s1", "t\n1"),
		"injected key":     c.Waiting(ctx, "s1", "t1\nMAINPID=1"),
		"injected outcome": c.TurnEnd(ctx, "s1", "t1", "completed\nREADY=1"),
		"CR in tool":       c.Phase(ctx, "s1", marker.PhaseTool, "bash\r"),
		"long session":     c.Heartbeat(ctx, strings.Repeat("s", MaxIDLen+1)),
		"bad outcome":      c.TurnEnd(ctx, "s1", "t1", "ok"),
		"bad phase":        c.Phase(ctx, "s1", "sleeping", ""),
	} {
		if !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", name, err)
		}
	}
}

// TestClientSendDeadline is reliability.md 5 D case 40 from the agent's
// side: with nobody reading, the queue fills (max_dgram_qlen) and a send
// fails at its deadline instead of blocking the agent.
func TestClientSendDeadline(t *testing.T) {
	t.Parallel()
	s := listen(t, Config{}) // never served
	c := &Client{Socket: s.Path(), Timeout: 100 * time.Millisecond}
	ctx := context.Background()
	var err error
	sent := 0
	for ; sent < 1000 && err == nil; sent++ {
		begin := time.Now()
		err = c.Heartbeat(ctx, "s1")
		if d := time.Since(begin); d > 5*time.Second {
			t.Fatalf("send %d took %v with a %v timeout", sent, d, c.Timeout)
		}
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after %d sends: %v, want a deadline error", sent, err)
	}
	t.Logf("queue full after %d datagrams", sent-1)

	// The context bounds the send too.
	c.Timeout = time.Hour
	ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := c.Watchdog(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("send with a context deadline: %v, want context.DeadlineExceeded", err)
	}
}

// TestClientSurvivesRestart: a new socket per message keeps a Client
// working when the supervisor restarts and binds the same path again.
func TestClientSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "run")
	c := &Client{}
	ctx := context.Background()
	for i := range 3 {
		handle, ch := collect()
		s, err := Listen(Config{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Serve(handle) }()
		c.Socket = s.Path()
		if err := c.Status(ctx, fmt.Sprint("run ", i)); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if m := next(t, ch); m.Status != fmt.Sprint("run ", i) {
			t.Errorf("run %d: got %+v", i, m)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestClientAbstractSocket(t *testing.T) {
	t.Parallel()
	name := fmt.Sprintf("@supervise-notify-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := (&Client{Socket: name}).Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.SetReadDeadline(time.Now().Add(waitTimeout))
	buf := make([]byte, 64)
	n, err := l.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Errorf("read %q, %v; want READY=1", buf[:n], err)
	}
}

func TestClientBarrier(t *testing.T) {
	t.Parallel()
	msgs := make(chan marker.Message, 16)
	s := serve(t, Config{}, func(m marker.Message) { msgs <- m })
	c := &Client{Socket: s.Path()}
	ctx := context.Background()

	if err := c.TurnBegin(ctx, "s1", "t1", ""); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Barrier(ctx, waitTimeout) }()
	if m := next(t, msgs); m.Event != marker.EventTurnBegin {
		t.Fatalf("got %+v, want the turn-begin before the barrier", m)
	}
	m := next(t, msgs)
	if !m.Barrier || m.Fd == nil {
		t.Fatalf("got %+v, want a barrier with its fd", m)
	}
	select {
	case err := <-done:
		t.Fatalf("Barrier returned %v while the handler still holds the fd", err)
	default:
	}
	Ack(m.Fd) // "durable"
	if err := <-done; err != nil {
		t.Fatalf("Barrier: %v", err)
	}
}

func TestClientBarrierTimeout(t *testing.T) {
	t.Parallel()
	held := make(chan *os.File, 1)
	s := serve(t, Config{}, func(m marker.Message) { held <- m.Fd })
	c := &Client{Socket: s.Path()}
	begin := time.Now()
	if err := c.Barrier(context.Background(), 100*time.Millisecond); !errors.Is(err, ErrBarrierTimeout) {
		t.Fatalf("Barrier = %v, want ErrBarrierTimeout", err)
	}
	if d := time.Since(begin); d < 100*time.Millisecond {
		t.Errorf("Barrier timed out after %v, before its timeout", d)
	}
	(<-held).Close()

	// A cancelled context is reported as such, not as a timeout.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fds := make(chan *os.File, 1)
	go func() {
		f := <-held
		cancel()
		fds <- f
	}()
	if err := c.Barrier(ctx, waitTimeout); !errors.Is(err, context.Canceled) {
		t.Errorf("Barrier with cancelled context = %v, want context.Canceled", err)
	}
	(<-fds).Close()
}

// TestClientBarrierBareCloseIsNotAnAck: a receiver that closes the fd
// without the ack byte (a supervisor that died: the kernel closed its fds)
// must never look like "journaled".
func TestClientBarrierBareCloseIsNotAnAck(t *testing.T) {
	t.Parallel()
	s := serve(t, Config{}, func(m marker.Message) {
		if m.Fd != nil {
			m.Fd.Close()
		}
	})
	c := &Client{Socket: s.Path()}
	if err := c.Barrier(context.Background(), waitTimeout); !errors.Is(err, ErrBarrierUnconfirmed) {
		t.Fatalf("Barrier after a bare close = %v, want ErrBarrierUnconfirmed", err)
	}
	// A rejected sender's barrier is closed bare too.
	s2 := serve(t, Config{Accept: func(int32) bool { return false }}, func(marker.Message) {})
	if err := (&Client{Socket: s2.Path()}).Barrier(context.Background(), waitTimeout); !errors.Is(err, ErrBarrierUnconfirmed) {
		t.Fatalf("Barrier from a rejected sender = %v, want ErrBarrierUnconfirmed", err)
	}
}
