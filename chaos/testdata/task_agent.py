#!/usr/bin/env python3
"""A one-shot task CLI in the shape of `claude -p`, for the chaos tests of
task mode (supervise run --resume-exec).

  task_agent.py OUT PROMPT                 run one task as a new session
  task_agent.py OUT --resume SESSION MSG   resume SESSION with a continuation

A new task makes up its session id (as Claude does), runs one turn with a
side-effecting tool and exits 0. A resume reports resumed for the session
it was given, finishes the turn without repeating a side effect already
done, and exits 0.
"""

import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "python"))
import agent  # noqa: E402


def main(argv):
    out = argv[0]
    if len(argv) == 4 and argv[1] == "--resume":
        session, turn = argv[2], "t1"
        agent.resumed(session, turn)
        agent.barrier()
        if not agent._effect_done(out, "%s/%s:" % (session, turn)):
            agent._tool(session, turn, "task", out, 0.05)
    elif len(argv) == 2:
        session, turn = str(uuid.uuid4()), "t1"
        agent.turn_begin(session, turn, argv[1])
        agent.barrier()
        agent.phase(session, "model")
        time.sleep(0.05)
        agent._tool(session, turn, argv[1], out, 0.05)
    else:
        sys.stderr.write(__doc__)
        return 2
    agent.turn_end(session, turn, "completed")
    agent.barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
