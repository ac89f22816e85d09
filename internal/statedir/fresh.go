package statedir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Missing returns how many directories of path, counted up from path
// itself, do not exist yet: 0 when path exists, 1 when only path itself
// is missing, 2 when its parent is missing too, and so on. Prepare would
// create them; RemoveUnused removes them again.
func Missing(path string) int {
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0
	}
	n := 0
	for dir := abs; ; dir = filepath.Dir(dir) {
		if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
			return n
		}
		n++
		if dir == filepath.Dir(dir) {
			return n
		}
	}
}

// RemoveUnused removes the state dir real (Prepare's real path) that this
// supervise created and never used (the agent never started): the files
// supervise makes in it (the journal, its owner file, the control socket,
// the notify directory and its socket, the resume file), the directory,
// and the directories above it that Prepare created with it: levels is
// what Missing returned before Prepare (real has its symbolic links
// resolved; only the missing part of a path, which holds none, is
// counted). It removes nothing else: a directory that holds
// anything more is left, so a name someone else put there in the meantime
// is never lost. Errors are returned for the caller to log; the first one
// stops the removal.
func RemoveUnused(real string, levels int) error {
	notify := NotifyDir(real)
	if ents, err := os.ReadDir(notify); err == nil {
		for _, e := range ents {
			if e.Type()&fs.ModeSocket != 0 {
				if err := os.Remove(filepath.Join(notify, e.Name())); err != nil {
					return err
				}
			}
		}
	}
	for _, p := range []string{notify, ControlPath(real), ResumePath(real), JournalPath(real), JournalPath(real) + ".owner", JournalPath(real) + ".redo", VerifyFailedPath(real)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	for dir, i := real, 0; i < levels && dir != filepath.Dir(dir); dir, i = filepath.Dir(dir), i+1 {
		if err := os.Remove(dir); err != nil {
			return err
		}
	}
	return nil
}
