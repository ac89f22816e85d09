package supervisor

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/supervise-dev/supervise/journal"
)

// metrics are supervise's Prometheus metrics, on a registry of their own
// (no global state). Counters are incremented by the loop; the gauges and
// the notify counters are read at scrape time from a snapshot the loop
// publishes every second and at every death, so a scrape never waits for
// the loop (and a wedged loop shows as a stale heartbeat age, and a failing
// /healthz).
type metrics struct {
	reg *prometheus.Registry

	restarts       prometheus.Counter
	deaths         *prometheus.CounterVec // by reason, dirty deaths only
	resumes        prometheus.Counter
	parks          prometheus.Counter
	watchdogKills  prometheus.Counter
	journalCommits prometheus.CounterFunc
	journalErrors  prometheus.CounterFunc

	snap atomic.Pointer[snapshot]
	// changed wakes the upward notifier when a snapshot is published.
	changed chan struct{}
}

// snapshot is what the loop publishes for scrapes.
type snapshot struct {
	sessions map[journal.SessionState]int
	childUp  bool
	childPID int
	run      uint64
	stopping bool
	// graceUntil is the SIGKILL deadline of a stop or abort in progress.
	graceUntil time.Time
	guardOpen  bool
	commits    uint64
	commitErrs uint64
}

func newMetrics(s *Supervisor) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), changed: make(chan struct{}, 1)}
	f := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "supervise", Name: name, Help: help}
	}
	m.restarts = prometheus.NewCounter(prometheus.CounterOpts(f("restarts_total", "Relaunches of the agent after a death.")))
	m.deaths = prometheus.NewCounterVec(prometheus.CounterOpts(f("dirty_deaths_total", "Dirty deaths of the agent, by reason (signal, exit, watchdog, memory, turn-open, exec-failed, supervisor-died).")), []string{"reason"})
	m.resumes = prometheus.NewCounter(prometheus.CounterOpts(f("resumes_dispatched_total", "Resumes handed to an agent (resume file, --resume-exec or live).")))
	m.parks = prometheus.NewCounter(prometheus.CounterOpts(f("sessions_parked_total", "Sessions parked after a dirty death.")))
	m.watchdogKills = prometheus.NewCounter(prometheus.CounterOpts(f("watchdog_kills_total", "Agents killed because no WATCHDOG=1 came within the period.")))
	m.journalCommits = prometheus.NewCounterFunc(prometheus.CounterOpts(f("journal_commits_total", "Journal transactions committed (fsync).")),
		func() float64 { return float64(m.load().commits) })
	m.journalErrors = prometheus.NewCounterFunc(prometheus.CounterOpts(f("journal_commit_errors_total", "Journal commits that failed; nothing in them was acknowledged.")),
		func() float64 { return float64(m.load().commitErrs) })
	m.snap.Store(&snapshot{})
	m.reg.MustRegister(m.restarts, m.deaths, m.resumes, m.parks, m.watchdogKills, m.journalCommits, m.journalErrors,
		&liveCollector{s: s, m: m})
	return m
}

func (m *metrics) load() *snapshot { return m.snap.Load() }

// publish stores a fresh snapshot of the loop state; loop goroutine only.
func (s *Supervisor) publish() {
	snap := &snapshot{sessions: map[journal.SessionState]int{}, childUp: s.proc != nil, guardOpen: s.guard.Open,
		commits: s.cs.commits, commitErrs: s.cs.errors, stopping: s.stop != nil && !s.stop.fromTTY}
	if s.proc != nil {
		snap.childPID, snap.run = s.proc.PID(), s.run.Run
	}
	if s.grace.timer != nil {
		snap.graceUntil = s.grace.deadline
	}
	for _, sess := range s.sessions {
		snap.sessions[sess.State]++
	}
	s.m.snap.Store(snap)
	select {
	case s.m.changed <- struct{}{}:
	default:
	}
}

// liveCollector reports the gauges and the notify counters at scrape time.
type liveCollector struct {
	s *Supervisor
	m *metrics
}

var (
	descSessions   = prometheus.NewDesc("supervise_sessions", "Sessions known to the running supervise, by state.", []string{"state"}, nil)
	descChildUp    = prometheus.NewDesc("supervise_child_up", "1 while an agent process runs.", nil, nil)
	descGuardOpen  = prometheus.NewDesc("supervise_crashloop_guard_open", "1 while the crash-loop guard holds automatic resumes.", nil, nil)
	descBeatAge    = prometheus.NewDesc("supervise_heartbeat_age_seconds", "Seconds since the last WATCHDOG=1 from the agent (monotonic clock; since the child started when it never pinged).", nil, nil)
	descAccepted   = prometheus.NewDesc("supervise_notify_accepted_total", "Notify datagrams accepted.", nil, nil)
	descDropped    = prometheus.NewDesc("supervise_notify_dropped_total", "Notify datagrams dropped, by reason.", []string{"reason"}, nil)
	descLoopTicked = prometheus.NewDesc("supervise_loop_last_tick_age_seconds", "Seconds since the supervision loop last ran; /healthz fails when it is stale.", nil, nil)
)

func (c *liveCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSessions, descChildUp, descGuardOpen, descBeatAge, descAccepted, descDropped, descLoopTicked} {
		ch <- d
	}
}

func (c *liveCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.m.load()
	for _, st := range []journal.SessionState{journal.Idle, journal.InTurn, journal.Waiting, journal.ResumePending,
		journal.Parked, journal.Stopped, journal.Closed} {
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(snap.sessions[st]), string(st))
	}
	ch <- prometheus.MustNewConstMetric(descChildUp, prometheus.GaugeValue, b2f(snap.childUp))
	ch <- prometheus.MustNewConstMetric(descGuardOpen, prometheus.GaugeValue, b2f(snap.guardOpen))
	now := time.Now()
	if snap.childUp {
		ch <- prometheus.MustNewConstMetric(descBeatAge, prometheus.GaugeValue, c.s.in.sincePing(now).Seconds())
	}
	ns := c.s.notify.Stats()
	ch <- prometheus.MustNewConstMetric(descAccepted, prometheus.CounterValue, float64(ns.Accepted))
	for reason, n := range ns.Dropped.All() {
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(n), reason)
	}
	ch <- prometheus.MustNewConstMetric(descLoopTicked, prometheus.GaugeValue, c.s.loopAge(now).Seconds())
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Registry returns the Prometheus registry of this supervisor.
func (s *Supervisor) Registry() *prometheus.Registry { return s.m.reg }
