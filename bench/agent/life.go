package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/marker"
)

// lifeResult is what BENCH_MODE=life writes to $BENCH_OUT.json.
type lifeResult struct {
	Turns    int    `json:"turns"`    // turns completed (turn-end confirmed)
	Sessions int    `json:"sessions"` // distinct session ids
	Workers  int    `json:"workers"`
	Phases   bool   `json:"phases"` // a tool phase in every turn
	Markers  int64  `json:"markers"`
	Errors   int64  `json:"errors"`
	FirstErr string `json:"first_err,omitempty"`
	TenthNS  int64  `json:"tenth_ns"` // wall time of the first 10% of the turns
	RestNS   int64  `json:"rest_ns"`  // wall time of the other 90%
}

// lifeSession is the id of session s: shaped like the UUIDs the agent
// CLIs mint, so the journal holds keys of a real length.
func lifeSession(s int) string { return fmt.Sprintf("0196b4a4-6f0e-7cc0-a2c5-%012x", s) }

// lifePlan splits turns over sessions and workers: turn i belongs to
// session i%sessions and is the (i/sessions)th turn of it; worker w runs
// the turns i ≡ w (mod workers). workers is lowered to a divisor of
// sessions, so each session belongs to one worker and its turns never
// overlap.
func lifePlan(sessions, workers int) int {
	workers = max(min(workers, sessions), 1)
	for sessions%workers != 0 {
		workers--
	}
	return workers
}

// lifeFirst is worker w's first turn at or after from: the least i >= from
// with i ≡ w (mod workers).
func lifeFirst(w, workers, from int) int {
	return from + ((w-from%workers)%workers+workers)%workers
}

// life waits for SIGUSR1, then runs turns turns spread round robin over
// sessions session ids from workers goroutines, each turn a turn-begin, a
// tool phase (when phases), and a turn-end "completed", each confirmed by
// a barrier before the next. After the first tenth of the turns it writes
// "tenth turns=N" and waits for SIGUSR1 again (the harness samples
// supervise's memory there); at the end it writes the JSON result and
// "done turns=N".
func life(out string, report func(string, ...any), turns, sessions, workers int, phases bool) {
	ctx := context.Background()
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	workers = lifePlan(sessions, workers)
	r := lifeResult{Sessions: min(sessions, turns), Workers: workers, Phases: phases}
	var (
		mu       sync.Mutex
		markers  atomic.Int64
		errs     atomic.Int64
		done     atomic.Int64
		firstErr string
	)
	fail := func(i int, what string, err error) {
		if errs.Add(1) == 1 {
			mu.Lock()
			firstErr = fmt.Sprintf("turn %d: %s: %v", i, what, err)
			mu.Unlock()
		}
	}
	// step sends one marker and confirms it with a barrier.
	step := func(i int, what string, send func() error) bool {
		if err := send(); err != nil {
			fail(i, what, err)
			return false
		}
		if err := client.Barrier(ctx, 30*time.Second); err != nil {
			fail(i, what+" barrier", err)
			return false
		}
		markers.Add(1)
		return true
	}
	turn := func(i int) {
		id, t := lifeSession(i%sessions), "t"+strconv.Itoa(i/sessions)
		if !step(i, "turn-begin", func() error { return client.TurnBegin(ctx, id, t, "long-life turn "+strconv.Itoa(i)) }) {
			return
		}
		if phases && !step(i, "phase", func() error { return client.ToolPhase(ctx, id, "Bash", "go test ./...") }) {
			return
		}
		if step(i, "turn-end", func() error { return client.TurnEnd(ctx, id, t, marker.OutcomeCompleted) }) {
			done.Add(1)
		}
	}
	// span runs the turns [from, to), each worker its own residue class.
	span := func(from, to int) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := lifeFirst(w, workers, from); i < to; i += workers {
					turn(i)
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	report("ready %d", os.Getpid())
	<-usr1
	tenth := turns / 10
	r.TenthNS = span(0, tenth).Nanoseconds()
	report("tenth turns=%d", done.Load())
	<-usr1
	r.RestNS = span(tenth, turns).Nanoseconds()
	r.Turns, r.Markers, r.Errors, r.FirstErr = int(done.Load()), markers.Load(), errs.Load(), firstErr
	b, _ := json.Marshal(r)
	tmp := out + ".json.tmp"
	if err := os.WriteFile(tmp, b, 0o600); err == nil {
		os.Rename(tmp, out+".json")
	}
	report("done turns=%d", r.Turns)
}
