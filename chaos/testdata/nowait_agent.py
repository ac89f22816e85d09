#!/usr/bin/env python3
"""An agent that does not wait at its tool's end, for supervise chaos's
missed kills.

Usage: nowait_agent.py OUT

Each turn begins and enters its tool with a barrier (journaled before the
side effect), appends a line to OUT, then sends `phase model` (leaving the
tool: a tool-end kill point) and its turn-end back to back, on sockets
connected beforehand, and only then waits for a barrier. A kill at the tool's
end lands after the turn-end was sent: supervise journals it at the death,
and the kill interrupted no turn. A correct agent all the same (it resumes
what it is handed), but not one a tool-end kill can land in.

It is built on the shipped example client, examples/python/agent.py.
"""

import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python"))
import agent  # noqa: E402


def back_to_back(*states):
    """Send each state on its own socket, connected first, with nothing in
    between the sends."""
    socks = []
    try:
        for _ in states:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            socks.append(s)
            s.settimeout(agent.SEND_TIMEOUT)
            s.connect(agent._address())
        for s, state in zip(socks, states):
            s.send(state.encode("utf-8"))
    finally:
        for s in socks:
            s.close()


def main(out):
    for item in agent.resumes():
        sess, turn = item["session"], item.get("turn") or ""
        agent.resumed(sess, turn or None)
        agent.barrier()
        agent.turn_end(sess, turn or None, "completed")
        agent.barrier()
    session = "s1"
    while True:
        turn = "t%d" % agent._next_turn(out)
        agent.turn_begin(session, turn, "append a line")
        agent.barrier()
        agent.phase(session, "tool", "append")
        agent.barrier()
        agent._effect(out, "append:%s/%s" % (session, turn), "line")
        back_to_back(agent._marker(session, "phase", phase="model"),
                     agent._marker(session, "turn-end", turn=turn, outcome="completed"))
        agent.barrier()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.stderr.write(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
