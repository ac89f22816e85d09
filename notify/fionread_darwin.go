package notify

// fionread is FIONREAD, _IOR('f', 127, int) in <sys/filio.h>: the bytes
// queued on a socket. golang.org/x/sys/unix does not define it for darwin.
const fionread = 0x4004667f
