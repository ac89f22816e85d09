package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A replaced journal is never data loss.
//
// When the file at the journal's name is no longer the open one (replaced:
// a copy renamed over it, which is what rsync, a backup restore, sed -i or
// an editor do; or removed), the open file is the only one that holds every
// commit, and once supervise exits, an unlinked file is gone. A copy made
// while supervise commits is torn (its pages come from different commits),
// so the next start would move it aside whole, and every session in it
// with it. So before the journal is poisoned (and so before supervise's
// last resort exits), the open file is kept under a new name in the state
// dir, journal.db.kept-<UTC time>:
//
//   - a hard link to the open file, from its descriptor
//     (linkat of /proc/self/fd/N), when the kernel allows it: the file
//     still has a name somewhere on the same filesystem (moved, not
//     replaced);
//   - otherwise (the usual case: the last name was renamed over or
//     removed, and a file without links cannot be linked again), a copy
//     written from the open handle in one read transaction (bbolt's
//     Tx.WriteTo: a consistent journal, both meta pages pointing at the
//     last commit), to a new file made with O_EXCL, fsynced, renamed to
//     its name, and the directory fsynced.
//
// bbolt's writer lock is held while it is kept: a logged commit still
// being written (redo.go) ends first, and no commit starts, so the kept
// file holds every commit the journal acknowledged. The state dir is the
// directory the journal was opened in, by a descriptor taken at Open: a
// state dir renamed away and replaced by a link is not followed. Every
// file is created with O_EXCL and O_NOFOLLOW, and renamed, never opened
// through a name: a link planted in the state dir is never followed.
//
// The keep is done once, by the first of: a commit that finds the name
// changed (Update, UpdateLogged, the commit of a logged transaction),
// CheckName (supervise calls it every second), Close. If it fails (the
// state dir was removed too, the disk is full), the journal is poisoned
// all the same (fail closed) and the error says so: then what only the
// open file held is lost with the process.
//
// The next start (OpenState, adoptKept) recovers from every kept file
// before it opens the journal, in the order they were kept:
//
//   - a kept file that is not a regular file (a link planted under that
//     name) is left alone and not followed; one that is damaged is moved
//     aside as any damaged journal (Quarantine);
//   - the name holds nothing: the kept file becomes the journal;
//   - the name holds a damaged journal or something that is not a
//     journal (the torn copy): it is moved aside (Quarantine) and the
//     kept file becomes the journal;
//   - the name holds an intact journal: the newer by its last committed
//     transaction (bbolt's transaction id) wins; on a tie the kept file,
//     which supervise wrote from the file it had open, wins. The other
//     is renamed to journal.db.superseded-<UTC time>, with its redo slot
//     if it has one: never deleted.
//
// Each step is logged with what was done and why. A kept or named file
// in use by a running supervise (its lock) stops the start with ErrLocked;
// one this release cannot read (a newer schema, an I/O error) stops it
// with that error, touching nothing.

const (
	keptInfix       = ".kept-"
	supersededInfix = ".superseded-"
	asideTime       = "20060102T150405.000000000Z"
)

// keepState is what was kept of an open journal, once.
type keepState struct {
	path string // the kept file, "" if none
	err  error
}

// replaced handles a commit or a check that found the journal's name no
// longer holding the open file (cause wraps ErrReplaced): the open file is
// kept (above), then the journal is poisoned. It returns the fault.
func (db *DB) replaced(cause error) error {
	if db.Fault() == nil {
		k := db.keepOpen()
		switch {
		case k.err != nil:
			cause = fmt.Errorf("%w; keeping the open journal failed, so what only it holds is lost when supervise exits: %v", cause, k.err)
		case k.path != "":
			cause = fmt.Errorf("%w; the open journal was kept as %s, and the next start recovers from it", cause, k.path)
		}
	}
	return db.poison(cause)
}

