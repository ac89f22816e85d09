package integration

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
)

// Issue 46, B5 (fault matrix case 65): a journal copied slowly, as rsync or
// a backup would, while supervise commits, then renamed over journal.db.
// The copy is torn (its first pages from before the last commits, the
// rest from after), so a start that reads only what is at the name moves
// it aside whole. supervise keeps the file it has open before it exits,
// and the next start recovers from it: no acknowledged turn-end, and none
// of the older sessions, is lost.

// seedJournal makes the state dir's journal with n settled sessions
// (old0, old1, ...), as a long life leaves it, closed cleanly.
func seedJournal(t *testing.T, stateDir string, n int) {
	t.Helper()
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	db, err := journal.Open(filepath.Join(stateDir, "journal.db"), journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := 0; i < n; i += 1000 {
		err := db.Update(func(tx *journal.Tx) error {
			for j := i; j < min(i+1000, n); j++ {
				s := record.Session{ID: fmt.Sprintf("old%d", j), State: record.Idle, Turn: "t", Outcome: "completed",
					Updated: time.Now()}
				if err := tx.PutSession(s); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Update(func(tx *journal.Tx) error { return tx.SetClean(true) }); err != nil {
		t.Fatal(err)
	}
}

// slowCopy copies src to dst at about rate bytes a second, in 64 KiB
// pieces; after the first piece it waits until mid() returns (the agent
// commits meanwhile), so that the copy is torn whatever the machine's
// speed.
func slowCopy(t *testing.T, src, dst string, rate int, mid func()) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	const piece = 64 << 10
	buf := make([]byte, piece)
	for i := 0; ; i++ {
		n, err := in.Read(buf)
		if n > 0 {
			if _, err := out.Write(buf[:n]); err != nil {
				t.Fatal(err)
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			mid()
		}
		time.Sleep(time.Second * piece / time.Duration(rate))
	}
}

func TestB5TornCopyRenamedOverKept(t *testing.T) {
	t.Parallel()
	const older = 5000
	e := newEnv(t)
	seedJournal(t, e.stateDir, older)
	path := filepath.Join(e.stateDir, "journal.db")
	script := filepath.Join(e.dir, "agent.sh")
	os.WriteFile(script, []byte(turnLoop), 0o700)
	acks := filepath.Join(e.dir, "acks")
	e.set("SV="+superviseBin, "ACKS="+acks, "GATE="+filepath.Join(e.dir, "gate"), "PAUSED="+filepath.Join(e.dir, "paused"))
	sv := e.start("run", "--state-dir", e.stateDir, "--", "sh", script)
	waitFor(t, 60*time.Second, "20 acknowledged turn-ends", func() bool { return len(acked(acks)) >= 20 })

	tmp := filepath.Join(e.stateDir, ".journal.db.rsync")
	var during int
	slowCopy(t, path, tmp, 4<<20, func() {
		begun := len(acked(acks))
		waitFor(t, 60*time.Second, "10 more turn-ends while the copy is read", func() bool {
			return len(acked(acks)) >= begun+10 || !sv.running()
		})
		during = len(acked(acks)) - begun
	})
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if code := sv.wait(60 * time.Second); code != 1 {
		t.Errorf("supervise exit code %d after its journal was replaced, want 1", code)
	}
	if !strings.Contains(sv.stderr(), "kept the open file") {
		t.Errorf("supervise does not say it kept the open journal:\n%s", sv.stderr())
	}
	waitFor(t, 20*time.Second, "the agent's tree to be gone", func() bool { return len(e.tagged()) == 0 })
	all := acked(acks)

	next := e.start("run", "--state-dir", e.stateDir, "--", "true")
	if c := next.wait(60 * time.Second); c != 0 {
		t.Fatalf("the restart exited %d, want 0:\n%s", c, next.stderr())
	}
	if !strings.Contains(next.stderr(), "recovered the journal kept") {
		t.Errorf("the restart does not say it recovered the kept journal:\n%s", next.stderr())
	}
	db, err := journal.Open(path, journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ended, old := map[string]bool{}, 0
	db.View(func(tx *journal.Tx) error {
		return forEachSession(tx, func(s record.Session) {
			switch {
			case strings.HasPrefix(s.ID, "old"):
				old++
			case s.Outcome == "completed":
				ended[s.ID] = true
			}
		})
	})
	missing := 0
	for _, id := range all {
		if !ended[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged turn-ends missing after the restart", missing, len(all))
	}
	if old != older {
		t.Errorf("%d of %d older sessions in the journal after the restart", old, older)
	}
	var aside []string
	ents, _ := os.ReadDir(e.stateDir)
	for _, f := range ents {
		if strings.Contains(f.Name(), ".corrupt-") || strings.Contains(f.Name(), ".superseded-") {
			aside = append(aside, f.Name())
		}
	}
	if len(aside) == 0 {
		t.Errorf("the copy renamed over the journal is not kept aside")
	}
	t.Logf("%d turn-ends acknowledged (%d while the copy was read), %d older sessions; after the restart %d missing; the copy renamed aside as %v",
		len(all), during, older, missing, aside)
}

// The same for journal.db removed while the agent ends turns: supervise
// finds the name gone, stops, and keeps the open file on its way out.
func TestB5JournalRemovedKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	seedJournal(t, e.stateDir, 1000)
	path := filepath.Join(e.stateDir, "journal.db")
	script := filepath.Join(e.dir, "agent.sh")
	os.WriteFile(script, []byte(turnLoop), 0o700)
	acks := filepath.Join(e.dir, "acks")
	e.set("SV="+superviseBin, "ACKS="+acks, "GATE="+filepath.Join(e.dir, "gate"), "PAUSED="+filepath.Join(e.dir, "paused"))
	sv := e.start("run", "--state-dir", e.stateDir, "--", "sh", script)
	waitFor(t, 60*time.Second, "20 acknowledged turn-ends", func() bool { return len(acked(acks)) >= 20 })
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if code := sv.wait(60 * time.Second); code != 1 {
		t.Errorf("supervise exit code %d after its journal was removed, want 1", code)
	}
	waitFor(t, 20*time.Second, "the agent's tree to be gone", func() bool { return len(e.tagged()) == 0 })
	all := acked(acks)
	next := e.start("run", "--state-dir", e.stateDir, "--", "true")
	if c := next.wait(60 * time.Second); c != 0 {
		t.Fatalf("the restart exited %d, want 0:\n%s", c, next.stderr())
	}
	db, err := journal.Open(path, journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ended, old := map[string]bool{}, 0
	db.View(func(tx *journal.Tx) error {
		return forEachSession(tx, func(s record.Session) {
			if strings.HasPrefix(s.ID, "old") {
				old++
			} else if s.Outcome == "completed" {
				ended[s.ID] = true
			}
		})
	})
	missing := 0
	for _, id := range all {
		if !ended[id] {
			missing++
		}
	}
	if missing > 0 || old != 1000 {
		t.Errorf("after the restart: %d of %d acknowledged turn-ends and %d of 1000 older sessions missing\n%s",
			missing, len(all), 1000-old, sv.stderr())
	}
}
