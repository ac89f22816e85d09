package supervisor

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
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
