package supervisor

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	vm "github.com/VictoriaMetrics/metrics"

	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// metrics are supervise's Prometheus metrics, on a set of their own (no
// global state), written in the Prometheus text format by
// github.com/VictoriaMetrics/metrics: client_golang and the protobuf it
// links cost every `supervise notify` hook call about 3 ms of package init
// (docs/performance.md). Counters are incremented by the loop; the gauges
// and the notify counters are read at scrape time from a snapshot the loop
// publishes every second and at every death, so a scrape never waits for
// the loop (and a wedged loop shows as a stale heartbeat age, and a failing
// /healthz).
type metrics struct {
	set *vm.Set

	restarts      *vm.Counter
	resumes       *vm.Counter
	watchdogKills *vm.Counter

	snap atomic.Pointer[snapshot]
	// events tells what a person may want to hear of (events.go).
	events *eventSink
	// changed wakes the upward notifier when a snapshot is published.
	changed chan struct{}
}

// snapshot is what the loop publishes for scrapes.
type snapshot struct {
	sessions map[record.SessionState]int
	childUp  bool
	childPID int
	run      uint64
	stopping bool
	// graceUntil is the SIGKILL deadline of a stop or abort in progress.
	graceUntil time.Time
	guardOpen  bool
	commits    uint64
	commitErrs uint64
	// waitSince is when the longest wait on a rate or usage limit began
	// (zero: none); acksUnsent and refusedOpen are counters of the loop.
	waitSince    time.Time
	acksUnsent   uint64
	refusedOpen  uint64
	beatsDropped uint64
	// parked are the parked sessions, oldest id first, at most
	// maxParkedSeries: one supervise_session_parked series each.
	parked []parkedSeries
}

// parkedSeries is one parked session as /metrics names it.
type parkedSeries struct{ id, by string }

// maxParkedSeries bounds the supervise_session_parked series of one
// supervise (supervise_sessions{state="parked"} counts them all).
const maxParkedSeries = 50

// metricHelp is the HELP text of each family, written before its TYPE.
var metricHelp = map[string]string{
	"supervise_restarts_total":                       "Relaunches of the agent after a death.",
	"supervise_dirty_deaths_total":                   "Dirty deaths of the agent, by reason (" + strings.Join(record.DirtyReasonNames(), ", ") + ").",
	"supervise_resumes_dispatched_total":             "Resumes handed to an agent (resume file, --resume-exec or live).",
	"supervise_sessions_parked_total":                "Sessions parked, by the park's kind (by: " + strings.Join(parkKinds(), ", ") + ").",
	"supervise_rate_limit_longest_wait_seconds":      "Seconds the longest-waiting session has waited on a rate or usage limit (waiting with a retry_at), 0 when none is.",
	"supervise_acks_unsent_total":                    "Barriers answered with no byte: the fd the agent handed over would have blocked, or was not a pipe or socket.",
	"supervise_open_sessions_refused_total":          "Turn-begins refused because they would open more than --max-open-sessions sessions.",
	"supervise_heartbeats_new_session_dropped_total": "Heartbeats naming a session never seen, past --max-open-sessions new ones in one run: not kept (a flood of fresh ids).",
	"supervise_api_proxy_upstream_errors_total":      "Failures of the API proxy's upstream, by class: connect (unreachable: the agent got 502), 5xx, 429 (a rate or usage limit, 529 included).",
	"supervise_watchdog_kills_total":                 "Agents killed because no WATCHDOG=1 came within the period.",
	"supervise_journal_commits_total":                "Journal transactions committed (fsync).",
	"supervise_journal_commit_errors_total":          "Journal commits that failed; nothing in them was acknowledged.",
	"supervise_sessions":                             "Sessions known to the running supervise, by state.",
	"supervise_events_dropped_total":                 "Event documents (a park, a wait for a person, a limit's wait, a give-up) dropped because the queue of the --on-event command was full.",
	"supervise_on_event_failures_total":              "Runs of the --on-event command that failed: an exit status, the 10 s timeout, a start error.",
	"supervise_info":                                 "1, labelled with the agent's name (--name) and state dir: join it to name the agent of any series.",
	"supervise_session_parked":                       "1 for each parked session (at most 50, by id), labelled with the agent's name, its state dir, the session and the park's kind.",
	"supervise_child_up":                             "1 while an agent process runs.",
	"supervise_crashloop_guard_open":                 "1 while the crash-loop guard holds automatic resumes.",
	"supervise_heartbeat_age_seconds":                "Seconds since the last WATCHDOG=1 from the agent (monotonic clock; since the child started when it never pinged).",
	"supervise_notify_accepted_total":                "Notify datagrams accepted.",
	"supervise_notify_dropped_total":                 "Notify datagrams dropped, by reason.",
	"supervise_loop_last_tick_age_seconds":           "Seconds since the supervision loop last ran; /healthz fails when it is stale.",
	"supervise_model_tokens_total":                   "Model-API tokens the agent's answers reported, by kind (input, output), through the API proxy.",
	"supervise_api_proxy_events_dropped_total":       "What the API proxy saw but the loop could not take in time (its queue was full).",
	"supervise_turns_refused_total":                  "Markers refused, by why: parked (the session is parked: only a person lifts a park), open-sessions (--max-open-sessions).",
}

