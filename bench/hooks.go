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
		env := []string{"BENCH_MODE=hooks", "BENCH_HOOKS=" + strconv.Itoa(b.cfg.hooks),
			"BENCH_HOOK_BIN=" + sv.path, "BENCH_FLOOR_BIN=" + b.noop, "BENCH_TRUE_BIN=" + truth}
		if b.notifyBin != "" && sv.path == b.supervise {
			env = append(env, "BENCH_LEAN_BIN="+b.notifyBin)
		}
		a, err := b.startAgent(sv, "hooks", nil, env...)
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
		LeanWall  sample `json:"lean_wall_ns"`
		LeanCPU   sample `json:"lean_cpu_ns"`
		LeanErrs  int    `json:"lean_errors"`
		LeanErr   string `json:"lean_first_err"`
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
	if r.LeanErrs > 0 {
		return fmt.Errorf("%d supervise-notify calls failed, first: %s", r.LeanErrs, r.LeanErr)
	}
	if len(r.LeanWall) > 0 && len(r.TrueWall) > 0 {
		lw, truth := r.LeanWall.q(0.5), r.TrueWall.q(0.5)
		x := float64(lw) / float64(max(truth, 1))
		b.add(row{"hook round trip (`supervise-notify`, its own binary, start to barrier answer)", sv.name, ms(lw) + " median",
			fmt.Sprintf("p90 %s, n=%d, interleaved with the row above; CPU median %s; %.2fx /bin/true (%s), %.2fx `supervise notify`",
				ms(r.LeanWall.q(0.9)), len(r.LeanWall), ms(r.LeanCPU.q(0.5)), x, ms(truth), float64(lw)/float64(max(wall, 1))),
			"<= 3.5x /bin/true", metMissed(x <= 3.5)})
	}
	return nil
}
