package journal_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
)

// A journal is one file: writes happen in Update (committed and fsynced
// when fn returns nil), reads in View. A second opener of the same file
// fails at once with ErrLocked instead of queueing.
func Example() {
	dir, err := os.MkdirTemp("", "journal-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")
	db, err := journal.Open(path, journal.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()

	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	err = db.Update(func(tx *journal.Tx) error {
		return tx.PutSession(record.Session{ID: "s1", State: record.InTurn, Turn: "t1", TurnStarted: now, Updated: now})
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	db.View(func(tx *journal.Tx) error {
		open, err := tx.OpenSessions()
		for _, s := range open {
			fmt.Println("open:", s.ID, s.State, s.Turn)
		}
		return err
	})

	_, err = journal.Open(path, journal.Options{})
	fmt.Println("second open locked:", errors.Is(err, journal.ErrLocked))
	// Output:
	// open: s1 in_turn t1
	// second open locked: true
}