func newMetrics(s *Supervisor) *metrics {
	m := &metrics{set: vm.NewSet(), changed: make(chan struct{}, 1), events: newEventSink(s.cfg.StateDir, s.cfg.OnEvent, s.log)}
	m.restarts = m.set.NewCounter("supervise_restarts_total")
	m.resumes = m.set.NewCounter("supervise_resumes_dispatched_total")
	m.watchdogKills = m.set.NewCounter("supervise_watchdog_kills_total")
	for _, name := range []string{`supervise_model_tokens_total{kind="input"}`, `supervise_model_tokens_total{kind="output"}`,
		"supervise_api_proxy_events_dropped_total", `supervise_turns_refused_total{why="parked"}`,
		`supervise_turns_refused_total{why="open-sessions"}`,
		`supervise_api_proxy_upstream_errors_total{class="connect"}`, `supervise_api_proxy_upstream_errors_total{class="5xx"}`,
		`supervise_api_proxy_upstream_errors_total{class="429"}`} {
		m.set.GetOrCreateCounter(name) // present from the start, at 0
	}
	for _, by := range parkKinds() {
		m.set.GetOrCreateCounter(`supervise_sessions_parked_total{by="` + by + `"}`)
	}
	m.snap.Store(&snapshot{})
	m.set.RegisterMetricsWriter(func(w io.Writer) { writeLive(w, s, m.load(), time.Now()) })
	return m
}

// count applies a machine.Count.
func (m *metrics) count(c machine.Count) {
	switch c.Metric {
	case "death":
		m.set.GetOrCreateCounter(`supervise_dirty_deaths_total{reason="` + c.Label + `"}`).Inc()
	case "watchdog":
		m.watchdogKills.Inc()
	case "park":
		by := c.Label
		if by == "" {
			by = "other"
		}
		m.set.GetOrCreateCounter(`supervise_sessions_parked_total{by="` + by + `"}`).Inc()
	case "restart":
		m.restarts.Inc()
	case "resume":
		m.resumes.Add(c.N)
	case "tokens_input":
		m.set.GetOrCreateCounter(`supervise_model_tokens_total{kind="input"}`).Add(c.N)
	case "tokens_output":
		m.set.GetOrCreateCounter(`supervise_model_tokens_total{kind="output"}`).Add(c.N)
	case "refused":
		m.set.GetOrCreateCounter(`supervise_turns_refused_total{why="` + c.Label + `"}`).Inc()
	case "proxy_dropped":
		m.set.GetOrCreateCounter(`supervise_api_proxy_events_dropped_total`).Add(c.N)
	}
}

// WriteMetrics writes every metric of this supervisor in the Prometheus
// text exposition format (version 0.0.4), each family with HELP and TYPE.
func (s *Supervisor) WriteMetrics(w io.Writer) {
	var b bytes.Buffer
	s.met.set.WritePrometheus(&b)
	addHelp(w, b.Bytes())
}

// addHelp copies the exposition in to w, putting the HELP and TYPE lines of
// each family before its first sample (the library writes none by default).
func addHelp(w io.Writer, in []byte) {
	seen := map[string]bool{}
	for _, line := range bytes.SplitAfter(in, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		if line[0] != '#' {
			name := string(line)
			if i := strings.IndexAny(name, "{ "); i >= 0 {
				name = name[:i]
			}
			if !seen[name] {
				seen[name] = true
				if help, ok := metricHelp[name]; ok {
					typ := "gauge"
					if strings.HasSuffix(name, "_total") {
						typ = "counter"
					}
					fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
				}
			}
		}
		w.Write(line)
	}
}