// keepOpen keeps the open file (once) and returns what it did.
func (db *DB) keepOpen() keepState {
	db.keepOnce.Do(func() {
		db.kept = db.keep()
		switch {
		case db.log == nil:
		case db.kept.err != nil:
			db.log.Error("journal: its name no longer holds the open journal, and keeping the open file failed: commits only it holds are lost when supervise exits",
				"path", db.path, "err", db.kept.err)
		default:
			db.log.Warn("journal: its name no longer holds the open journal: kept the open file, with every commit acknowledged, for the next start to recover from",
				"path", db.path, "kept", db.kept.path)
		}
	})
	return db.kept
}

// keep writes the open journal under a new name in the state dir: a link
// from its descriptor if the kernel allows it, a consistent copy if not.
func (db *DB) keep() (k keepState) {
	if db.dir == nil || db.file == nil {
		return keepState{err: errors.New("no handle on the open journal or its directory")}
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			k = keepState{err: fmt.Errorf("reading the open journal: %v", r)}
		}
	}()
	// The writer lock: a logged commit in flight ends first, and no
	// other starts until the kept file is whole.
	wtx, err := db.b.Begin(true)
	if err != nil {
		return keepState{err: err}
	}
	defer wtx.Rollback()
	name := filepath.Base(db.path) + keptInfix + time.Now().UTC().Format(asideTime)
	dirfd := int(db.dir.Fd())
	err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(db.file.Fd())), dirfd, name, unix.AT_SYMLINK_FOLLOW)
	if err != nil {
		rtx, err := db.b.Begin(false)
		if err != nil {
			return keepState{err: err}
		}
		err = copyInto(dirfd, name, func(f *os.File) error { _, err := rtx.WriteTo(f); return err })
		rtx.Rollback()
		if err != nil {
			return keepState{err: err}
		}
	}
	if err := db.dir.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return keepState{err: fmt.Errorf("sync the state dir: %w", err)}
	}
	return keepState{path: filepath.Join(dirPath(db.dir), name)}
}

// copyInto writes a new file name in the directory dirfd with write: made
// under a temporary name with O_EXCL (a planted link is refused, never
// followed), fsynced, then renamed to name.
func copyInto(dirfd int, name string, write func(*os.File) error) error {
	tmp := name + ".tmp"
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	err = write(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, name)
	}
	if err != nil {
		unix.Unlinkat(dirfd, tmp, 0) // our own unfinished copy
		return fmt.Errorf("copy the open journal to %s: %w", name, err)
	}
	return nil
}

// dirPath is where the directory d is now, for the log: the kernel's
// name for it (it may have been renamed since it was opened), else the
// name it was opened by.
func dirPath(d *os.File) string {
	if p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(d.Fd()))); err == nil && filepath.IsAbs(p) {
		return p
	}
	return d.Name()
}

// isAside reports whether name is path's base followed by infix and a
// time in asideTime's layout.
func isAside(base, infix, name string) bool {
	rest, ok := strings.CutPrefix(name, base+infix)
	if !ok {
		return false
	}
	_, err := time.Parse(asideTime, rest)
	return err == nil
}

// adoptKept recovers from every journal kept in the state dir dir (see
// above), before the journal at path is opened.
func adoptKept(dir, path string, log *slog.Logger) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	base := filepath.Base(path)
	for _, e := range ents { // in name order: the order they were kept
		if !isAside(base, keptInfix, e.Name()) {
			continue
		}
		kept := filepath.Join(dir, e.Name())
		if !e.Type().IsRegular() {
			log.Warn("journal: a file named as a kept journal is not a regular file: left alone, not followed", "path", kept)
			continue
		}
		if err := adoptOne(path, kept, log); err != nil {
			return err
		}
	}
	return nil
}

// look opens the journal at p read-only, checks every page and the records
// a start reads, and returns its last committed transaction.
func look(p string) (txid int, fi os.FileInfo, err error) {
	fi, err = os.Lstat(p)
	if err != nil {
		return 0, nil, err
	}
	db, err := Open(p, Options{ReadOnly: true})
	if err != nil {
		return 0, fi, err
	}
	defer db.Close()
	if err := db.Verify(); err != nil {
		return 0, fi, err
	}
	if err := db.CheckRecords(); err != nil {
		return 0, fi, err
	}
	err = db.View(func(tx *Tx) error { txid = tx.tx.ID(); return nil })
	return txid, fi, err
}

