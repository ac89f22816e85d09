package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Fault matrix, reliability.md section 5 A 9 and D: the notify protocol
// under slow disks, marker sequence errors and a paused supervisor.

// outOfSequence reads notify.out_of_sequence from status --json.
func (e *env) outOfSequence() int {
	e.t.Helper()
	raw := e.statusRaw()
	i := strings.Index(raw, `"out_of_sequence": `)
	if i < 0 {
		e.t.Fatalf("no out_of_sequence in status:\n%s", raw)
	}
	rest := raw[i+len(`"out_of_sequence": `):]
	n, _ := strconv.Atoi(strings.TrimSpace(rest[:strings.IndexAny(rest, ",\n}")]))
	return n
}

// 39. Marker sequence errors: turn-end without begin, a repeated begin, a
// begin and an end replayed for a turn that already ended, old ids
// replayed after a restart of supervise, an end naming another turn. Each
// is counted and logged; the repeats and replays are no-ops, so the state
// never goes back: an ended turn is never reopened (so never resumed), a
// repeated "completed" does not reset a crash count.
func TestFault39MarkerSequence(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-end s1 t0 completed; barrier; turn-begin s1 t1 first; turn-begin s1 t1 again; "+
		"phase s1 tool bash; barrier; log a; hang",
		"TESTAGENT_SCRIPT_2=take-resumes; turn-end s1 t1 failed; barrier; turn-begin s1 t1; turn-end s1 t1 completed; barrier; log b; hang",
		"TESTAGENT_SCRIPT_3=turn-begin s1 t1; barrier; log c; hang",
		"TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
	sv := e.run()
	e.waitLog(1, "a")
	s, _ := e.status().session("s1")
	if s.State != "in_turn" || s.Turn != "t1" {
		t.Errorf("after a repeated begin s1 = %+v, want t1 open", s)
	}
	if n := e.outOfSequence(); n != 1 {
		t.Errorf("out_of_sequence %d after a repeated begin, want 1", n)
	}
	// The turn is resumed once after a kill.
	e.killChildOf(1, "log")
	e.waitLog(2, "b")
	if got := e.took(2); len(got) != 1 || got[0] != "s1 attempt=1" {
		t.Errorf("run 2 took %v, want s1 once", got)
	}
	s, _ = e.status().session("s1")
	// The end failed; the replayed begin and the repeated "completed" end
	// are no-ops: s1 stays idle, and its crash count is not reset by an
	// end that did not happen.
	if s.State != "idle" || s.CrashCount != 1 {
		t.Errorf("after a failed end, a replayed begin and a repeated end s1 = %+v, want idle, crash count still 1", s)
	}
	if n := e.outOfSequence(); n != 3 {
		t.Errorf("out_of_sequence %d after run 2 (counted per supervise), want 3", n)
	}
	if !strings.Contains(sv.stderr(), "turn marker out of sequence") {
		t.Errorf("anomalies not logged:\n%s", sv.stderr())
	}
	// Replayed ids after a restart of supervise: the ended turn stays ended.
	sv.signal(syscall.SIGKILL)
	sv.wait(10 * time.Second)
	sv = e.run()
	e.waitLog(3, "c")
	s, _ = e.status().session("s1")
	if s.State != "idle" || s.Turn != "t1" {
		t.Errorf("a begin replayed after a restart reopened s1: %+v", s)
	}
	e.killChildOf(3, "log")
	e.waitLog(4, "took-all")
	if got := e.took(4); len(got) != 0 {
		t.Errorf("run 4 took %v: an ended turn was resumed", got)
	}
	e.stop(sv)

	// An end naming another turn than the open one (hooks may number a
	// resumed turn's continuation afresh) ends the open turn and is counted.
	e2 := newEnv(t)
	e2.set("TESTAGENT_SCRIPT=turn-begin s2 t1; turn-end s2 t7 completed; barrier; log d; hang")
	sv = e2.run()
	e2.waitLog(1, "d")
	if s, _ := e2.status().session("s2"); s.State != "idle" {
		t.Errorf("s2 = %+v after an end naming another turn", s)
	}
	if n := e2.outOfSequence(); n != 1 {
		t.Errorf("out_of_sequence %d after an end naming another turn, want 1", n)
	}
	e2.stop(sv)
}

// 9. A slow disk (every commit waits 800 ms, longer than the 500 ms watchdog):
// heartbeat intake does not wait for the disk, so a pinging agent is never
// judged hung; barriers are acknowledged late, never dropped.
func TestFault09SlowFsync(t *testing.T) {
	e := newEnv(t)
	e.set("SUPERVISE_FAILPOINT_COMMIT_DELAY=800ms",
		"TESTAGENT_SCRIPT=pinger 100ms; turn-begin s1 t1; barrier; log b1; phase s1 tool bash; barrier; log b2; "+
			"turn-end s1 t1 completed; barrier; log b3; hang")
	sv := e.run("--watchdog", "500ms", "--stop-timeout", "500ms")
	e.waitEvent(1, "start")
	e.waitLog(1, "b3")
	ends := 0
	for _, ev := range e.events() {
		switch ev.kind {
		case "barrier-ok":
			ends++
		case "barrier-err":
			t.Errorf("a barrier failed on a slow disk: %s", ev.arg)
		}
	}
	if ends != 3 {
		t.Errorf("%d of 3 barriers acknowledged", ends)
	}
	time.Sleep(1500 * time.Millisecond) // three more watchdog periods under the slow disk
	if n := e.count("start"); n != 1 {
		t.Fatalf("the pinging agent was judged hung on a slow disk (%d starts):\n%s", n, sv.stderr())
	}
	if s, _ := e.status().session("s1"); s.State != "idle" {
		t.Errorf("s1 = %+v after three acknowledged markers", s)
	}
	e.stop(sv)
}

