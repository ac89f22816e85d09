package integration

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// outer is a fake service manager's notify socket.
type outer struct {
	conn *net.UnixConn
	mu   sync.Mutex
	msgs []received
}

type received struct {
	at   time.Time
	text string
}

func newOuter(t *testing.T) (*outer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outer.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	o := &outer{conn: c}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			o.mu.Lock()
			o.msgs = append(o.msgs, received{time.Now(), string(buf[:n])})
			o.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close() })
	return o, path
}

func (o *outer) all() []received {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]received(nil), o.msgs...)
}

func (o *outer) count(prefix string, since time.Time) int {
	n := 0
	for _, m := range o.all() {
		if strings.HasPrefix(m.text, prefix) && !m.at.Before(since) {
			n++
		}
	}
	return n
}

func (o *outer) lastStatus() string {
	s := ""
	for _, m := range o.all() {
		if strings.HasPrefix(m.text, "STATUS=") {
			s = strings.TrimPrefix(m.text, "STATUS=")
		}
	}
	return s
}

// Under a service manager supervise sends READY=1 once the agent is up,
// WATCHDOG=1 while its loop is healthy (and stops when the loop is
// wedged), a STATUS= line that changes when a session starts a turn, and
// STOPPING=1 when stopped. The agent never sees the manager's socket.
func TestUpwardNotify(t *testing.T) {
	o, path := newOuter(t)
	e := newEnv(t)
	wedge := filepath.Join(e.dir, "wedge")
	e.set("NOTIFY_SOCKET="+path, "WATCHDOG_USEC=3000000", "SUPERVISE_FAILPOINT_WEDGE="+wedge,
		"TESTAGENT_SCRIPT=listen")
	start := time.Now()
	sv := e.run()
	e.waitEvent(1, "listen")
	waitFor(t, 10*time.Second, "READY=1", func() bool { return o.count("READY=1", start) == 1 })
	waitFor(t, 10*time.Second, "two WATCHDOG=1", func() bool { return o.count("WATCHDOG=1", start) >= 2 })
	if s := o.lastStatus(); !strings.Contains(s, "agent pid") || !strings.Contains(s, "0 in turn") {
		t.Errorf("STATUS=%q", s)
	}
	e.tell("turn-begin s1 t1; barrier")
	waitFor(t, 10*time.Second, "STATUS to show the turn", func() bool { return strings.Contains(o.lastStatus(), "1 in turn") })

	// Wedge the loop: the upward watchdog must stop.
	os.WriteFile(wedge, nil, 0o600)
	time.Sleep(2500 * time.Millisecond) // a ping already decided may still arrive
	quiet := time.Now()
	time.Sleep(3 * time.Second)
	if n := o.count("WATCHDOG=1", quiet); n != 0 {
		t.Errorf("%d WATCHDOG=1 while the loop was wedged", n)
	}
	os.Remove(wedge)
	resumed := time.Now()
	waitFor(t, 10*time.Second, "WATCHDOG=1 after the loop recovered", func() bool { return o.count("WATCHDOG=1", resumed) > 0 })

	sv.signal(syscall.SIGTERM)
	if code := sv.wait(20 * time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
	if o.count("STOPPING=1", start) != 1 {
		t.Error("no STOPPING=1")
	}
	// The agent never saw the manager's socket: its marker went to
	// supervise, and nothing of the agent's reached the manager.
	for _, m := range o.all() {
		if strings.Contains(m.text, "X_SUPERVISE") {
			t.Errorf("the manager's socket received an agent marker: %q", m.text)
		}
	}
}

// /metrics, scraped over HTTP, shows a restart and a resume after a kill
// -9; /healthz answers.
func TestMetricsAndHealth(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; hang",
		"TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
	sv := e.run("--metrics-addr", "127.0.0.1:0")
	var addr string
	re := regexp.MustCompile(`serving /metrics and /healthz" addr=(\S+)`)
	waitFor(t, 10*time.Second, "the metrics address in the log", func() bool {
		m := re.FindStringSubmatch(sv.stderr())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	e.killChildOf(1, "barrier-ok")
	e.waitLog(2, "took-all")
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var body string
	waitFor(t, 10*time.Second, "metrics to show the restart and the resume", func() bool {
		_, body = get("/metrics")
		// Gauges come from a snapshot published every second.
		return strings.Contains(body, "supervise_restarts_total 1") && strings.Contains(body, "supervise_resumes_dispatched_total 1") &&
			strings.Contains(body, `supervise_sessions{state="in_turn"} 1`)
	})
	for _, want := range []string{`supervise_dirty_deaths_total{reason="signal"} 1`, "supervise_child_up 1",
		`supervise_sessions{state="in_turn"} 1`, "supervise_heartbeat_age_seconds", `supervise_notify_dropped_total{reason="sender"}`,
		"supervise_journal_commits_total"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, text := get("/healthz"); code != 200 || strings.TrimSpace(text) != "ok" {
		t.Errorf("/healthz = %d %q", code, text)
	}
	e.stop(sv)
}

// An agent that extends its grace period during a stop makes supervise
// extend its own stop timeout with its manager, or the manager would kill
// supervise (and the flushing agent) first.
func TestExtendTimeoutForwardedUpward(t *testing.T) {
	o, path := newOuter(t)
	e := newEnv(t)
	e.set("NOTIFY_SOCKET="+path, "TESTAGENT_SCRIPT=term-extend 5000000 500ms; hang")
	sv := e.run("--stop-timeout", "300ms")
	e.waitEvent(1, "hang")
	start := time.Now()
	sv.signal(syscall.SIGTERM)
	if code := sv.wait(20 * time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	found := false
	for _, m := range o.all() {
		if v, ok := strings.CutPrefix(m.text, "EXTEND_TIMEOUT_USEC="); ok && !m.at.Before(start) {
			usec, _ := strconv.ParseInt(v, 10, 64)
			if usec < 5_000_000 {
				t.Errorf("EXTEND_TIMEOUT_USEC=%d upward, less than the agent's 5s", usec)
			}
			found = true
		}
	}
	if !found {
		t.Error("the agent's extension was not forwarded to the manager")
	}
}
