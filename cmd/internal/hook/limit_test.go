package hook

import (
	"testing"

	"github.com/supervise-dev/supervise/marker"
)

// Claude Code's StopFailure: a turn a rate or usage limit stopped is a
// wait on the model API (supervise waits the limit out), any other error a
// failed turn.
func TestStopFailureRateLimit(t *testing.T) {
	for raw, want := range map[string]Marker{
		`{"hook_event_name":"StopFailure","session_id":"s1","error":"rate_limit","last_assistant_message":"You've hit your session limit · resets 5:19am (UTC)"}`: {Session: "s1", Event: marker.EventWaiting, Wait: marker.WaitReconnect},
		`{"hook_event_name":"StopFailure","session_id":"s1","error":"server_error"}`:                                                                              {Session: "s1", Event: marker.EventTurnEnd, Outcome: marker.OutcomeFailed},
	} {
		m, _, err := Map([]byte(raw))
		if err != nil || m.Event != want.Event || m.Wait != want.Wait || m.Outcome != want.Outcome || m.Session != want.Session {
			t.Errorf("Map(%s) = %+v, %v; want %+v", raw, m, err, want)
		}
	}
}