// rss is a process's resident set in KiB.
func rss(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// pings reads notify.pings from status --json: the WATCHDOG=1 datagrams
// supervise accepted from the agent's tree.
func (e *env) pings() uint64 {
	e.t.Helper()
	var st struct {
		Notify *struct {
			Pings uint64 `json:"pings"`
		} `json:"notify"`
	}
	raw := e.statusRaw()
	if err := json.Unmarshal([]byte(raw), &st); err != nil || st.Notify == nil {
		e.t.Fatalf("no notify.pings in status (%v):\n%s", err, raw)
	}
	return st.Notify.Pings
}

// waitPings waits until supervise has accepted more than n pings and
// returns the count.
func (e *env) waitPings(n uint64) uint64 {
	e.t.Helper()
	var got uint64
	waitFor(e.t, 20*time.Second, fmt.Sprintf("more than %d pings accepted", n), func() bool {
		got = e.pings()
		return got > n
	})
	return got
}

// 40. supervise paused (SIGSTOP) past its watchdog while the notify
// socket's queue is kept full by a flood: memory stays bounded, the
// pinging agent is not judged hung once supervise continues, and a marker
// the agent could not deliver meanwhile is retried by it until
// acknowledged, then is in the journal.
//
// Nothing here waits for the machine to be fast: the pause starts once
// supervise has heard the agent's pings, the checks follow the marker's
// acknowledgement and a ping heard after it, and the verdict is read from
// the journal after a stop. The one wait on the clock is the window in which
// a false verdict would fall: the watchdog looks as soon as supervise
// continues, may put its verdict off while datagrams are queued
// (watchdogDeferrals), and then gives a supervise that was itself frozen
// one more period.
func TestFault40PausedWithFullQueue(t *testing.T) {
	const (
		period            = time.Second
		watchdogDeferrals = 10 * 20 * time.Millisecond // supervisor.maxWatchdogDeferrals x watchdogDeferral
	)
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=pinger 100ms; log ready; listen")
	sv := e.run("--watchdog", period.String(), "--stop-timeout", "500ms")
	e.waitLog(1, "ready")
	// The pause interrupts a stream of pings supervise hears, not the
	// moments before the first one.
	e.waitPings(0)
	pid := sv.cmd.Process.Pid
	before := rss(pid)
	sock := filepath.Join(e.stateDir, "notify", "notify.sock")
	stop := make(chan struct{})
	done := make(chan int)
	for range 4 {
		go func() {
			sent := 0
			defer func() { done <- sent }()
			c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
			if err != nil {
				return
			}
			defer c.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
				if _, err := c.Write([]byte("WATCHDOG=1\nX_SUPERVISE_SESSION=flood\nX_SUPERVISE_EVENT=phase")); err == nil {
					sent++
				}
			}
		}()
	}
	sv.signal(syscall.SIGSTOP)
	// While supervise is paused and its queue full, the agent must get a
	// marker through: it retries until acknowledged.
	f, err := os.OpenFile(e.fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("sure turn-begin s1 t1\n")
	f.Close()
	time.Sleep(3 * period) // the pause itself: three watchdog periods
	sv.signal(syscall.SIGCONT)
	resumed := time.Now()
	time.Sleep(300 * time.Millisecond) // the flood goes on a little after the pause
	close(stop)
	flood := 0
	for range 4 {
		flood += <-done
	}
	hung := func() bool { return e.count("start") > 1 || strings.Contains(sv.stderr(), "killing the agent") }
	var ev event
	acked := func() bool {
		for _, x := range e.events() {
			if x.run == 1 && x.kind == "sure-acked" {
				ev = x
				return true
			}
		}
		return false
	}
	waitFor(t, 20*time.Second, "the marker's acknowledgement or a verdict on the agent", func() bool {
		return acked() || hung()
	})
	if hung() {
		t.Fatalf("the pinging agent was judged hung after the pause:\n%s", sv.stderr())
	}
	e.waitPings(e.pings()) // a ping heard after the pause and the marker
	if s, ok := e.status().session("s1"); !ok || s.State != "in_turn" {
		t.Errorf("the retried marker is not in the journal: %+v", s)
	}
	if _, ok := e.status().session("flood"); ok {
		t.Error("a datagram from outside the tree was applied")
	}
	after := rss(pid)
	if after > before+32*1024 {
		t.Errorf("supervise's resident memory grew from %d KiB to %d KiB over the flood", before, after)
	}
	// Nothing happens for the rest of the window of a false verdict.
	time.Sleep(time.Until(resumed.Add(watchdogDeferrals + period)))
	e.stop(sv)
	if r := e.status().run(t, 1); e.count("start") != 1 || r.Reason != "stopped" {
		t.Fatalf("the pinging agent was judged hung after the pause (%d starts; run 1 ended %q):\n%s",
			e.count("start"), r.Reason, sv.stderr())
	}
	t.Logf("flood of %d datagrams around a 3 s pause; marker acknowledged after %s attempts; RSS %d -> %d KiB",
		flood, strings.Fields(ev.arg)[len(strings.Fields(ev.arg))-1], before, after)
}
