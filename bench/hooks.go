package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// hooks measures what an agent's shell hook pays per call: bench/agent,
// running under supervise, execs `supervise notify turn-begin` and
// `turn-end` (each waits for its barrier, as hooks do by default) and,
// interleaved, a static Go binary that does nothing (the floor of starting
// any Go process here). Wall time is from just before the fork to the
// reaped exit, so it includes exec, package init, the send, supervise's
// commit and the barrier's answer; CPU time is the hook process's own.
func (b *bench) hooks() error {
	for _, sv := range b.svs {
		progress("hook round trip: %s, %d rounds", sv.name, b.cfg.hooks)
		truth, _ := exec.LookPath("true")
		a, err := b.startAgent(sv, "hooks", nil, "BENCH_MODE=hooks", "BENCH_HOOKS="+strconv.Itoa(b.cfg.hooks),
			"BENCH_HOOK_BIN="+sv.path, "BENCH_FLOOR_BIN="+b.noop, "BENCH_TRUE_BIN="+truth)
		if err != nil {
			return err
		}
		err = b.hookRun(sv, a)
		a.stop()
		if err != nil {
			b.add(row{"hook round trip (`supervise notify`, start to barrier answer)", sv.name, "failed", err.Error(), "", "**missed**"})
		}
	}
	return nil
}

func (b *bench) hookRun(sv svBin, a *agentRun) error {
	if err := syscall.Kill(a.agent, syscall.SIGUSR1); err != nil {
		return err
	}
	if _, err := b.waitLine(a.out, "done ", time.Duration(b.cfg.hooks)*time.Second+60*time.Second); err != nil {
		return err
	}
	raw, err := os.ReadFile(a.out + ".json")
	if err != nil {
		return err
	}
	var r struct {
		Hooks     int    `json:"hooks"`
		Errors    int    `json:"errors"`
		FirstErr  string `json:"first_err"`
		WallNS    sample `json:"wall_ns"`
		CPUNS     sample `json:"cpu_ns"`
		FloorWall sample `json:"floor_wall_ns"`
		FloorCPU  sample `json:"floor_cpu_ns"`
		TrueWall  sample `json:"true_wall_ns"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	if r.Errors > 0 || r.Hooks == 0 {
		return fmt.Errorf("%d of %d hook calls failed, first: %s", r.Errors, r.Errors+r.Hooks, r.FirstErr)
	}
	wall, floor := r.WallNS.q(0.5), r.FloorWall.q(0.5)
	detail := fmt.Sprintf("p90 %s, p99 %s, n=%d (turn-begin and turn-end, each committed); CPU median %s; floor (exec of a static Go binary that does nothing, interleaved) %s wall, %s CPU; %.2fx the floor",
		ms(r.WallNS.q(0.9)), ms(r.WallNS.q(0.99)), r.Hooks, ms(r.CPUNS.q(0.5)), ms(floor), ms(r.FloorCPU.q(0.5)), float64(wall)/float64(max(floor, 1)))
	target, verdict := "<= 3 ms median", metMissed(wall <= 3*time.Millisecond)
	if len(r.TrueWall) > 0 {
		truth := r.TrueWall.q(0.5)
		x := float64(wall) / float64(max(truth, 1))
		detail += fmt.Sprintf("; /bin/true spawned the same way, interleaved: %s, so %.2fx /bin/true", ms(truth), x)
		target, verdict = "<= 3.5x /bin/true", metMissed(x <= 3.5)
	}
	b.add(row{"hook round trip (`supervise notify`, start to barrier answer)", sv.name, ms(wall) + " median", detail, target, verdict})
	return nil
}
