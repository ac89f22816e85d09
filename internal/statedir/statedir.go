// Package statedir keeps supervise's state directory private, as OpenSSH's
// StrictModes keeps ~/.ssh: the directory and everything supervise creates
// in it belong to the user running supervise, and nothing is written
// through a symbolic link.
//
// Prepare checks (or creates) the state dir itself and the directories
// above it. WriteFile creates a file relative to a directory fd with
// O_NOFOLLOW|O_EXCL and renames it into place, so a link planted at either
// name is replaced, never written through. Private does the same checks for
// a subdirectory (the notify socket's).
package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUnsafe is matched (errors.Is) by every *UnsafeError.
var ErrUnsafe = errors.New("unsafe state directory")

// UnsafeError says why a directory was refused and how to fix it.
type UnsafeError struct {
	Path string
	Why  string
	Fix  string
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("refusing %s: %s; %s", e.Path, e.Why, e.Fix)
}

// Is makes errors.Is(err, ErrUnsafe) true.
func (e *UnsafeError) Is(target error) bool { return target == ErrUnsafe }

// Prepare creates the state dir at path (missing directories 0700), or
// checks the existing one, and returns its real path (symbolic links
// resolved), which the caller must use from then on. It refuses, with an
// *UnsafeError naming the path and the fix:
//   - a state dir owned by another user, or writable by group or others;
//   - a directory above it owned by a user other than root and the caller,
//     or writable by others (or by a group not the caller's) without the
//     sticky bit (as /tmp has).
//
// A state dir the caller owns with a looser mode that only lets others read
// or enter it (0755) is tightened to 0700: nobody else can have put
// anything in it, and the state it holds is private. tightened reports it.
func Prepare(path string) (real string, tightened bool, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false, err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", false, fmt.Errorf("state dir: %w", err)
	}
	real, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return "", false, fmt.Errorf("state dir: %w", err)
	}
	if err := checkAncestors(real); err != nil {
		return "", false, err
	}
	fd, err := unix.Open(real, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false, fmt.Errorf("state dir: open %s: %w", real, err)
	}
	defer unix.Close(fd)
	tightened, err = checkOwn(fd, real, "--state-dir")
	return real, tightened, err
}

// checkOwn checks the directory open at fd: owned by the caller, not
// writable by group or others; other permission bits are removed.
func checkOwn(fd int, path, what string) (tightened bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	euid := uint32(os.Geteuid())
	if st.Uid != euid {
		return false, &UnsafeError{Path: path, Why: fmt.Sprintf("it is owned by uid %d, not by you (uid %d), who could then read and replace supervise's journal and sockets", st.Uid, euid),
			Fix: fmt.Sprintf("use a directory of your own (%s), or chown it to uid %d after checking its contents", what, euid)}
	}
	if st.Mode&0o022 != 0 {
		return false, &UnsafeError{Path: path, Why: fmt.Sprintf("it is writable by group or others (mode %04o), who could plant files or links in it", st.Mode&0o7777),
			Fix: "check that nothing was planted in it, then chmod 700 " + path}
	}
	if st.Mode&0o077 != 0 {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return false, fmt.Errorf("%s: tightening mode %04o to 0700: %w", path, st.Mode&0o7777, err)
		}
		return true, nil
	}
	return false, nil
}

// checkAncestors checks every directory above path (already free of
// symbolic links): owned by root or the caller, and not writable by others,
// or by a group other than the caller's own, unless sticky. Otherwise
// someone else could rename the state dir away and put their own in its
// place. (A Kubernetes volume with fsGroup is group-writable for the pod's
// own group: that is allowed.)
func checkAncestors(path string) error {
	euid, egid := uint32(os.Geteuid()), uint32(os.Getegid())
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		var st unix.Stat_t
		if err := unix.Lstat(dir, &st); err != nil {
			return fmt.Errorf("state dir: %s: %w", dir, err)
		}
		switch {
		case st.Uid != 0 && st.Uid != euid:
			return &UnsafeError{Path: path, Why: fmt.Sprintf("the directory above it, %s, is owned by uid %d, who could replace the state dir", dir, st.Uid),
				Fix: "put the state dir (--state-dir) under a directory owned by you or root"}
		case st.Mode&0o002 != 0 && st.Mode&unix.S_ISVTX == 0,
			st.Mode&0o020 != 0 && st.Mode&unix.S_ISVTX == 0 && st.Gid != egid:
			return &UnsafeError{Path: path, Why: fmt.Sprintf("the directory above it, %s, is writable by group or others (mode %04o) and not sticky, so they could replace the state dir", dir, st.Mode&0o7777),
				Fix: "chmod go-w " + dir + ", or put the state dir (--state-dir) elsewhere"}
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

// Private makes dir, a subdirectory of a prepared state dir, private: it is
// created 0700 if absent; an existing one must be a real directory (a
// symbolic link is refused, never followed or chmod'ed), owned by the
// caller and not writable by group or others, and is tightened to 0700.
func Private(dir string) error {
	if err := unix.Mkdir(dir, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%s: %w", dir, err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		kind := "not a directory"
		if fi, lerr := os.Lstat(dir); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			kind = "a symbolic link"
		}
		return &UnsafeError{Path: dir, Why: "it is " + kind + ", not the private directory supervise makes there",
			Fix: "remove it (supervise recreates it)"}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	defer unix.Close(fd)
	_, err = checkOwn(fd, dir, "--state-dir")
	return err
}

// WriteFile replaces the file name in directory dir with data, mode 0600,
// atomically, without following a symbolic link at any name it touches: a
// temporary file is created relative to the directory's fd with
// O_CREAT|O_EXCL|O_NOFOLLOW, written, synced and renamed over name. A stale
// temporary file (or a link planted at its name) is removed first.
func WriteFile(dir, name string, data []byte) error { return writeFile(dir, name, data, true) }

// WriteHint is WriteFile without the sync, for a file whose loss or
// emptiness after a power failure costs only a message: the journal's owner
// pid, which names the holder in a lock error (journal.LockedError). The
// sync was the start-up's one fsync outside the journal: an ext4 journal
// commit, 0.4 to 0.6 ms on every start (docs/performance.md, start-up).
// A reader still sees the old content or the new, never a part: the
// rename is the same.
func WriteHint(dir, name string, data []byte) error { return writeFile(dir, name, data, false) }

func writeFile(dir, name string, data []byte, sync bool) error {
	if strings.ContainsRune(name, '/') {
		return fmt.Errorf("statedir: %q is not a file name", name)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	tmp := "." + name + ".tmp"
	flags := unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(dfd, tmp, flags, 0o600)
	if errors.Is(err, unix.EEXIST) {
		// Left by a crash, or planted: unlink removes a link itself, never
		// its target.
		if err := unix.Unlinkat(dfd, tmp, 0); err != nil {
			return fmt.Errorf("remove %s: %w", filepath.Join(dir, tmp), err)
		}
		fd, err = unix.Openat(dfd, tmp, flags, 0o600)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", filepath.Join(dir, tmp), err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	_, werr := f.Write(data)
	if werr == nil && sync {
		werr = f.Sync()
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr == nil {
		werr = unix.Renameat(dfd, tmp, dfd, name)
	}
	if werr != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("write %s: %w", filepath.Join(dir, name), werr)
	}
	return nil
}
