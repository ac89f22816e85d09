// OpenState holds supervise's policy for trusting the journal it finds in a
// state dir. After a clean stop the journal is used as it is.
// After an unclean one (the last supervise died, or a background check
// failed) every page is checked before anything in it is believed: inline
// for a journal up to VerifyInlineLimit, in the background beyond (the caller
// then holds automatic resumes until the check passes). A damaged journal
// is moved aside, never rewritten in place, and a fresh one is started
// with a loud error: nothing is resumed from state that cannot be verified.
// A journal a newer release wrote (ErrSchema) is refused and left
// as it is; a schema record no release could have written is damage
// (ErrCorrupt) and is moved aside like any other.

package journal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/supervise-dev/supervise/internal/failpoint"
	"github.com/supervise-dev/supervise/internal/statedir"
)

// VerifyInlineLimit is the journal size up to which the full check after an
// unclean stop runs before the first launch (about 50 ms); a larger
// journal is checked in the background, with automatic resumes held
// meanwhile.
const VerifyInlineLimit = 64 << 20

// verifyInlineLimit is VerifyInlineLimit, or the test failpoint when it is set.
func verifyInlineLimit(fp failpoint.Points) int64 {
	if fp.HasVerifyInline {
		return fp.VerifyInline
	}
	return VerifyInlineLimit
}

// OpenState opens the state dir's journal under the policy above. fp are the
// failpoints supervise read at start (the zero value in production).
// verifyLater reports that the full check is still due and must run in the
// background (supervisor.Config.VerifyInBackground). The caller closes db.
func OpenState(stateDir string, fp failpoint.Points, log *slog.Logger) (db *DB, verifyLater bool, err error) {
	path := statedir.JournalPath(stateDir)
	failed := statedir.VerifyFailedPath(stateDir)
	// A journal kept when its name was replaced under the last supervise
	// first (keep.go).
	if err := adoptKept(stateDir, path, log); err != nil {
		return nil, false, err
	}
	db, err = Open(path, Options{Log: log, Inline: true})
	if err == nil {
		var clean bool
		db.View(func(tx *Tx) error { clean = tx.Clean(); return nil })
		_, mustCheck := os.Stat(failed)
		fi, _ := os.Stat(path)
		switch {
		case clean && mustCheck != nil:
		case mustCheck == nil || fi == nil || fi.Size() <= verifyInlineLimit(fp):
			// The last supervisor died (or a background check failed):
			// check every page before trusting anything.
			err = db.Verify()
		default:
			verifyLater = true
		}
		if err == nil {
			err = db.CheckRecords()
		}
		if err == nil {
			if !verifyLater {
				os.Remove(failed)
			}
			return db, verifyLater, nil
		}
		db.Close()
	}
	if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotJournal) {
		return nil, false, err
	}
	moved, qerr := Quarantine(path, time.Now())
	if qerr != nil {
		return nil, false, fmt.Errorf("%v; moving it aside failed: %w", err, qerr)
	}
	os.Remove(failed)
	log.Error("journal is damaged: moved it aside and started a fresh one; no session will be resumed automatically from it",
		"err", err, "moved_to", moved)
	db, err = Open(path, Options{Log: log, Inline: true})
	return db, false, err
}
