package notify

import (
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// sendFlags make one send non-blocking, whatever the socket's own flags,
// and keep a reader that went away from raising SIGPIPE.
const sendFlags = unix.MSG_DONTWAIT | unix.MSG_NOSIGNAL

// fileType returns the S_IFMT bits of fd's mode. AT_STATX_DONT_SYNC: the
// type of an inode never changes, so the cached one is right, and asking a
// FUSE daemon or an NFS server for fresh attributes could wait on them.
func fileType(fd int) (uint32, error) {
	var stx unix.Statx_t
	err := retry(func() error {
		return unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE, &stx)
	})
	if err == nil {
		return uint32(stx.Mode) & unix.S_IFMT, nil
	}
	if !errors.Is(err, unix.ENOSYS) {
		return 0, err
	}
	var st unix.Stat_t // before Linux 4.11
	if err := retry(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return 0, err
	}
	return st.Mode & unix.S_IFMT, nil
}

// unixSocket reports whether the socket fd is a unix-domain one.
func unixSocket(fd int) bool {
	d, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	return err == nil && d == unix.AF_UNIX
}

// relayPipe is the pipe writePipe moves an answer's byte through, kept
// for the next answer: empty between answers.
type relayPipe struct {
	mu   sync.Mutex
	p    [2]int
	open bool
}

// writePipe writes b to the pipe or FIFO fd, or fails with EAGAIN if it is
// full, without changing fd's flags and without opening anything: the byte
// goes into a pipe of our own, and splice(2) moves it into fd with
// SPLICE_F_NONBLOCK, which makes a pipe-to-pipe splice fail with EAGAIN
// instead of waiting for room. Setting O_NONBLOCK on fd would change the
// agent's own open file description, which fd shares; reopening it through
// /proc/self/fd would run open(2)'s checks on the FIFO's file system
// (permission, revalidation), which a FUSE daemon or an NFS server answers
// at its own pace, and needs /proc. The pipe of our own is kept (making one
// and closing it was 3 of the 5 system calls of an answer, and a pipe inode
// each time), and a byte that could not be moved is read back out of it.
func (r *relayPipe) writePipe(fd int, b byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.open {
		if err := unix.Pipe2(r.p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
			return err
		}
		r.open = true
	}
	if err := retry(func() error { _, err := unix.Write(r.p[1], []byte{b}); return err }); err != nil {
		r.drop()
		return err
	}
	err := retry(func() error {
		_, err := unix.Splice(r.p[0], nil, fd, nil, 1, unix.SPLICE_F_NONBLOCK)
		return err
	})
	if err != nil {
		var left [1]byte
		if _, rerr := unix.Read(r.p[0], left[:]); rerr != nil {
			r.drop() // not known empty
		}
	}
	return err
}

// drop closes the pipe (r.mu held); the next answer makes a new one.
func (r *relayPipe) drop() {
	if r.open {
		unix.Close(r.p[0])
		unix.Close(r.p[1])
		r.open = false
	}
}

// close closes the pipe.
func (r *relayPipe) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drop()
	return nil
}
