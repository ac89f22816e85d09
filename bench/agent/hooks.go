package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"time"
)

// hookResult is what BENCH_MODE=hooks writes to $BENCH_OUT.json: per hook
// call, the wall time from just before fork to the reaped exit (for
// `supervise notify` that includes its barrier's answer) and the CPU time
// the process used (user + system, from its rusage).
type hookResult struct {
	Hooks     int     `json:"hooks"`
	Errors    int     `json:"errors"`
	FirstErr  string  `json:"first_err"`
	WallNS    []int64 `json:"wall_ns"`
	CPUNS     []int64 `json:"cpu_ns"`
	FloorWall []int64 `json:"floor_wall_ns"`
	FloorCPU  []int64 `json:"floor_cpu_ns"`
	// TrueWall is the wall time of an exec of $BENCH_TRUE_BIN (/bin/true),
	// spawned the same way, interleaved: the cost of any process here.
	TrueWall []int64 `json:"true_wall_ns"`
	// LeanWall and LeanCPU are the same two markers sent by
	// $BENCH_LEAN_BIN (supervise-notify: `supervise notify` as a binary of
	// its own), interleaved, with session ids of their own.
	LeanWall   []int64 `json:"lean_wall_ns"`
	LeanCPU    []int64 `json:"lean_cpu_ns"`
	LeanErrors int     `json:"lean_errors"`
	LeanErr    string  `json:"lean_first_err"`
}

// hooks waits for SIGUSR1, then runs $BENCH_HOOKS rounds of what a hook
// does: `$BENCH_HOOK_BIN notify turn-begin` and `turn-end` (each waiting for
// its barrier, the default), interleaved with an exec of $BENCH_FLOOR_BIN (a
// static Go binary that does nothing) and of $BENCH_TRUE_BIN (/bin/true,
// if set) and the same markers through $BENCH_LEAN_BIN (if set), so the
// floors and the hooks share the machine's moment.
func hooks(out string, report func(string, ...any), n int) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	report("ready %d", os.Getpid())
	<-usr1
	bin, floor, truth := os.Getenv("BENCH_HOOK_BIN"), os.Getenv("BENCH_FLOOR_BIN"), os.Getenv("BENCH_TRUE_BIN")
	lean := os.Getenv("BENCH_LEAN_BIN")
	var r hookResult
	timeOne := func(argv ...string) (wall, cpu time.Duration, err error) {
		cmd := exec.Command(argv[0], argv[1:]...)
		t0 := time.Now()
		err = cmd.Run()
		wall = time.Since(t0)
		if st := cmd.ProcessState; st != nil {
			cpu = st.UserTime() + st.SystemTime()
		}
		return wall, cpu, err
	}
	for i := range n {
		session := fmt.Sprintf("hook-%d", i)
		for _, argv := range [][]string{
			{bin, "notify", "turn-begin", "--session", session},
			{bin, "notify", "turn-end", "--session", session, "--outcome", "completed"},
		} {
			wall, cpu, err := timeOne(argv...)
			if err != nil {
				r.Errors++
				if r.FirstErr == "" {
					r.FirstErr = fmt.Sprintf("%v: %v", argv[2:], err)
				}
				continue
			}
			r.Hooks++
			r.WallNS, r.CPUNS = append(r.WallNS, int64(wall)), append(r.CPUNS, int64(cpu))
			if wall, cpu, err := timeOne(floor); err == nil {
				r.FloorWall, r.FloorCPU = append(r.FloorWall, int64(wall)), append(r.FloorCPU, int64(cpu))
			}
			if truth != "" {
				if wall, _, err := timeOne(truth); err == nil {
					r.TrueWall = append(r.TrueWall, int64(wall))
				}
			}
			if lean != "" {
				largv := append([]string{lean}, argv[2:]...)
				largv[3] = "lean-" + session // --session's value: a session of its own
				wall, cpu, err := timeOne(largv...)
				if err != nil {
					r.LeanErrors++
					if r.LeanErr == "" {
						r.LeanErr = fmt.Sprintf("%v: %v", largv[1:], err)
					}
					continue
				}
				r.LeanWall, r.LeanCPU = append(r.LeanWall, int64(wall)), append(r.LeanCPU, int64(cpu))
			}
		}
	}
	for _, s := range [][]int64{r.WallNS, r.CPUNS, r.FloorWall, r.FloorCPU, r.TrueWall, r.LeanWall, r.LeanCPU} {
		slices.Sort(s)
	}
	raw, _ := json.Marshal(r)
	os.WriteFile(out+".json", raw, 0o600)
	report("done hooks=%d", r.Hooks)
}
