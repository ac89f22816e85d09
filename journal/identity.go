package journal

import (
	"errors"
	"fmt"
	"os"
)

// The journal is the file at its name. bbolt writes through the file
// descriptor it opened; a journal.db replaced under it (cp x && mv x
// journal.db, which is what sed -i, an editor or rsync do; or the state dir
// swapped for a symbolic link to a stale copy) would take every later
// commit into a file no start will read, and every barrier would still be
// answered '1'. So after each commit, before Update returns (and so before
// any barrier it carries is acknowledged), the file at the name is compared
// with the open one by device and inode: the open file's identity is taken
// once with fstat when the journal opens (a descriptor's inode never
// changes), and each commit costs one lstat of the name. Any difference, or
// a name that is gone or cannot be read, keeps the open file under a new
// name in the state dir and then poisons the journal (ErrFault, Faulted):
// its owner stops the agent and exits 1, and the next start recovers from
// the kept file (keep.go).
//
// The check cannot see a copy read before a commit and renamed over the
// name after that commit's check: such a commit is in the open file only.
// The next commit (or CheckName, which supervise calls every second) sees
// the swap and keeps the open file, with those commits; see
// docs/threat-model.md.

// ErrReplaced is wrapped by the fault of a journal whose name no longer
// holds the open file.
var ErrReplaced = errors.New("the file at the journal's name is not the open journal")

// ident is the identity of the open journal file: what fstat said at open.
type ident struct {
	fi os.FileInfo
}

// identify records f's identity and checks that path names it.
func identify(f *os.File, path string) (ident, error) {
	fi, err := f.Stat()
	if err != nil {
		return ident{}, fmt.Errorf("journal %s: fstat: %w", path, err)
	}
	id := ident{fi: fi}
	if err := id.check(path); err != nil {
		return ident{}, err
	}
	return id, nil
}

// check returns an error wrapping ErrReplaced unless path names the file
// recorded in id. The final name is not followed (a link planted there is
// not the journal); the directories on the way are, as the start that
// reads the journal would follow them.
func (id ident) check(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrReplaced, err)
	}
	if !os.SameFile(id.fi, fi) {
		return fmt.Errorf("%w: %s is another file now (replaced, renamed over, or its directory swapped)", ErrReplaced, path)
	}
	return nil
}

// CheckName checks that the journal's name (and its redo slot's, redo.go)
// still holds the open file, as every commit does, and poisons the journal
// if it does not (see Faulted): for an owner that wants a swap noticed
// while it commits nothing. It returns the journal's fault, nil if none. A read-only
// journal is not checked.
func (db *DB) CheckName() error {
	if err := db.Fault(); err != nil {
		return err
	}
	if db.readOnly || db.ident.fi == nil {
		return nil
	}
	if err := db.ident.check(db.path); err != nil {
		return db.replaced(err)
	}
	if r := db.redo; r != nil {
		if err := r.check(); err != nil {
			return db.poison(err)
		}
	}
	return nil
}
