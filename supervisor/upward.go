package supervisor

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/supervise-dev/supervise/notify"
	"github.com/supervise-dev/supervise/record"
)

// Upward notification: when supervise itself runs under systemd (it has a
// NOTIFY_SOCKET of its own), it reports to its manager like any
// Type=notify service: READY=1 once the agent is up, WATCHDOG=1 at half of
// its own WATCHDOG_USEC but only while its loop is healthy, a one-line
// STATUS= summary whenever it changes, and STOPPING=1 when a stop begins.
// The agent never sees this socket.

// UpwardConfig is what supervise's own manager asked for.
type UpwardConfig struct {
	Client *notify.Client
	// Watchdog is supervise's own WATCHDOG_USEC; 0 when the manager set
	// none (or WATCHDOG_PID names another process).
	Watchdog time.Duration
}

// UpwardFromEnv reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID of
// supervise itself; ok is false when supervise runs under no notify-aware
// manager.
func UpwardFromEnv() (UpwardConfig, bool) {
	sock := os.Getenv("NOTIFY_SOCKET")
	if sock == "" {
		return UpwardConfig{}, false
	}
	cfg := UpwardConfig{Client: &notify.Client{Socket: sock, Timeout: time.Second}}
	if usec, err := strconv.ParseUint(os.Getenv("WATCHDOG_USEC"), 10, 64); err == nil && usec > 0 {
		if pid := os.Getenv("WATCHDOG_PID"); pid == "" || pid == strconv.Itoa(os.Getpid()) {
			cfg.Watchdog = time.Duration(usec) * time.Microsecond
		}
	}
	return cfg, true
}

// RunUpward reports to supervise's own manager until ctx ends; it is an
// oklog/run actor (cancel ctx to interrupt). It never blocks the loop: it
// reads the snapshot the loop publishes.
func (s *Supervisor) RunUpward(ctx context.Context, up UpwardConfig) error {
	period := time.Second
	if up.Watchdog > 0 {
		period = min(period, up.Watchdog/2)
	}
	t := time.NewTicker(period)
	defer t.Stop()
	var ready, stopping bool
	var lastStatus string
	var lastPing, extended time.Time
	send := func(state string) {
		if err := up.Client.Notify(context.Background(), state); err != nil {
			s.log.Warn("upward notify failed", "state", state, "err", err)
		}
	}
	for {
		snap := s.met.load()
		if !ready && snap.childUp {
			ready = true
			send("READY=1")
		}
		if line := snap.statusLine(); line != lastStatus {
			lastStatus = line
			send("STATUS=" + line)
		}
		if !stopping && snap.stopping {
			stopping = true
			send("STOPPING=1")
		}
		if snap.graceUntil.After(extended) {
			// The agent's grace period grew (EXTEND_TIMEOUT_USEC): extend
			// supervise's own stop timeout to match, plus time to journal.
			extended = snap.graceUntil
			usec := (time.Until(extended) + 10*time.Second).Microseconds()
			send("EXTEND_TIMEOUT_USEC=" + strconv.FormatInt(usec, 10))
		}
		now := s.clock.Now()
		// Healthy for the manager: the loop ran within half its watchdog
		// period (at least 2s: an idle loop wakes once a second).
		healthy := s.loopAge(now) < max(up.Watchdog/2, 2*time.Second)
		if up.Watchdog > 0 && healthy && now.Sub(lastPing) >= up.Watchdog/2-period/2 {
			lastPing = now
			send("WATCHDOG=1")
		}
		select {
		case <-ctx.Done():
			if !stopping {
				send("STOPPING=1")
			}
			return nil
		case <-t.C:
		case <-s.met.changed:
		}
	}
}

// statusLine is the one-line STATUS= summary.
func (snap *snapshot) statusLine() string {
	agent := "agent not running"
	switch {
	case snap.stopping:
		agent = "stopping"
	case snap.childUp:
		agent = fmt.Sprintf("agent pid %d (run %d)", snap.childPID, snap.run)
	}
	line := fmt.Sprintf("%s; %d in turn, %d resume pending, %d parked", agent,
		snap.sessions[record.InTurn]+snap.sessions[record.Waiting], snap.sessions[record.ResumePending],
		snap.sessions[record.Parked])
	if snap.guardOpen {
		line += "; crash-loop guard open"
	}
	return line
}

// Health and metrics over HTTP (--metrics-addr).

// HTTP serves /metrics (Prometheus) and /healthz (200 while the loop runs,
// 503 when it is wedged) on addr.
type HTTP struct {
	ln  net.Listener
	srv *http.Server
}

// ListenHTTP binds addr for /metrics and /healthz.
func ListenHTTP(addr string, s *Supervisor) (*HTTP, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		s.WriteMetrics(w)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		age := s.loopAge(s.clock.Now())
		if age >= healthyWithin {
			http.Error(w, fmt.Sprintf("supervision loop stalled for %s", age.Round(time.Millisecond)), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return &HTTP{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}, nil
}

// Addr returns the bound address.
func (h *HTTP) Addr() string { return h.ln.Addr().String() }

// Serve answers until Close.
func (h *HTTP) Serve() error {
	if err := h.srv.Serve(h.ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// Close stops serving; safe after Serve returned.
func (h *HTTP) Close() error { return h.srv.Close() }
