package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestGCTarget(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{{0, 100}, {1 << 20, 100}, {bigHeap, 100}, {bigHeap + 1, 50}, {64 << 20, 50}} {
		if got := gcTarget(c.live); got != c.want {
			t.Errorf("gcTarget(%d) = %d, want %d", c.live, got, c.want)
		}
	}
}

// The tuner follows the live heap across collections: 50 while more than
// bigHeap is live, back to 100 once it is freed.
func TestGCTunerFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	tuner := &gcTuner{percent: gcSmall}
	tuner.sample = (&gcTuner{}).sampleOf()
	tuner.arm()
	percent := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }
	collect := func() {
		for range 3 { // the finalizer runs after the collection, on its own goroutine
			runtime.GC()
			runtime.Gosched()
		}
	}
	big := make([]byte, 8<<20)
	for i := range big {
		big[i] = 1
	}
	collect()
	if p := percent(); p != gcBig {
		t.Errorf("with %d MiB live, GC percent %d, want %d", len(big)>>20, p, gcBig)
	}
	runtime.KeepAlive(big)
	big = nil
	collect()
	if p := percent(); p != gcSmall {
		t.Errorf("with the heap freed, GC percent %d, want %d", p, gcSmall)
	}
}
