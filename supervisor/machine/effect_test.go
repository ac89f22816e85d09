package machine

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/record"
)

// effect is the datagram of a declared side effect.
func (r *rig) effect(session, key string) []Effect {
	return r.marker(marker.Message{Session: session, Event: marker.EventEffect, Effect: key})
}

// Effects declared in a turn are journaled with the session, each once,
// bounded; the observer hears each declaration with its key (a repeat
// too: chaos judges it); they survive a death and a resume of the same
// turn, the decision's continuation names them, and the next turn-begin
// clears them.
func TestEffectsFollowTheTurn(t *testing.T) {
	r := newRig(t, testConfig())
	r.launch()
	r.begin("s1", "t1")
	r.effect("s1", "write:a.go")
	fx := r.effect("s1", "write:a.go")
	if o, ok := find[ObserveMarker](fx); !ok || o.Event != "effect" || o.Effect != "write:a.go" {
		t.Errorf("the observer was not told of the repeated effect with its key: %#v", fx)
	}
	r.effect("s1", "Bash:npm publish")
	if !r.sess("s1").ToolRan {
		t.Error("an effect does not count as a tool that ran (DESIGN: a lost conversation is started again only when no tool phase or effect came)")
	}
	if got := r.sess("s1").Effects; !slices.Equal(got, []string{"write:a.go", "Bash:npm publish"}) {
		t.Fatalf("effects %q", got)
	}
	if sv, ok := find[Save](fx); !ok || !slices.Contains(sv.IDs, "s1") {
		t.Errorf("an effect is not saved: %#v", fx)
	}
	r.killed(9)
	s := r.sess("s1")
	if s.State != record.ResumePending || !strings.Contains(s.Resume.Message, "`write:a.go`, `Bash:npm publish`") ||
		len(s.Effects) != 2 {
		t.Fatalf("after the kill: state %s, effects %q, message %q", s.State, s.Effects, s.Resume.Message)
	}
	r.launch()
	r.marker(marker.Message{Session: "s1", Event: marker.EventResumed, Turn: "t1"})
	r.effect("s1", "write:b.go")
	if got := r.sess("s1").Effects; len(got) != 3 {
		t.Errorf("the resumed turn lost or did not add effects: %q", got)
	}
	r.end("s1", "t1", marker.OutcomeCompleted)
	r.begin("s1", "t2")
	if got := r.sess("s1").Effects; got != nil {
		t.Errorf("turn-begin kept the last turn's effects: %q", got)
	}
	for i := range record.MaxEffects + 10 {
		r.effect("s1", fmt.Sprint("k", i))
	}
	if got := r.sess("s1").Effects; len(got) != record.MaxEffects || got[0] != "k0" {
		t.Errorf("%d effects kept (first %q), want the first %d", len(got), got[0], record.MaxEffects)
	}
}

// A turn-begin supervise ignores (the turn that just ended, begun again)
// still reaches the observer, marked ignored: chaos judges turn-fresh by
// it.
func TestIgnoredTurnBeginIsObserved(t *testing.T) {
	r := newRig(t, testConfig())
	r.launch()
	r.begin("s1", "t1")
	r.end("s1", "t1", marker.OutcomeCompleted)
	fx := r.begin("s1", "t1")
	o, ok := find[ObserveMarker](fx)
	if !ok || !o.Ignored || o.Event != "turn-begin" || o.Turn != "t1" {
		t.Errorf("the ignored turn-begin was not observed as such: %#v", fx)
	}
	if s := r.sess("s1"); s.State != record.Idle {
		t.Errorf("the ignored turn-begin was applied: %s", s.State)
	}
}
