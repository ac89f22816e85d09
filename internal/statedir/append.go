package statedir

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// ErrNotRegular: a file supervise appends to is not a regular file (a FIFO, a device):
// a write to it could block.
var ErrNotRegular = errors.New("not a regular file")

// OpenAppend opens path, a file of a private state dir, for appending: it
// is created 0600 if missing, never through a symlink (O_NOFOLLOW), and
// must be a regular file (a FIFO would block a writer); a looser mode is
// tightened to 0600. It returns the file and its size.
func OpenAppend(path string) (*os.File, int64, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, &os.PathError{Op: "open", Path: path, Err: ErrNotRegular}
	}
	if fi.Mode().Perm() != 0o600 {
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return nil, 0, err
		}
	}
	return f, fi.Size(), nil
}
