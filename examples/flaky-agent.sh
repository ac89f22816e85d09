#!/bin/sh
# A stand-in agent for trying supervise by hand: runs 1 and 2 die by
# kill -9 after a moment (as an OOM kill or a crash would), run 3 works and
# exits 0, which ends supervise under the default --restart on-failure.
# SUPERVISE_RUN is the run number supervise gives every child.
echo "flaky-agent: run ${SUPERVISE_RUN:-?} (pid $$) working..."
sleep 1
if [ "${SUPERVISE_RUN:-3}" -lt 3 ]; then
	echo "flaky-agent: run $SUPERVISE_RUN is about to be killed with SIGKILL"
	kill -9 $$
fi
echo "flaky-agent: run $SUPERVISE_RUN finished its work"
exit 0
