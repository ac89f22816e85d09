package supervisor

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// A park by the breaker records the agent's fingerprint; a launch of the
// same agent leaves it, a launch of a changed one lifts it once, and the
// lift is journaled before the launch.
func TestBreakerParkLiftsOnceInTheLoop(t *testing.T) {
	s := newRuleSupervisor(t)
	bin := filepath.Join(t.TempDir(), "agent")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.fprint = newFingerprinter(bin, nil)
	s.m.Config.Fingerprint = true
	play(t, s, []step{mark("s1", marker.EventTurnBegin, "t1"), killed(syscall.SIGKILL),
		mark("s1", marker.EventResumed, "t1"), killed(syscall.SIGKILL)})
	sess := s.m.Sessions["s1"]
	if sess.State != record.Parked || sess.ParkedBy != record.ParkedByBreaker || sess.Fingerprint == nil {
		t.Fatalf("after two deaths: %+v, want parked by the breaker with a fingerprint", sess)
	}
	b, _ := os.ReadFile(bin)
	sum := sha256.Sum256(b)
	if f := sess.Fingerprint.Files[0]; f.Path != bin || f.SHA256 != hex.EncodeToString(sum[:]) || f.Size != int64(len(b)) {
		t.Errorf("fingerprint file %+v, want %s with its sha256 and size", f, bin)
	}

	s.prepare(t)
	if sess := s.m.Sessions["s1"]; sess.State != record.Parked {
		t.Fatalf("the same agent lifted the park: %+v", sess)
	}

	if err := os.WriteFile(bin, []byte("#!/bin/sh\n# fixed\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	s.prepare(t)
	var got record.Session
	s.db.View(func(tx *journal.Tx) error { got, _, _ = tx.Session("s1"); return nil })
	if got.State != record.ResumePending || got.CrashCount != 0 || got.Reason != resume.LiftReason || got.Fingerprint != nil {
		t.Fatalf("journaled after the agent changed: %+v, want resume_pending, crash_count 0, %q", got, resume.LiftReason)
	}
	s.prepare(t) // nothing parked: nothing to do, nothing hashed
	if sess := s.m.Sessions["s1"]; sess.State != record.ResumePending {
		t.Errorf("a second launch changed the lifted session: %+v", sess)
	}
}

// Only breaker parks carry a fingerprint: a park for a wait has none and
// never lifts.
func TestWaitingParkHasNoFingerprint(t *testing.T) {
	s := newRuleSupervisor(t)
	play(t, s, []step{mark("s1", marker.EventTurnBegin, "t1"),
		mark("s1", marker.EventWaiting, "t1"), killed(syscall.SIGKILL)})
	if sess := s.m.Sessions["s1"]; sess.State != record.Parked || sess.Fingerprint != nil || sess.ParkedBy != record.ParkedByWait {
		t.Errorf("a park for a wait: %+v, want no fingerprint", sess)
	}
}
