package machine

import (
	"time"

	"github.com/supervise-dev/supervise/crashloop"
	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// Event is something that happened to the loop.
type Event interface{ event() }

// Booted hands the machine what the journal holds at start. Orphan is the
// run a previous supervise left behind (it died without recording its
// child's end), decided as a dirty death.
type Booted struct {
	NextRun  uint64
	Sessions []record.Session
	LastExit *record.Run
	Restarts uint64
	Backoff  crashloop.State
	Guard    crashloop.GuardState
	Orphan   *record.Run
	// Verifying: the journal's full check runs in the background.
	Verifying bool
	// Budget is the state dir's token spend as journaled.
	Budget Budget
}

// LaunchDue: the next run may start now (at start, or when the backoff
// ran out). Fingerprint is the agent's, when NeedFingerprint asked for it.
type LaunchDue struct {
	Fingerprint *record.Fingerprint
}

// Delivered: the resume file for Run was written (or Live: rewritten for
// the running child); IDs are the sessions it hands over.
type Delivered struct {
	Run  uint64
	IDs  []string
	Via  string
	Live bool
	// Unsent: the resume file could not be written, and run Run starts
	// without the resumes: a delivery the death's commit already recorded
	// for it (see fold) is taken back.
	Unsent bool
}

// Started: run Run's child was forked.
type Started struct {
	Run       uint64
	PID       int
	StartTime int64
	At        time.Time
	Argv      []string
}

// Exited: the child of the current run ended (or could not be started:
// ExecFailed). OOMKills is the run cgroup's oom_kill count.
type Exited struct {
	PID    int
	Code   int
	Signal int
	// InnerSignal killed the agent's inner process (a direct child)
	// before the agent exited by itself with an error status: a wrapper
	// CLI's exit 1 after a kill -9 of what it wraps. 0: none known.
	InnerSignal int
	Started     time.Time
	Ended       time.Time
	ExecFailed  bool
	ExecErr     string
	How         string // "exited with status 1", "killed by SIGKILL", for the log
	Argv        []string
	OOMKills    uint64
	// Said is the telling line of what the agent last wrote to its
	// stderr (task mode; "" when unknown): the agent's own words, quoted
	// in the log and in reasons, never trusted.
	Said string
	// Random, in [0,1), is drawn by the runner for the backoff's jitter
	// and a limit's.
	Random float64
	// Limit: the agent's last words or its hooks said a usage or rate
	// limit ended the run (nil: not seen).
	Limit *Limit
	// Lost: the agent's last words say the conversation it was asked to
	// resume does not exist (the runner reads them from the CLI's table:
	// agentsaid.LostConversation). Words: they concern only the session
	// handed to the run, and never lift a park.
	Lost bool
}

// Marker: a datagram from the child's tree, applied in arrival order.
// Stored is the session as the journal holds it, when the machine does
// not hold it (nil: not in the journal). Failing is the last commit error
// while commits fail and are retried ("" when they succeed).
type Marker struct {
	Msg     marker.Message
	Stored  *record.Session
	Failing string
}

// Beats hands over the session heartbeats gathered off the loop, and the
// wall-clock time of the last WATCHDOG=1 since the launch (zero: none).
type Beats struct {
	Sessions map[string]time.Time
	// Stored holds the journal's record of sessions the machine does not hold.
	Stored map[string]record.Session
	Ping   time.Time
}

// StopRequested: a signal reached supervise (Signal), or Shutdown was
// called (Signal 0).
type StopRequested struct {
	Signal int
	Name   string // the signal's name, for the log
}

// Timer names one of the loop's timers.
type Timer int

// The loop's timers.
const (
	TimerBackoff  Timer = iota // the relaunch delay ran out
	TimerGrace                 // the SIGKILL deadline of a stop or abort
	TimerWatchdog              // the watchdog looks at the agent's pings
	TimerDeadline              // a turn or phase deadline may have passed
	TimerFlush                 // once a second: memory guard, deadlines, guard proof
)

// TimerFired: timer T fired. The runner reads what the rules ask of the
// world when it fires: SincePing (monotonic time since the last ping),
// Queued (datagrams wait on the notify socket), JobStopped (the agent is
// in state T), IgnoresSIGINT (the agent ignores or blocks SIGINT), RSS
// (the tree's resident bytes, with MaxRSS set).
type TimerFired struct {
	Timer Timer
	// Written is how many bytes the agent has written to its kept output
	// tails in this run (TimerFlush; task mode): a change is a sign of
	// life for --silence-timeout. RetryingUntil: the agent's words say it
	// waits out a limit itself until then (agentsaid.Retrying).
	Written       int64
	RetryingUntil time.Time
	SincePing     time.Duration
	Queued        bool
	JobStopped    bool
	IgnoresSIGINT bool
	RSS           uint64
	MaxRSS        uint64
}

// Fingerprinted hands the agent's fingerprint for the sessions a
// StampFingerprint effect named.
type Fingerprinted struct {
	IDs         []string
	Fingerprint *record.Fingerprint
}

// Verified: the background journal check ended; Err is "" when it passed.
type Verified struct {
	Err string
}

// ManualResume: `supervise resume ID`. Stored is the session from the
// journal when the machine does not hold it.
type ManualResume struct {
	ID     string
	Stored *record.Session
}

// RestartRequested: `supervise restart` (the control socket, from outside
// the agent's tree).
type RestartRequested struct{}

func (RestartRequested) event() {}

// Evict drops settled sessions from memory (the journal has them), except
// those in Busy (in a commit not yet acknowledged).
type Evict struct {
	Keep int
	Busy func(id string) bool
}

func (Booted) event()    {}
func (LaunchDue) event() {}
func (Delivered) event() {}
func (Started) event()   {}

// signal is the signal that ended the run's work: the agent's own, else
// its inner process's.
func (e Exited) signal() int {
	if e.Signal != 0 {
		return e.Signal
	}
	return e.InnerSignal
}

func (Exited) event()        {}
func (Marker) event()        {}
func (Beats) event()         {}
func (StopRequested) event() {}
func (TimerFired) event()    {}
func (Fingerprinted) event() {}
func (Verified) event()      {}
func (ManualResume) event()  {}
func (Evict) event()         {}

// Effect is something the runner must do.
type Effect interface{ effect() }

// Save queues the named sessions (and the run record, the policy state)
// for the next group commit.
type Save struct {
	IDs    []string
	Run    bool
	Policy bool
}

// CommitKind says what a synchronous commit records besides what is
// pending.
type CommitKind int

// What a Commit records.
const (
	CommitPending CommitKind = iota // only what is pending
	CommitBoot                      // the boot: Orphan's death, the reservation, the owner
	CommitLaunch                    // Run started (Relaunch: one more restart), its child
	CommitDeath                     // Run ended; Reserve the next run number
)

// Commit commits everything pending, with Kind's records, and returns
// once it is durable. A Launch after it in the same list starts only then.
type Commit struct {
	Kind     CommitKind
	Run      record.Run
	Relaunch bool
	Reserve  uint64 // the run number to reserve before its fork; 0: none
	Orphan   *record.Run
	Why      string // for the error log
}

// Launch starts run Run with Argv. Items, when set, go in the resume file
// (SUPERVISE_RESUME_FILE); Stale removes a resume file that may be left.
type Launch struct {
	Run   uint64
	Argv  []string
	Items []resume.Item
	IDs   []string
	Via   string
	Stale bool
	// Task: a --resume-exec launch, which goes ahead without its file.
	Task bool
	// Tail: keep the agent's last words (the telling line of its
	// stderr), for Exited.Said (task mode).
	Tail bool
}

// Backoff waits Delay, then the runner sends LaunchDue.
type Backoff struct{ Delay time.Duration }

// Signal sends Sig to the child's group (Terminate: with SIGCONT), or
// SIGKILL to its whole tree (Kill).
type Signal struct {
	Sig  int
	Kill bool
	// Plain sends Sig to the child alone (the resume signal).
	Plain bool
}

// Arm sets timer T to fire at At (Disarm: stops it).
type Arm struct {
	Timer  Timer
	At     time.Time
	Disarm bool
	// ResetPing counts now as the agent's last ping (a new watchdog period).
	ResetPing bool
}

// Level is a log level.
type Level int

// Log levels, as slog numbers them.
const (
	LevelDebug Level = -4
	LevelInfo  Level = 0
	LevelWarn  Level = 4
	LevelError Level = 8
)

// Log is one log line: a constant message and key-value pairs.
type Log struct {
	Level Level
	Msg   string
	Args  []any
}

// Publish refreshes the snapshot that status, metrics and the upward
// notifier read.
type Publish struct{}

// Count adds one to a counter: "death" (Label: the reason), "watchdog",
// "park", "restart", "resume".
type Count struct {
	Metric string
	Label  string
	N      int
}

// Refuse makes the sender's next barrier answer '0'.
type Refuse struct{ PID int32 }

// StampFingerprint asks for the agent's fingerprint for the sessions IDs
// (parked by the breaker); the runner answers with Fingerprinted. Warm
// only starts hashing in the background.
type StampFingerprint struct {
	IDs  []string
	Warm bool
}

// DeliverLive rewrites the resume file with Items for the running child;
// the runner answers Delivered{Live: true} for Fresh, then sends the
// resume signal.
type DeliverLive struct {
	Items []resume.Item
	Fresh []string
}

// AwaitVerify: wait for the background journal check before the first
// launch (resumes are owed), then send LaunchDue again.
type AwaitVerify struct{}

// HoldLogs keeps log lines off the restart path until the next launch.
type HoldLogs struct{}

// ObserveMarker tells the observer (chaos) of a marker, once committed.
type ObserveMarker struct {
	Run                                        uint64
	Session, Event, Turn, Phase, Tool, Outcome string
	Effect                                     string // an effect's key
	Ignored                                    bool   // out of sequence: not applied
}

// ObserveStart tells the observer that run Run started.
type ObserveStart struct {
	Run       uint64
	Argv      []string
	Delivered []string
	Held      string
}

// ObserveDeath tells the observer that Run's death is committed.
type ObserveDeath struct {
	Run     record.Run
	Changed []string
}

// Notice tells of a change a person may want to hear of (--on-event,
// supervise events): a session parked, parked for a budget, waiting for a
// person or no longer, waiting out a limit or no longer; supervise giving
// up. Command is what acts on it.
type Notice struct {
	Event   string // NoticeParked, NoticeBudget, NoticeWaiting, ...
	Session string
	Turn    string
	Reason  string
	Command string
}

// The events a Notice tells of.
const (
	NoticeParked     = "parked"
	NoticeBudget     = "budget"
	NoticeWaiting    = "waiting"
	NoticeWaitingEnd = "waiting-end"
	NoticeLimit      = "limit"
	NoticeLimitEnd   = "limit-end"
	NoticeGaveUp     = "gave-up"
	// NoticeLost: a session's conversation was lost (the CLI, asked to
	// resume it, has none): started again as a new one; its Command is
	// never a resume, which cannot work.
	NoticeLost = "lost"
)

func (Notice) effect() {}

// Report prints lines a person must read (task mode's end).
type Report struct{ Lines []string }

// Fatal: the journal cannot be trusted; stop and exit 1.
type Fatal struct{ Err string }

// End: the loop is over; supervise exits with Code.
type End struct {
	Code int
	Err  string
}

func (Save) effect()             {}
func (Commit) effect()           {}
func (Launch) effect()           {}
func (Backoff) effect()          {}
func (Signal) effect()           {}
func (Arm) effect()              {}
func (Log) effect()              {}
func (Publish) effect()          {}
func (Count) effect()            {}
func (Refuse) effect()           {}
func (StampFingerprint) effect() {}
func (DeliverLive) effect()      {}
func (AwaitVerify) effect()      {}
func (HoldLogs) effect()         {}
func (ObserveMarker) effect()    {}
func (ObserveStart) effect()     {}
func (ObserveDeath) effect()     {}
func (Report) effect()           {}
func (Fatal) effect()            {}
func (End) effect()              {}

// out collects the effects of one Step.
type out struct{ fx []Effect }

func (o *out) add(e ...Effect) { o.fx = append(o.fx, e...) }

func (o *out) log(l Level, msg string, args ...any) {
	o.fx = append(o.fx, Log{Level: l, Msg: msg, Args: args})
}
func (o *out) info(msg string, args ...any)  { o.log(LevelInfo, msg, args...) }
func (o *out) warn(msg string, args ...any)  { o.log(LevelWarn, msg, args...) }
func (o *out) error(msg string, args ...any) { o.log(LevelError, msg, args...) }
func (o *out) save(ids ...string)            { o.fx = append(o.fx, Save{IDs: ids}) }
func (o *out) savePolicy()                   { o.fx = append(o.fx, Save{Policy: true}) }
func (o *out) arm(t Timer, at time.Time)     { o.fx = append(o.fx, Arm{Timer: t, At: at}) }
func (o *out) disarm(t Timer)                { o.fx = append(o.fx, Arm{Timer: t, Disarm: true}) }
