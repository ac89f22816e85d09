package supervisor

import (
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// Observer is told about the loop's steps once each is durable in the
// journal: a child started, a batch of turn markers committed, a death and
// its decisions committed. It is for a chaos harness (`supervise chaos`),
// nil in production.
//
// It is called on the loop goroutine and the loop waits for it: the
// barriers of a marker batch are acknowledged, and the next child is
// launched, only after it returns. So a harness that kills the child from
// inside the call kills it at an exact point ("right after its turn-begin
// was journaled, before the agent heard so") instead of racing the agent.
type Observer func(Event)

// Event kinds.
const (
	EventStart   = "start"   // a child was launched and its start recorded
	EventMarkers = "markers" // turn markers were committed
	EventDeath   = "death"   // a child's death and the decisions for its sessions were committed
)

// Event is one step of the loop, as an Observer sees it.
type Event struct {
	Kind string `json:"kind"`
	Run  uint64 `json:"run"`
	// PID and StartTime identify the child (start, death).
	PID       int   `json:"pid,omitempty"`
	StartTime int64 `json:"start_time,omitempty"`
	// Tag is the environment entry every process of the run's tree carries
	// (SUPERVISE_TREE=...), for a process scan (start).
	Tag string `json:"tag,omitempty"`
	// Argv is the command line of the run (start): the agent's, or the
	// --resume-exec form of a resume launch.
	Argv []string `json:"argv,omitempty"`
	// Delivered are the sessions whose resume this run was handed
	// (start); Held says why owed resumes were not handed over.
	Delivered []string `json:"delivered,omitempty"`
	Held      string   `json:"held,omitempty"`
	// Markers are the session events of the batch, in arrival order
	// (markers, and a death's commit).
	Markers []Marker `json:"markers,omitempty"`
	// How the child ended (death).
	ExitCode int           `json:"exit_code,omitempty"`
	Signal   int           `json:"signal,omitempty"`
	Reason   record.Reason `json:"reason,omitempty"`
	Dirty    bool          `json:"dirty,omitempty"`
	// Decisions are the sessions the death changed (death).
	Decisions []SessionStatus `json:"decisions,omitempty"`
}

// Marker is one session event received from the agent.
type Marker struct {
	Run     uint64 `json:"run"`
	Session string `json:"session"`
	Event   string `json:"event"`
	Turn    string `json:"turn,omitempty"`
	Phase   string `json:"phase,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Effect  string `json:"effect,omitempty"` // the key of an effect event
	// Ignored is set for a marker supervise ignored as out of sequence (a
	// turn-begin for a turn that already ended): the agent sent it, the
	// journal did not take it.
	Ignored bool `json:"ignored,omitempty"`
}

// observeMarker queues a marker for the observer; it is told once the
// batch holding it commits.
func (s *Supervisor) observeMarker(e machine.ObserveMarker) {
	if s.cfg.Observe == nil {
		return
	}
	s.cs.markers = append(s.cs.markers, Marker{Run: e.Run, Session: e.Session, Event: e.Event,
		Turn: e.Turn, Phase: e.Phase, Tool: e.Tool, Outcome: e.Outcome, Effect: e.Effect, Ignored: e.Ignored})
}

// observeBatch tells the observer about a committed batch's markers, before
// its barriers are acknowledged.
func (s *Supervisor) observeBatch(b *batch) {
	if s.cfg.Observe == nil || len(b.markers) == 0 {
		return
	}
	s.cfg.Observe(Event{Kind: EventMarkers, Run: s.m.Run.Run, Markers: b.markers})
}

// observeStart tells the observer that a run started.
func (s *Supervisor) observeStart(e machine.ObserveStart) {
	p := s.run.proc
	if s.cfg.Observe == nil || p == nil {
		return
	}
	s.cfg.Observe(Event{Kind: EventStart, Run: e.Run, PID: p.PID(), StartTime: p.StartTime(), Tag: s.tag(e.Run),
		Argv: e.Argv, Delivered: e.Delivered, Held: e.Held})
}

// observeDeath tells the observer that a run's death and the decisions
// for its sessions are committed.
func (s *Supervisor) observeDeath(e machine.ObserveDeath) {
	if s.cfg.Observe == nil {
		return
	}
	r := e.Run
	ev := Event{Kind: EventDeath, Run: r.Run, PID: r.PID, StartTime: r.StartTime, ExitCode: r.ExitCode,
		Signal: r.Signal, Reason: r.Reason, Dirty: r.Dirty}
	for _, id := range e.Changed {
		if sess, ok := s.m.Sessions[id]; ok {
			ev.Decisions = append(ev.Decisions, sessionStatus(*sess, s.cfg.StateDir, ""))
		}
	}
	s.cfg.Observe(ev)
}
