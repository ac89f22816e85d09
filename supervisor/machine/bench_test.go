package machine

import (
	"testing"
	"time"
)

// BenchmarkDeathStep is the machine's share of a restart: an agent with
// one settled session killed by SIGKILL after a healthy life, the death
// decided, and the relaunch started. bench's restart breakdown calls the
// runner's step around it "death seen → decided" (docs/performance.md).
func BenchmarkDeathStep(b *testing.B) {
	r := newRig(&testing.T{}, testConfig())
	r.launch()
	r.begin("s1", "t1")
	r.end("s1", "t1", "completed")
	b.ReportAllocs()
	for b.Loop() {
		r.advance(20 * time.Second)
		if _, ok := find[Backoff](r.killed(9)); !ok {
			b.Fatal("no relaunch asked for after the death")
		}
		r.launch() // the LaunchDue that follows, and the child's start
		r.fx = r.fx[:0]
	}
}
