#!/usr/bin/env python3
"""Deliberately broken agents for the chaos tests: each gets one thing wrong.

Usage: broken_agent.py MODE [OUT]
  ignore-resume  never reads SUPERVISE_RESUME_FILE: after a crash it goes
                 straight on with a new turn
  no-resumed     takes the resume and finishes the turn, but never reports
                 resumed
  twice          takes the resume by starting the interrupted turn again
                 (turn-begin with the same turn id) instead of reporting resumed
  setsid         correct, but every turn starts a helper in a session of its
                 own (setsid) and leaves it running
  new-session    never reads SUPERVISE_RESUME_FILE, and opens a new session
                 in every process

It is built on the shipped example client, examples/python/agent.py.
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python"))
import agent  # noqa: E402


def fresh_turns(session, out, before_begin=None):
    while True:
        turn = "t%d" % agent._next_turn(out)
        if before_begin:
            before_begin()
        agent.turn_begin(session, turn, "append line " + turn)
        agent.barrier()
        agent.phase(session, "model")
        time.sleep(0.05)
        agent._tool(session, turn, "line " + turn, out, 0.05)
        agent.turn_end(session, turn, "completed")
        agent.barrier()


def main(mode, out="broken-agent.out"):
    session = "s1"
    if mode == "ignore-resume":
        fresh_turns(session, out)
    elif mode == "no-resumed":
        for item in agent.resumes():
            agent._tool(item["session"], item["turn"], item.get("prompt") or "", out, 0.05)
            agent.turn_end(item["session"], item["turn"], "completed")
            agent.barrier()
        fresh_turns(session, out)
    elif mode == "twice":
        for item in agent.resumes():
            turn = item["turn"]
            agent.turn_begin(item["session"], turn, item.get("prompt") or "")
            agent.barrier()
            agent._tool(item["session"], turn, item.get("prompt") or "", out, 0.05)
            agent.turn_end(item["session"], turn, "completed")
            agent.barrier()
        fresh_turns(session, out)
    elif mode == "new-session":
        fresh_turns("s-%d" % os.getpid(), out)
    elif mode == "setsid":
        def helper():
            subprocess.Popen(["sleep", "300"], start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        helper()
        agent.loop(session, "1", out)  # takes the resumes, correctly
        fresh_turns(session, out, before_begin=helper)
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.stderr.write(__doc__)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
