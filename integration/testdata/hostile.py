#!/usr/bin/env python3
"""A hostile agent for supervise's integrity tests (integration/integrity_test.go).

It speaks the notify protocol by hand (sd_notify datagrams over $NOTIFY_SOCKET)
and logs events to $TESTAGENT_LOG in the test agent's format. Modes:

  flood N              N turn-begins for new sessions (1 KiB prompts), as fast as
                       possible, then a barrier; logs "flooded N answer=<byte>", hangs
  fifo-outside PATH    opens the FIFO PATH (its reader is outside the tree and never
                       reads), fills it, sends turn-begin s1 with BARRIER=1 and the
                       FIFO as the barrier fd, logs "sent", exits 1
  pipe-inside          fills a pipe of its own, sends turn-begin s1 with BARRIER=1 and
                       the pipe's write end, keeps the read end, never pings, hangs
"""
import array
import errno
import fcntl
import os
import socket
import sys
import time


def log(event):
    path = os.environ.get("TESTAGENT_LOG")
    if not path:
        return
    line = "\nrun=%s pid=%d %s\t$\n" % (os.environ.get("SUPERVISE_RUN", ""), os.getpid(), event)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.write(fd, line.encode())
    os.close(fd)


def sock():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    addr = os.environ["NOTIFY_SOCKET"]
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    s.connect(addr)
    return s


def fill(fd):
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
    n = 0
    while True:
        try:
            n += os.write(fd, b"x" * 4096)
        except OSError as e:
            if e.errno == errno.EAGAIN:
                break
            raise
    fcntl.fcntl(fd, fcntl.F_SETFL, flags)  # the agent's own description: blocking again
    return n


def barrier_with(s, fd, session):
    msg = ("X_SUPERVISE_SESSION=%s\nX_SUPERVISE_EVENT=turn-begin\nX_SUPERVISE_TURN=t1\n" % session).encode()
    s.send(msg)
    s.sendmsg([b"BARRIER=1"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])


def hang():
    while True:
        time.sleep(3600)


def main():
    log("start")
    mode = sys.argv[1]
    s = sock()
    if mode == "flood":
        n = int(sys.argv[2])
        prompt = "x" * 1000
        for i in range(n):
            msg = ("X_SUPERVISE_SESSION=f%d\nX_SUPERVISE_EVENT=turn-begin\nX_SUPERVISE_TURN=t\nX_SUPERVISE_PROMPT=%s\n"
                   % (i, prompt)).encode()
            while True:
                try:
                    s.send(msg)
                    break
                except OSError as e:
                    if e.errno not in (errno.EAGAIN, errno.ENOBUFS):
                        raise
                    time.sleep(0.001)
        r, w = os.pipe()
        s.sendmsg([b"BARRIER=1"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [w]))])
        os.close(w)
        answer = os.read(r, 1).decode() or "none"
        log("flooded %d answer=%s" % (n, answer))
        hang()
    elif mode == "fifo-outside":
        fd = os.open(sys.argv[2], os.O_WRONLY)
        fill(fd)
        barrier_with(s, fd, "s1")
        log("sent")
        sys.exit(1)
    elif mode == "pipe-inside":
        r, w = os.pipe()
        fill(w)
        barrier_with(s, w, "s1")
        log("sent")
        hang()
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
