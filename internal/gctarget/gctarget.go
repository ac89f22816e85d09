// Package gctarget sets supervise's garbage-collector target.
package gctarget

import (
	"os"
	"runtime"
	"runtime/debug"
)

// supervise starts at Go's default GC target (GOGC=100) and lowers it to
// 50 at its first collection. Measured side by side (bench -only
// markers,scale, 20 agents; docs/performance.md): a supervise that holds
// 1 or 100 sessions quietly never collects (its heap stays under the
// 4 MiB minimum goal of GOGC=100) and is smallest so, 2.3 and 3.2 MiB PSS
// against 2.8 and 3.9 at GOGC=50 (which collects at 2 MiB and pays the
// collector's own memory); one that collects, under a load of markers or
// holding 1 000 open sessions, is smaller at 50: 5.9 against 7.0 MiB PSS
// at 1 000 sessions, a 64-session marker load's peak RSS 14.5 against 16.5
// MiB. GOGC set in the environment wins.
const gcAfterFirst = 50

// Tune lowers the GC target at the first collection, unless GOGC is set.
func Tune() {
	if os.Getenv("GOGC") != "" {
		return
	}
	afterCollection(func() { debug.SetGCPercent(gcAfterFirst) })
}

// afterCollection runs fn once the next collection is over: a finalizer
// runs once the collection that found its object unreachable ended.
func afterCollection(fn func()) {
	runtime.SetFinalizer(&gcSentinel{fn}, func(s *gcSentinel) { s.fn() })
}

type gcSentinel struct{ fn func() }
