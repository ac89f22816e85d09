package notify

import "golang.org/x/sys/unix"

// fionread is the ioctl that reports the bytes queued on a socket
// (SIOCINQ, the same number as FIONREAD).
const fionread = unix.SIOCINQ
