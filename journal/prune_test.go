package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
)

// TestPruneSessions is issue 12 finding 3 (--keep-sessions): at 100 000
// sessions (SUPERVISE_LONG=1; 10 000 otherwise), settled ones beyond keep are deleted oldest first; open ones
// are never deleted, however old.
func TestPruneSessions(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "journal.db"))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const opened, keep = 50, 1000
	settled := 10_000
	if os.Getenv("SUPERVISE_LONG") != "" {
		settled = 100_000 // about 20 s on a loaded 2-core machine
	}
	err := db.Update(func(tx *Tx) error {
		for i := range settled {
			st := record.Idle
			if i%2 == 1 {
				st = record.Closed
			}
			// ids do not sort by age: pruning must go by the update time.
			// (Keys go in sorted: bbolt inserts into one big node in a
			// single transaction in O(n) each, O(n²) for random order.)
			age := (i * 7919) % settled
			id := fmt.Sprintf("s%06d", i)
			if err := tx.PutSession(record.Session{ID: id, State: st, Updated: base.Add(time.Duration(age) * time.Second)}); err != nil {
				return err
			}
		}
		for i := range opened {
			// The oldest of all.
			if err := tx.PutSession(record.Session{ID: fmt.Sprintf("open%d", i), State: record.Parked, Updated: base.Add(-time.Hour)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := db.PruneSessions(keep, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pruned %d of %d sessions in %v", n, settled+opened, time.Since(start))
	if n != settled-keep {
		t.Errorf("pruned %d, want %d", n, settled-keep)
	}
	var left, open int
	oldest := base.Add(time.Duration(settled-keep) * time.Second)
	db.View(func(tx *Tx) error {
		return tx.ForEachSession(func(s record.Session) error {
			left++
			if s.State.Open() {
				open++
			} else if s.Updated.Before(oldest) {
				t.Errorf("session %s (updated %v) kept; older than the newest %d", s.ID, s.Updated, keep)
			}
			return nil
		})
	})
	if left != keep+opened || open != opened {
		t.Errorf("%d sessions left (%d open), want %d (%d open)", left, open, keep+opened, opened)
	}
	if n, _ := db.PruneSessions(keep, 0); n != 0 {
		t.Errorf("a second prune deleted %d", n)
	}
}

// The brief scan reads the same state and update time as a full decode,
// even for ids and text made to look like those fields.
func TestSessionBrief(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "journal.db"))
	at := time.Date(2026, 12, 1, 4, 5, 6, 789, time.UTC)
	want := map[string]record.Session{}
	for i, s := range []record.Session{
		{ID: `a","state":"parked`, State: record.Closed, Updated: at},
		{ID: "b", State: record.Parked, Reason: `x,"updated":"2001-01-01T00:00:00Z`, Updated: at.Add(time.Second)},
		{ID: "c", State: record.Idle, Prompt: `,"state":"in_turn"`},
		{ID: `d\"`, State: record.Stopped, Updated: at.Add(-time.Hour)},
	} {
		want[s.ID] = s
		_ = i
	}
	db.Update(func(tx *Tx) error {
		for _, s := range want {
			if err := tx.PutSession(s); err != nil {
				return err
			}
		}
		return nil
	})
	n := 0
	db.View(func(tx *Tx) error {
		return tx.ForEachSessionBrief(func(b SessionBrief, full func() (record.Session, error)) error {
			n++
			w := want[b.ID]
			if b.State != w.State || !b.Updated.Equal(w.Updated) {
				t.Errorf("%q: brief %v %v, want %v %v", b.ID, b.State, b.Updated, w.State, w.Updated)
			}
			if s, err := full(); err != nil || s.ID != b.ID || s.Reason != w.Reason {
				t.Errorf("%q: full %+v %v", b.ID, s, err)
			}
			return nil
		})
	})
	if n != len(want) {
		t.Errorf("%d sessions scanned, want %d", n, len(want))
	}
}