// writeLive writes the gauges and the notify counters from a snapshot.
func writeLive(w io.Writer, s *Supervisor, snap *snapshot, now time.Time) {
	vm.WriteCounterUint64(w, "supervise_journal_commits_total", snap.commits)
	vm.WriteCounterUint64(w, "supervise_journal_commit_errors_total", snap.commitErrs)
	for _, st := range []record.SessionState{record.Idle, record.InTurn, record.Waiting, record.ResumePending,
		record.Parked, record.Stopped, record.Closed} {
		fmt.Fprintf(w, "supervise_sessions{state=%q} %d\n", string(st), snap.sessions[st])
	}
	fmt.Fprintf(w, "supervise_child_up %d\n", b2i(snap.childUp))
	fmt.Fprintf(w, "supervise_crashloop_guard_open %d\n", b2i(snap.guardOpen))
	if snap.childUp {
		vm.WriteGaugeFloat64(w, "supervise_heartbeat_age_seconds", s.in.sincePing(now).Seconds())
	}
	ns := s.notify.Stats()
	vm.WriteCounterUint64(w, "supervise_notify_accepted_total", ns.Accepted)
	for reason, n := range ns.Dropped.All() {
		fmt.Fprintf(w, "supervise_notify_dropped_total{reason=%q} %d\n", reason, n)
	}
	vm.WriteGaugeFloat64(w, "supervise_loop_last_tick_age_seconds", s.loopAge(now).Seconds())
	wait := 0.0
	if !snap.waitSince.IsZero() {
		wait = max(now.Sub(snap.waitSince).Seconds(), 0)
	}
	vm.WriteGaugeFloat64(w, "supervise_rate_limit_longest_wait_seconds", wait)
	vm.WriteCounterUint64(w, "supervise_acks_unsent_total", snap.acksUnsent)
	vm.WriteCounterUint64(w, "supervise_open_sessions_refused_total", snap.refusedOpen)
	vm.WriteCounterUint64(w, "supervise_heartbeats_new_session_dropped_total", snap.beatsDropped)
	vm.WriteCounterUint64(w, "supervise_events_dropped_total", s.met.events.dropped.Load())
	vm.WriteCounterUint64(w, "supervise_on_event_failures_total", s.met.events.failures.Load())
	agent := "name=" + labelValue(s.cfg.Name) + ",state_dir=" + labelValue(s.cfg.StateDir)
	fmt.Fprintf(w, "supervise_info{%s} 1\n", agent)
	for _, p := range snap.parked {
		fmt.Fprintf(w, "supervise_session_parked{%s,session=%s,parked_by=%s} 1\n", agent, labelValue(p.id), labelValue(p.by))
	}
}

// labelValue quotes v as a Prometheus label value: backslash, double quote
// and line feed escaped, nothing else (a session id is any printable text).
func labelValue(v string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v) + `"`
}

// parkKinds are the labels of supervise_sessions_parked_total: the park
// table's kinds, and other (a park of no known kind).
func parkKinds() []string {
	var out []string
	for _, p := range record.Parks() {
		out = append(out, p.By)
	}
	return append(out, "other")
}

func (m *metrics) load() *snapshot { return m.snap.Load() }

// publish stores a fresh snapshot of the loop state; loop goroutine only.
func (s *Supervisor) publish() {
	m := s.m
	snap := &snapshot{sessions: map[record.SessionState]int{}, childUp: s.run.proc != nil, guardOpen: m.Guard.Open,
		commits: s.cs.commits, commitErrs: s.cs.errors, stopping: m.Stop != nil && !m.Stop.FromTTY}
	if p := s.run.proc; p != nil {
		snap.childPID, snap.run = p.PID(), m.Run.Run
	}
	if m.Grace.Armed {
		snap.graceUntil = m.Grace.Deadline
	}
	for _, sess := range m.Sessions {
		snap.sessions[sess.State]++
		if sess.State == record.Parked {
			snap.parked = append(snap.parked, parkedSeries{sess.ID, sess.ParkedBy})
		}
		if since := limitWaitSince(sess); !since.IsZero() && (snap.waitSince.IsZero() || since.Before(snap.waitSince)) {
			snap.waitSince = since
		}
	}
	snap.acksUnsent, snap.refusedOpen, snap.beatsDropped = s.cs.acksUnsent, m.Refused, m.BeatsDropped
	slices.SortFunc(snap.parked, func(a, b parkedSeries) int { return strings.Compare(a.id, b.id) })
	snap.parked = snap.parked[:min(len(snap.parked), maxParkedSeries)]
	s.met.snap.Store(snap)
	select {
	case s.met.changed <- struct{}{}:
	default:
	}
}

// limitWaitSince is when sess began waiting on a rate or usage limit
// (waiting with a retry_at): its limit's resume's making, else its last
// change; zero when it is not waiting so.
func limitWaitSince(sess *record.Session) time.Time {
	if sess.State != record.Waiting || sess.RetryAt.IsZero() {
		return time.Time{}
	}
	if sess.Wait == record.WaitLimit && sess.Resume != nil {
		return sess.Resume.Since
	}
	return sess.Updated
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
