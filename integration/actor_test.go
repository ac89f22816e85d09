package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// When an actor other than the loop fails (the notify, control or metrics
// socket breaks), supervise stops the agent and exits 1, not 0: a service
// manager's Restart=on-failure must see a failure. The failpoint adds an
// actor to the same run group that fails the way a socket actor does.
func TestActorFailureExitsNonZero(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	broken := filepath.Join(e.dir, "broken")
	e.set("SUPERVISE_FAILPOINT_ACTOR_FAIL="+broken, "TESTAGENT_SCRIPT=listen")
	sv := e.run()
	e.waitEvent(1, "listen")
	if err := os.WriteFile(broken, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := sv.wait(20 * time.Second); code != 1 {
		t.Errorf("supervise exited %d after an actor failed, want 1", code)
	}
	if !strings.Contains(sv.stderr(), "an actor stopped the loop") {
		t.Errorf("the log does not say why supervise failed:\n%s", sv.stderr())
	}
	// The agent was stopped, not left behind.
	if left := e.tagged(); len(left) > 0 {
		t.Errorf("agent processes left after supervise exited: %v", left)
	}
}
