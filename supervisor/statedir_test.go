package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The marker a damaged journal leaves (journal.db.verify-failed) is never
// written through a link planted at its name (issue 12, finding 1).
func TestVerifyFailedMarkerNotThroughLink(t *testing.T) {
	s := newTestSupervisor(t)
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("victim\n"), 0o644)
	path := VerifyFailedPath(s.cfg.StateDir)
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	s.fatal(errors.New("page 7: bad checksum"))
	if b, _ := os.ReadFile(victim); string(b) != "victim\n" {
		t.Errorf("victim now holds %q", b)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("marker %v %v, want a regular file", fi, err)
	}
}