// damaged reports whether err says a file is no journal to use: damaged, or
// not a journal at all.
func damaged(err error) bool { return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotJournal) }

// adoptOne recovers from the kept journal kept, against the journal at
// path (see the rules above).
func adoptOne(path, kept string, log *slog.Logger) error {
	now := time.Now()
	ktx, kfi, err := look(kept)
	switch {
	case damaged(err):
		moved, qerr := Quarantine(kept, now)
		if qerr != nil {
			return fmt.Errorf("%v; moving it aside failed: %w", err, qerr)
		}
		log.Error("journal: a journal kept when its name was replaced is damaged: moved it aside; the journal at the name is used",
			"err", err, "moved_to", moved)
		return nil
	case err != nil:
		return fmt.Errorf("journal kept at %s (from a journal replaced under supervise): %w", kept, err)
	}
	nfi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := install(kept, path); err != nil {
			return err
		}
		log.Warn("journal: recovered the journal kept when its name was replaced or removed: the name held nothing",
			"kept", kept, "path", path, "txid", ktx)
		return nil
	case err != nil:
		return err
	case os.SameFile(nfi, kfi):
		// A recovery cut short between its link and its unlink: one file,
		// two names.
		return removeName(kept, path)
	}
	ntx, _, nerr := look(path)
	switch {
	case damaged(nerr):
		moved, qerr := Quarantine(path, now)
		if qerr != nil {
			return fmt.Errorf("%v; moving it aside failed: %w", nerr, qerr)
		}
		if err := install(kept, path); err != nil {
			return err
		}
		log.Warn("journal: recovered the journal kept when its name was replaced: the file put at the name is damaged (a copy made while supervise committed is torn), so it was renamed aside",
			"kept", kept, "path", path, "txid", ktx, "damaged", nerr, "renamed_to", moved)
		return nil
	case nerr != nil:
		return fmt.Errorf("%w (a journal kept when it was replaced, %s, waits beside it; nothing was changed)", nerr, kept)
	case ntx > ktx:
		moved, err := aside(kept, path, supersededInfix, now)
		if err != nil {
			return err
		}
		log.Warn("journal: a journal kept when its name was replaced is older than the intact journal at the name (by its last committed transaction): the one at the name is used, the kept one renamed aside",
			"path", path, "txid", ntx, "kept_txid", ktx, "renamed_to", moved)
		return nil
	}
	moved, err := aside(path, path, supersededInfix, now)
	if err != nil {
		return err
	}
	if err := install(kept, path); err != nil {
		return err
	}
	log.Warn("journal: recovered the journal kept when its name was replaced: it is as new as or newer than the intact journal put at the name (by its last committed transaction), which was renamed aside",
		"kept", kept, "path", path, "txid", ktx, "replaced_txid", ntx, "renamed_to", moved)
	return nil
}

// aside renames the file at p, and its redo slot if any, to the journal's
// path+infix+time, and returns the new name. It never deletes or rewrites
// a file.
func aside(p, path, infix string, now time.Time) (string, error) {
	dst := path + infix + now.UTC().Format(asideTime)
	if err := os.Rename(p, dst); err != nil {
		return "", err
	}
	_ = os.Rename(redoPath(p), redoPath(dst))
	os.Remove(ownerPath(p))
	return dst, syncDir(filepath.Dir(p))
}

// install makes the kept file the journal at path, which holds nothing: a
// link (which never replaces a name, so a journal a concurrent start made
// there is not overwritten), then the kept name removed, then the
// directory synced.
func install(kept, path string) error {
	if err := os.Link(kept, path); err != nil {
		return fmt.Errorf("recover the kept journal %s: %w", kept, err)
	}
	return removeName(kept, path)
}

// removeName removes kept, a second name of the journal at path, and syncs
// the directory.
func removeName(kept, path string) error {
	if err := os.Remove(kept); err != nil {
		return fmt.Errorf("recover the kept journal %s: %w", kept, err)
	}
	return syncDir(filepath.Dir(path))
}
