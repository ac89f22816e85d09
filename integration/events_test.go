package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --on-event: a park runs the command with one JSON document on its stdin
// naming the event, the agent, the session and the command that resumes
// it, and the same in SUPERVISE_EVENT_* variables; supervise events prints
// the document. A command that hangs blocks neither status nor the
// relaunch, and is killed (counted as failed) after 10 s.
func TestOnEventParked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := filepath.Join(t.TempDir(), "events")
	e.set("OUT="+out, "TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; exit 1", "TESTAGENT_SCRIPT=log later; listen")
	sv := e.run("--name", "coder", "--state-dir", e.stateDir, "--resume-limit", "0", "--backoff-initial", "10ms",
		"--on-event", `cat >> "$OUT"; echo "env $SUPERVISE_EVENT $SUPERVISE_EVENT_NAME $SUPERVISE_EVENT_SESSION" >> "$OUT"`)
	e.waitLog(2, "later")
	var doc struct{ Event, Name, Session, Command, State_Dir string }
	waitFor(t, 10*time.Second, "the --on-event command to run for the park", func() bool {
		b, _ := os.ReadFile(out)
		for _, l := range strings.Split(string(b), "\n") {
			if json.Unmarshal([]byte(l), &doc) == nil && doc.Event == "parked" {
				return strings.Contains(string(b), "env parked coder s1")
			}
		}
		return false
	})
	if doc.Name != "coder" || doc.Session != "s1" || !strings.Contains(doc.Command, "supervise resume --state-dir "+e.stateDir+" s1") {
		t.Errorf("the park's document %+v", doc)
	}
	if got, code := e.cli("events", "--state-dir", e.stateDir); code != 0 || !strings.Contains(got, `"event":"parked"`) || !strings.Contains(got, `"session":"s1"`) {
		t.Errorf("supervise events: %d %s", code, got)
	}
	e.stop(sv)
}

func TestOnEventHangingCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; exit 1", "TESTAGENT_SCRIPT=log later; listen")
	sv := e.run("--state-dir", e.stateDir, "--resume-limit", "0", "--backoff-initial", "10ms", "--on-event", "sleep 600")
	e.waitLog(2, "later") // the relaunch came, the command hanging
	begin := time.Now()
	st := e.status()
	if time.Since(begin) > 5*time.Second || len(st.Sessions) != 1 || st.Sessions[0].State != "parked" {
		t.Errorf("status beside a hanging --on-event command: %+v", st.Sessions)
	}
	waitFor(t, 30*time.Second, "the hanging command killed and counted", func() bool {
		return strings.Contains(sv.stderr(), "--on-event command failed") && strings.Contains(sv.stderr(), "killed after 10s")
	})
	e.stop(sv)
}
