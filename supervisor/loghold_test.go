package supervisor

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/resume"
)

// TestLogHold: while held, records from the logger and from loggers
// derived from it are queued, not written; release writes them in order,
// before anything logged afterwards.
func TestLogHold(t *testing.T) {
	var buf bytes.Buffer
	var hold logHold
	log := newHoldLogger(slog.New(slog.NewTextHandler(&buf, nil)), &hold)
	sub := log.With("component", "x")
	log.Info("one")
	hold.start()
	log.Warn("two", "run", 1)
	sub.Info("three")
	if strings.Contains(buf.String(), "two") || strings.Contains(buf.String(), "three") {
		t.Fatalf("written while held:\n%s", buf.String())
	}
	hold.release()
	log.Info("four")
	hold.release() // nothing held: no-op
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		i := strings.Index(line, "msg=")
		msgs = append(msgs, strings.Fields(line[i+4:])[0])
	}
	if got := strings.Join(msgs, " "); got != "one two three four" {
		t.Fatalf("order %q, want one two three four:\n%s", got, buf.String())
	}
	if !strings.Contains(buf.String(), "component=x") || !strings.Contains(buf.String(), "run=1") {
		t.Fatalf("attributes lost:\n%s", buf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the loop's and the test's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestLogHoldRelaunch: with a real child that dies and is relaunched at
// once, the death's log line (held during the relaunch) is written, and
// before the next run's "child started".
func TestLogHoldRelaunch(t *testing.T) {
	reaper, err := child.NewReaper(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reaper.Close()
	var logs syncBuffer
	policy := crashloop.DefaultPolicy()
	policy.Healthy = time.Millisecond // the first run is healthy: no backoff
	cfg := Config{Name: "t", StateDir: t.TempDir(), Policy: policy, Guard: crashloop.DefaultGuard(),
		Resume: resume.DefaultPolicy(), KeepRuns: 100, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		Argv: []string{"/bin/sh", "-c", `[ "$SUPERVISE_RUN" = 1 ] && { sleep 0.05; exit 3; }; exec sleep 30`}}
	db, err := journal.Open(StatePath(cfg.StateDir), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := New(cfg, db, reaper)
	if err != nil {
		t.Fatal(err)
	}
	defer s.CloseNotify()
	done := make(chan struct{})
	go func() { defer close(done); s.Run(context.Background()) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), `msg="child started" run=2`) {
		if time.Now().After(deadline) {
			s.Shutdown()
			<-done
			t.Fatalf("no second run:\n%s", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.Shutdown()
	<-done
	out := logs.String()
	exited := strings.Index(out, `msg="child exited" run=1`)
	started := strings.Index(out, `msg="child started" run=2`)
	if exited < 0 || exited > started {
		t.Fatalf("run 1's death logged at %d, run 2's start at %d:\n%s", exited, started, out)
	}
	if !strings.Contains(out[exited:started], `next="relaunch now"`) {
		t.Fatalf("run 1 was not relaunched at once (the held path):\n%s", out)
	}
}
