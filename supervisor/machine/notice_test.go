package machine

import (
	"testing"
	"time"

	"github.com/supervise-dev/supervise/marker"
)

// notices returns the Notices of fx as event/session pairs.
func notices(fx []Effect) []string {
	var out []string
	for _, e := range fx {
		if n, ok := e.(Notice); ok {
			out = append(out, n.Event+"/"+n.Session)
		}
	}
	return out
}

// What a person is told (--on-event, supervise events): a wait for a
// person and its end, a limit's wait and its end, a park, each once and as
// it happens.
func TestNotices(t *testing.T) {
	r := newRig(t, taskConfig())
	r.launch()
	r.begin("s1", "t1")
	if got := notices(r.marker(marker.Message{Session: "s2", Event: marker.EventWaiting, Turn: "t9", Wait: marker.WaitApproval})); len(got) != 1 || got[0] != "waiting/s2" {
		t.Fatalf("a wait for a person: %v", got)
	}
	if got := notices(r.marker(marker.Message{Session: "s2", Event: marker.EventPhase, Phase: marker.PhaseTool, Tool: "Bash"})); len(got) != 1 || got[0] != "waiting-end/s2" {
		t.Fatalf("the wait's end: %v", got)
	}
	r.marker(marker.Message{Session: "s2", Event: marker.EventWaiting, Turn: "t9", Wait: marker.WaitInput})
	fx := r.limited(r.now.Add(time.Minute), 0)
	got := notices(fx)
	if len(got) != 3 || got[0] != "limit/s1" || got[1] != "waiting-end/s2" || got[2] != "parked/s2" {
		t.Fatalf("a limit's death: %v, want s1's limit wait, s2's wait ended by its park", got)
	}
	for _, e := range fx {
		if n, ok := e.(Notice); ok && n.Event == NoticeParked && n.Command != ResumeCommand("/state", "s2") {
			t.Errorf("the park's command %q", n.Command)
		}
	}
	r.now = r.sess("s1").RetryAt
	if got := notices(r.step(LaunchDue{})); len(got) != 1 || got[0] != "limit-end/s1" {
		t.Fatalf("the limit's reset: %v", got)
	}
}
