#!/usr/bin/env python3
"""A minimal agent-side client for supervise's notify socket.

Standard library only. The protocol is sd_notify: one AF_UNIX datagram of
newline-separated KEY=VALUE lines to the socket named by NOTIFY_SOCKET.

Rules this client follows (see notify/doc.go in the repository):
  * a new socket per message, so it keeps working after the supervisor
    restarts (a connected socket would get ECONNREFUSED forever);
  * a send timeout, so a slow or stopped supervisor never blocks the agent;
  * ids are 1..256 bytes without control characters, and a prompt is
    flattened to one line and cut to 1024 bytes, so no value can add a line;
  * barrier() sends BARRIER=1 with the write end of a fresh pipe, closes its
    own copy and waits until the supervisor closes the other one, which it
    does once every earlier message is journaled.

Usage:
  agent.py notify STATE                      e.g. agent.py notify READY=1
  agent.py turn-begin SESSION TURN [PROMPT]
  agent.py turn-end SESSION TURN completed|failed|cancelled
  agent.py phase SESSION model|tool|idle [TOOL]
  agent.py waiting SESSION [TURN]
  agent.py resumed SESSION [TURN]
  agent.py closed SESSION
  agent.py heartbeat SESSION
  agent.py barrier [TIMEOUT_SECONDS]
  agent.py resumes                           print the resumes owed (SUPERVISE_RESUME_FILE)
  agent.py script [SESSION]                  a short scripted turn (demo)
  agent.py loop [SESSION] [TURNS] [OUT]      run turns on its own, resuming after a
                                             crash (for supervise chaos; TURNS 0 = forever)
"""

import json
import os
import select
import socket
import sys
import time
import unicodedata

SEND_TIMEOUT = 1.0  # seconds; a send never blocks longer
BARRIER_TIMEOUT = 5.0  # seconds
MAX_ID = 256  # bytes
MAX_PROMPT = 1024  # bytes


class NotifyError(Exception):
    """The message could not be sent or acknowledged."""


class Refused(NotifyError):
    """The barrier answered 0: supervise refused a message sent before it
    (a turn-begin in a parked session, one session too many, a bad id)."""


def _address():
    addr = os.environ.get("NOTIFY_SOCKET", "")
    if not addr:
        raise NotifyError("NOTIFY_SOCKET is not set")
    if addr[0] == "@":
        return "\0" + addr[1:]  # abstract socket
    if addr[0] != "/":
        raise NotifyError("unsupported NOTIFY_SOCKET %r" % addr)
    return addr


def _send(state, fds=(), timeout=SEND_TIMEOUT):
    """Send one datagram on a new socket, with fds attached (SCM_RIGHTS)."""
    data = state.encode("utf-8")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(_address())
            if fds:
                socket.send_fds(sock, [data], list(fds))
            else:
                sock.send(data)
        except OSError as e:  # includes TimeoutError when the queue is full
            raise NotifyError("send: %s" % e) from e


def _control(c):
    return unicodedata.category(c) == "Cc"


def _check_id(name, value):
    if not value or len(value.encode("utf-8")) > MAX_ID or any(map(_control, value)):
        raise ValueError("bad %s %r: want 1..%d bytes without control characters" % (name, value, MAX_ID))
    return value


def _flatten(text, limit):
    """One line without control characters, at most limit UTF-8 bytes."""
    text = "".join(" " if _control(c) else c for c in text)
    data = text.encode("utf-8", "replace")[:limit]
    return data.decode("utf-8", "ignore")  # drops a rune cut in half


def _marker(session, event, **fields):
    lines = ["X_SUPERVISE_SESSION=" + _check_id("session", session)]
    if event:
        lines.append("X_SUPERVISE_EVENT=" + event)
    for key, value in fields.items():
        if value:
            lines.append("X_SUPERVISE_%s=%s" % (key.upper(), value))
    return "\n".join(lines)


def notify(state, timeout=SEND_TIMEOUT):
    """Send raw sd_notify assignments, e.g. notify("READY=1")."""
    _send(state, timeout=timeout)


