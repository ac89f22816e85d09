package integration

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkBarrierJournaled measures a durable turn marker end to end: the
// agent sends a phase marker and waits on a barrier, which supervise acks
// only after the marker's journal commit (fsync) returned.
func BenchmarkBarrierJournaled(b *testing.B) {
	e := newEnv(b)
	e.set(fmt.Sprintf("TESTAGENT_SCRIPT=bench-barrier %d; hang", b.N))
	sv := e.run()
	ev := e.waitEvent(1, "bench-barrier")
	f := strings.Fields(ev.arg)
	ns, _ := strconv.ParseFloat(f[1], 64)
	b.ReportMetric(ns/float64(b.N), "ns/barrier")
	b.ReportMetric(0, "ns/op") // the agent measured; wall time includes start-up
	sv.signal(syscall.SIGTERM)
	sv.wait(30 * time.Second)
}

// BenchmarkHeartbeatIntake measures WATCHDOG=1 datagrams per second that a
// running supervise accepts from its agent (one sender, one socket).
func BenchmarkHeartbeatIntake(b *testing.B) {
	e := newEnv(b)
	n := max(b.N, 1000)
	e.set(fmt.Sprintf("TESTAGENT_SCRIPT=burst %d; hang", n))
	sv := e.run("--watchdog", "5s")
	ev := e.waitEvent(1, "burst")
	var sent, failed int
	var ns float64
	fmt.Sscanf(ev.arg, "sent=%d failed=%d ns=%g", &sent, &failed, &ns)
	if failed > 0 {
		b.Errorf("%d heartbeats not accepted within their send deadline", failed)
	}
	b.ReportMetric(float64(sent)/(ns/1e9), "heartbeats/s")
	b.ReportMetric(0, "ns/op")
	sv.signal(syscall.SIGTERM)
	sv.wait(30 * time.Second)
}
