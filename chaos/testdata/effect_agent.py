#!/usr/bin/env python3
"""Agents that declare their side effects, for the effect-once and turn-fresh
checks of supervise chaos.

Usage: effect_agent.py MODE OUT
  redo        each turn appends a line to OUT (its side effect) and declares
              it done with an effect marker; a resumed turn runs the tool
              again: the effect is done twice
  idempotent  the same agent, but a resumed turn skips the effects its resume
              file entry lists as done ("effects")
  reuse-ids   resumes correctly, but its turn ids restart at t1 in every
              process
  renumber    idempotent, and it numbers the continuation of a resumed turn
              afresh (as Codex does): resumed and turn-end name a new id

It is built on the shipped example client, examples/python/agent.py.
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python"))
import agent  # noqa: E402


def effect(session, key):
    """X_SUPERVISE_EVENT=effect: the side effect named key is done."""
    agent.notify(agent._marker(session, "effect", effect=key))


def tool(session, turn, out):
    agent.phase(session, "tool", "append")
    agent.barrier()  # journaled before the side effect
    key = "append:%s/%s" % (session, turn)
    agent._effect(out, key, "line")
    effect(session, key)
    agent.barrier()  # journaled: from here on a resume lists it as done
    agent.phase(session, "model")


def main(mode, out):
    if mode not in ("redo", "idempotent", "reuse-ids", "renumber"):
        sys.stderr.write(__doc__)
        return 2
    for item in agent.resumes():
        sess, turn = item["session"], item.get("turn") or ""
        if mode == "renumber":
            turn = "c%d" % agent._next_turn(out)  # the continuation's own id
        agent.resumed(sess, turn or None)
        agent.barrier()
        key = "append:%s/%s" % (sess, item.get("turn") or "")
        if mode != "redo" and key in (item.get("effects") or []):
            print("resumed %s %s: %s is already done, not repeating it" % (sess, turn, key), flush=True)
        else:
            tool(sess, item.get("turn") or "", out)
        agent.turn_end(sess, turn or None, "completed")
        agent.barrier()
    session, n = "s1", 0
    while True:
        if mode == "reuse-ids":
            n += 1  # not persisted: a new process starts at t1 again
        else:
            n = agent._next_turn(out)
        turn = "t%d" % n
        agent.turn_begin(session, turn, "append a line")
        agent.barrier()
        agent.phase(session, "model")
        time.sleep(0.02)
        tool(session, turn, out)
        agent.turn_end(session, turn, "completed")
        agent.barrier()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
