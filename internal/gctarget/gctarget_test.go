package gctarget

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// The GC target is Go's default until the first collection, then 50; GOGC
// in the environment keeps it as set.
func TestGCTargetAfterFirstCollection(t *testing.T) {
	percent := func() int { p := debug.SetGCPercent(-1); debug.SetGCPercent(p); return p }
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	Tune()
	if p := percent(); p != 100 {
		t.Fatalf("before any collection: GC percent %d, want 100", p)
	}
	for deadline := time.Now().Add(10 * time.Second); percent() != gcAfterFirst && time.Now().Before(deadline); {
		runtime.GC() // the finalizer runs after the collection, on its own goroutine
		time.Sleep(time.Millisecond)
	}
	if p := percent(); p != gcAfterFirst {
		t.Fatalf("after a collection: GC percent %d, want %d", p, gcAfterFirst)
	}
	debug.SetGCPercent(100)
	t.Setenv("GOGC", "100")
	Tune()
	for range 3 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if p := percent(); p != 100 {
		t.Fatalf("with GOGC set: GC percent %d, want 100 as set", p)
	}
}
