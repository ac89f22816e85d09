package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// supervise's GC target follows its live heap. Measured side by side
// (bench -only scale, 20 agents, docs/performance.md): at Go's default
// (GOGC=100) a supervise holding 1 or 100 sessions never collects (its
// heap stays under the 4 MiB minimum goal) and is smallest, 2.3 and 3.2
// MiB PSS against 2.8 and 3.9 at GOGC=50; holding 1 000 open sessions its
// live heap passes 2 MiB and GOGC=50 is smaller, 5.8 against 7.0 MiB. So
// the target is 100 until a collection finds more than bigHeap live, and
// 50 from then on while it stays so: read after every collection, never
// on a timer. GOGC set in the environment wins.
const (
	gcSmall = 100
	gcBig   = 50
	bigHeap = 3 << 19 // 1.5 MiB of live heap
)

// gcTarget is the GC percent for a live heap of live bytes.
func gcTarget(live uint64) int {
	if live > bigHeap {
		return gcBig
	}
	return gcSmall
}

// tuneGC sets the GC target after every collection, unless GOGC is set.
func tuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	t := &gcTuner{percent: gcSmall}
	t.sample = t.sampleOf()
	t.arm()
}

// gcTuner is re-armed as a finalizer of a fresh sentinel after each
// collection: a finalizer runs once the collection that found its object
// unreachable is over.
type gcTuner struct {
	sample  []metrics.Sample
	percent int
}

type gcSentinel struct{ t *gcTuner }

// sampleOf is the one metric the tuner reads.
func (*gcTuner) sampleOf() []metrics.Sample { return []metrics.Sample{{Name: "/gc/heap/live:bytes"}} }

// arm sets the tuner to run after the next collection.
func (t *gcTuner) arm() {
	runtime.SetFinalizer(&gcSentinel{t}, func(s *gcSentinel) { s.t.collected() })
}

// collected reads the live heap the collection left and sets the target.
func (t *gcTuner) collected() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		if p := gcTarget(t.sample[0].Value.Uint64()); p != t.percent {
			t.percent = p
			debug.SetGCPercent(p)
		}
	}
	t.arm()
}
