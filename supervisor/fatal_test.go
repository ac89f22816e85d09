package supervisor

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// A journal replaced or removed under supervise is found by the loop's
// once-a-second check, and supervise stops saying what happened: not that
// the journal is damaged and will be moved aside (the next start checks
// what is at the name and uses an intact journal as it is).
func TestFatalSaysReplacedNotDamaged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(path string) error
		want   string
	}{
		{"replaced", func(path string) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := os.WriteFile(path+".x", b, 0o600); err != nil {
				return err
			}
			return os.Rename(path+".x", path)
		}, "is another file now"},
		{"removed", os.Remove, "is gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := newTestSupervisorWith(t, Config{Name: "t", Argv: []string{"true"},
				Log: slog.New(slog.NewTextHandler(&logs, nil))})
			if err := tc.change(StatePath(s.cfg.StateDir)); err != nil {
				t.Fatal(err)
			}
			s.flushTick()
			if s.fatalErr == nil {
				t.Fatal("the loop's check did not stop supervise")
			}
			msg := s.fatalErr.Error()
			if !strings.Contains(msg, "replaced or removed under supervise") || !strings.Contains(msg, tc.want) || strings.HasPrefix(msg, "the journal is damaged") {
				t.Errorf("exit error %q, want it to say the journal was replaced or removed (%s)", msg, tc.want)
			}
			if l := logs.String(); strings.Contains(l, "moves the journal aside") || !strings.Contains(l, "replaced or removed under supervise") {
				t.Errorf("log:\n%s", l)
			}
		})
	}
}
