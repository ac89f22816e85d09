package notify

import "syscall"

// dgramSocket opens an unbound unix datagram socket, close-on-exec and
// non-blocking.
func dgramSocket() (int, error) {
	return syscall.Socket(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC|syscall.SOCK_NONBLOCK, 0)
}