def barrier(timeout=BARRIER_TIMEOUT):
    """Wait until supervise has journaled every earlier message.

    supervise confirms by writing "1" to the pipe and closing it ("0" when it
    refused a message sent since the last barrier); a close without a byte
    means it died first, so nothing is known journaled."""
    deadline = time.monotonic() + timeout
    r, w = os.pipe()
    try:
        try:
            _send("BARRIER=1", fds=[w], timeout=min(SEND_TIMEOUT, timeout))
        finally:
            os.close(w)  # the supervisor's copy must be the last one
        poller = select.poll()
        poller.register(r, select.POLLIN)  # POLLHUP is always reported
        acked = refused = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise NotifyError("barrier timed out after %.1fs" % timeout)
            if not poller.poll(left * 1000):
                continue
            data = os.read(r, 64)
            if data:
                acked = acked or b"1" in data  # supervise writes "1" once journaled
                refused = refused or b"0" in data  # ... "0" if it refused a message
                continue
            # EOF: the supervisor closed its copy. "0": something this process
            # sent since its last barrier was refused (supervise's log says
            # why). Without a byte it died (or is a plain sd_notify manager):
            # nothing is known journaled.
            if refused:
                raise Refused("barrier answered 0: supervise refused a message sent before it")
            if not acked:
                raise NotifyError("barrier closed without confirmation")
            return
    finally:
        os.close(r)


def turn_begin(session, turn=None, prompt=None):
    notify(_marker(session, "turn-begin",
                   turn=turn and _check_id("turn", turn),
                   prompt=prompt and _flatten(prompt, MAX_PROMPT)))


def turn_end(session, turn, outcome):
    if outcome not in ("completed", "failed", "cancelled"):
        raise ValueError("bad outcome %r" % outcome)
    notify(_marker(session, "turn-end", turn=turn and _check_id("turn", turn), outcome=outcome))


def phase(session, name, tool=None):
    if name not in ("model", "tool", "idle"):
        raise ValueError("bad phase %r" % name)
    notify(_marker(session, "phase", phase=name, tool=tool and _check_id("tool", tool)))


def waiting(session, turn=None):
    notify(_marker(session, "waiting", turn=turn and _check_id("turn", turn)))


def resumed(session, turn=None):
    notify(_marker(session, "resumed", turn=turn and _check_id("turn", turn)))


def closed(session):
    notify(_marker(session, "closed"))


def heartbeat(session):
    """WATCHDOG=1 for the process, plus a liveness mark for session."""
    notify("WATCHDOG=1\n" + _marker(session, None))


def resumes():
    """The sessions supervise owes a resume, from SUPERVISE_RESUME_FILE: a
    list of {"session","turn","attempt","reason","phase","tool","prompt",
    "message"}, empty when nothing is owed. Take one with resumed(session,
    turn), send its "message" as a hidden turn, and when its "phase" was
    "tool", check whether that tool's side effect already happened before
    running it again."""
    path = os.environ.get("SUPERVISE_RESUME_FILE", "")
    if not path:
        return []
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return []


def script(session="demo"):
    """A short turn: every marker before a side effect is acknowledged.

    The tool phase is journaled before the tool runs: if the agent dies from
    then on, the resume says it died inside that tool, whose effect is
    unknown, instead of letting the model believe it was only thinking and
    run the tool again blindly."""
    turn = "t1"
    turn_begin(session, turn, "list the files\nand summarize them")
    barrier()
    print("barrier ok: turn-begin", flush=True)
    phase(session, "tool", "bash")
    barrier()  # journaled before the side effect, so a resume knows about it
    print("barrier ok: phase", flush=True)
    print("running: ls (pretend)", flush=True)
    turn_end(session, turn, "completed")
    barrier()  # do not exit before the end of the turn is journaled
    print("barrier ok: turn-end", flush=True)


def _effect_done(out, key):
    try:
        with open(out, encoding="utf-8") as f:
            return any(line.startswith(key) for line in f)
    except FileNotFoundError:
        return False


