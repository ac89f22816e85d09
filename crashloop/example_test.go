package crashloop_test

import (
	"fmt"
	"time"

	"github.com/supervise-dev/supervise/crashloop"
)

// A child that dies a second after each start backs off exponentially, and
// its third chained dirty death opens the guard: the process keeps being
// relaunched, automatic resumes are held. A healthy run resets both.
func Example() {
	p := crashloop.DefaultPolicy()
	p.Jitter = 0 // the example's delays are exact; supervise passes rnd in
	g := crashloop.DefaultGuard()
	var s crashloop.State
	var gs crashloop.GuardState
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		start := t0.Add(time.Duration(i) * 10 * time.Second)
		run := crashloop.Run{Started: start, Ended: start.Add(500 * time.Millisecond), Dirty: true}
		var d crashloop.Decision
		d, s = p.Next(s, run, 0)
		gs = g.Death(gs, run.Ended)
		fmt.Printf("death %d: %s after %v, guard open: %v\n", i+1, d.Action, d.Delay, gs.Open)
	}
	long := crashloop.Run{Started: t0.Add(time.Minute), Ended: t0.Add(time.Hour), Dirty: true}
	d, _ := p.Next(s, long, 0)
	fmt.Printf("after an hour-long run: %s after %v\n", d.Action, d.Delay)
	fmt.Println("guard after a completed turn:", g.Healthy(gs).Open)
	// Output:
	// death 1: relaunch after 250ms, guard open: false
	// death 2: relaunch after 500ms, guard open: false
	// death 3: relaunch after 1s, guard open: true
	// after an hour-long run: relaunch after 0s
	// guard after a completed turn: false
}
