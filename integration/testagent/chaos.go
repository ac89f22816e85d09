package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/notify"
)

// chaos runs a random stream of turn markers over sessions s0..s3, each
// followed by a barrier, until the process is killed. A session whose
// marker is refused (it is parked: only a person lifts a park) is left for
// a new one in its slot, s0-g1, s0-g2, ..., as an agent opens a new
// conversation when its old one is parked. Every marker is logged
// as "send EVENT SESSION TURN [ARG]" before it is sent and "acked ..." once
// its barrier confirmed it journaled, so a checker can tell acknowledged
// markers from the one in flight when a fault hit. seed and the run number
// make each run's stream reproducible.
func chaos(seed uint64) {
	run, _ := strconv.ParseUint(os.Getenv("SUPERVISE_RUN"), 10, 64)
	rng := rand.New(rand.NewPCG(seed, run))
	ctx := context.Background()
	turns := map[string]string{}
	gen := map[int]int{}
	for i := 0; ; i++ {
		slot := rng.IntN(4)
		s := "s" + strconv.Itoa(slot)
		if gen[slot] > 0 {
			s += "-g" + strconv.Itoa(gen[slot])
		}
		var line string
		var err error
		switch p := rng.IntN(100); {
		case p < 30:
			turns[s] = fmt.Sprintf("t%d-%d", run, i)
			line = "turn-begin " + s + " " + turns[s]
			logf("send %s", line)
			err = client.TurnBegin(ctx, s, turns[s], "chaos request "+turns[s])
		case p < 50:
			tools := []string{"bash", "edit", "web"}
			tool := tools[rng.IntN(len(tools))]
			line = "phase " + s + " - tool " + tool
			logf("send %s", line)
			err = client.Phase(ctx, s, marker.PhaseTool, tool)
		case p < 75:
			outcome := []marker.Outcome{marker.OutcomeCompleted, marker.OutcomeCompleted, marker.OutcomeFailed, marker.OutcomeCancelled}[rng.IntN(4)]
			turn := turns[s]
			if turn == "" {
				turn = "-"
			}
			line = "turn-end " + s + " " + turn + " " + string(outcome)
			logf("send %s", line)
			if turn == "-" {
				turn = ""
			}
			err = client.TurnEnd(ctx, s, turn, outcome)
		case p < 85:
			line = "waiting " + s + " -"
			logf("send %s", line)
			err = client.Waiting(ctx, s, "")
		case p < 88:
			line = "closed " + s + " -"
			logf("send %s", line)
			err = client.Closed(ctx, s)
		case p < 90:
			spawnOrphan()
			continue
		default:
			time.Sleep(time.Duration(rng.IntN(10)) * time.Millisecond)
			continue
		}
		if err == nil {
			err = client.Barrier(ctx, 5*time.Second)
		}
		if err != nil {
			logf("barrier-err %s: %v", line, err)
			if errors.Is(err, notify.ErrBarrierRefused) {
				gen[slot]++
			}
			continue
		}
		logf("acked %s", line)
		time.Sleep(time.Duration(rng.IntN(4)) * time.Millisecond)
	}
}

// spawnOrphan leaves a short-lived grandchild behind: its parent shell
// exits at once, so it is re-parented to supervise (subreaper or PID 1),
// which must reap it.
func spawnOrphan() {
	cmd := exec.Command("sh", "-c", "sleep 0.05 &")
	if err := cmd.Run(); err != nil {
		logf("error orphan %v", err)
	}
}

// intLog logs every SIGINT instead of dying of it.
func intLog() {
	c := make(chan os.Signal, 4)
	signal.Notify(c, syscall.SIGINT)
	go func() {
		for range c {
			logf("got-int")
		}
	}()
}