def _effect(out, key, prompt):
    """The tool's side effect: one line appended to OUT, synced."""
    with open(out, "a", encoding="utf-8") as f:
        f.write("%s %s\n" % (key, prompt))
        f.flush()
        os.fsync(f.fileno())


def _next_turn(out):
    """The next turn number, persisted before the turn begins, so a
    restarted agent never reuses the id of a turn it began before."""
    path = out + ".next"
    try:
        with open(path, encoding="utf-8") as f:
            n = int(f.read().strip() or "1")
    except FileNotFoundError:
        n = 1
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("%d\n" % (n + 1))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return n


def _tool(session, turn, prompt, out, tool_time):
    """The side-effecting tool, announced and journaled first: if the agent
    dies from here on, the resume says it died inside this tool."""
    phase(session, "tool", "append")
    barrier()
    time.sleep(tool_time)
    _effect(out, "%s/%s:" % (session, turn), prompt)
    phase(session, "model")


def loop(session="loop", turns="0", out="agent-loop.out", think_time=0.05, tool_time=0.05):
    """Run turns on its own: first take every resume owed (report resumed,
    check whether the interrupted tool's effect already happened, finish
    the turn), then run fresh turns t1, t2, ... until TURNS are done (0:
    until stopped). Each turn thinks, calls a side-effecting tool that
    appends a line to OUT, and ends completed; every marker before a side
    effect or an exit is acknowledged by a barrier."""
    turns = int(turns)
    for item in resumes():
        sess, turn = item["session"], item.get("turn") or ""
        resumed(sess, turn or None)
        barrier()  # journaled: a second death now counts against this turn
        print("resumed %s %s after %s in phase %s" % (sess, turn, item.get("reason"), item.get("phase")), flush=True)
        if _effect_done(out, "%s/%s:" % (sess, turn)):
            print("  the tool's effect is already there: not repeating it", flush=True)
        else:
            _tool(sess, turn, item.get("prompt") or "", out, tool_time)
        turn_end(sess, turn or None, "completed")
        barrier()
    done = 0
    base = session
    while turns == 0 or done < turns:
        turn = "t%d" % _next_turn(out)
        prompt = "append line %s" % turn
        turn_begin(session, turn, prompt)
        try:
            barrier()
        except Refused:
            # supervise refused the turn: the session is parked (only a
            # person lifts a park: `supervise resume`) or too many are open.
            # Never work in it behind supervise's back: take a new session.
            session = "%s-%s" % (base, turn)
            print("turn-begin refused (the session is parked?): continuing in a new session %s" % session, flush=True)
            turn_begin(session, turn, prompt)
            barrier()
        phase(session, "model")
        time.sleep(think_time)
        _tool(session, turn, prompt, out, tool_time)
        time.sleep(think_time)
        turn_end(session, turn, "completed")
        barrier()  # do not start the next turn (or exit) before this is journaled
        done += 1
        print("turn %s completed" % turn, flush=True)


def main(argv):
    commands = {
        "notify": (notify, 1, 1),
        "turn-begin": (turn_begin, 2, 3),
        "turn-end": (turn_end, 3, 3),
        "phase": (phase, 2, 3),
        "waiting": (waiting, 1, 2),
        "resumed": (resumed, 1, 2),
        "closed": (closed, 1, 1),
        "heartbeat": (heartbeat, 1, 1),
        "barrier": (lambda t=BARRIER_TIMEOUT: barrier(float(t)), 0, 1),
        "resumes": (lambda: print(json.dumps(resumes(), indent=2)), 0, 0),
        "script": (script, 0, 1),
        "loop": (loop, 0, 3),
    }
    if not argv or argv[0] not in commands:
        sys.stderr.write(__doc__)
        return 2
    fn, lo, hi = commands[argv[0]]
    args = argv[1:]
    if not lo <= len(args) <= hi:
        sys.stderr.write(__doc__)
        return 2
    try:
        fn(*args)
    except (NotifyError, ValueError, OSError) as e:
        sys.stderr.write("agent.py: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
