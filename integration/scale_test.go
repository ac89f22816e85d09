package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
)

// scaleStatus is the part of status --json the scale test reads.
type scaleStatus struct {
	Supervisor struct {
		Running bool `json:"running"`
	} `json:"supervisor"`
	Sessions []struct {
		ID    string `json:"id"`
		State string `json:"state"`
	} `json:"sessions"`
	SessionCounts   map[string]int `json:"session_counts"`
	SessionsTotal   int            `json:"sessions_total"`
	SessionsOmitted int            `json:"sessions_omitted"`
}

// statusJSON runs supervise status --json with args and decodes it,
// failing on invalid JSON.
func (e *env) statusJSON(t *testing.T, args ...string) (scaleStatus, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, superviseBin, append([]string{"status", "--json", "--state-dir", e.stateDir}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("supervise status --json %v: %v\n%s", args, err, stderr.String())
	}
	var st scaleStatus
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json %v: %d bytes of invalid JSON: %v", args, len(out), err)
	}
	return st, len(out)
}

// buildSessions writes settled settled sessions and open parked ones into
// the state dir's journal, through the journal package.
func buildSessions(t *testing.T, stateDir string, settled, open int) {
	t.Helper()
	os.MkdirAll(stateDir, 0o700)
	db, err := journal.Open(stateDir+"/journal.db", journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	base := time.Now().Add(-time.Duration(settled) * time.Second)
	for lo := 0; lo < settled; lo += 10_000 { // ids in order: bbolt inserts fast
		err := db.Update(func(tx *journal.Tx) error {
			for i := lo; i < min(lo+10_000, settled); i++ {
				if err := tx.PutSession(record.Session{ID: fmt.Sprintf("s%06d", i), State: record.Closed,
					Turn: "t1", Updated: base.Add(time.Duration(i) * time.Second)}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err = db.Update(func(tx *journal.Tx) error {
		for i := range open {
			if err := tx.PutSession(record.Session{ID: fmt.Sprintf("parked%d", i), State: record.Parked,
				Reason: "test", Updated: base.Add(-time.Hour)}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStatusAtScale is issue 12 finding 3: with 100 000 sessions in the
// journal (SUPERVISE_LONG=1; 10 000 otherwise), status is valid JSON whether supervise runs or not: by default
// the open sessions, the latest settled ones and counts per state; --all
// streams every one (18+ MB, over what the client used to accept);
// --session shows one. Then --keep-sessions prunes the settled ones, oldest
// first, while supervise runs; the open ones stay.
func TestStatusAtScale(t *testing.T) {
	const open = 5
	settled := 10_000
	if os.Getenv("SUPERVISE_LONG") != "" {
		settled = 100_000 // about 25 s on a loaded 2-core machine
	}
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=hang")
	begin := time.Now()
	buildSessions(t, e.stateDir, settled, open)
	t.Logf("journal with %d sessions built in %v", settled+open, time.Since(begin))

	check := func(t *testing.T, running bool) {
		begin := time.Now()
		st, size := e.statusJSON(t)
		t.Logf("running=%v: status --json: %d bytes in %v", running, size, time.Since(begin))
		if st.Supervisor.Running != running {
			t.Errorf("supervisor.running = %v, want %v", st.Supervisor.Running, running)
		}
		if st.SessionsTotal != settled+open || st.SessionCounts["closed"] != settled || st.SessionCounts["parked"] != open {
			t.Errorf("total %d, counts %v; want %d, closed %d, parked %d", st.SessionsTotal, st.SessionCounts, settled+open, settled, open)
		}
		parked, latest := 0, 0
		for _, s := range st.Sessions {
			switch {
			case s.State == "parked":
				parked++
			case s.ID >= fmt.Sprintf("s%06d", settled-20):
				latest++
			default:
				t.Errorf("default status lists %s (%s): neither open nor among the latest settled", s.ID, s.State)
			}
		}
		if parked != open || latest != 20 || st.SessionsOmitted != settled-20 {
			t.Errorf("default status: %d parked, %d latest settled, %d omitted; want %d, 20, %d", parked, latest, st.SessionsOmitted, open, settled-20)
		}
		begin = time.Now()
		all, size := e.statusJSON(t, "--all")
		t.Logf("running=%v: status --json --all: %d bytes in %v", running, size, time.Since(begin))
		if len(all.Sessions) != settled+open || all.SessionsTotal != settled+open || all.SessionsOmitted != 0 {
			t.Errorf("--all lists %d sessions (total %d, omitted %d), want %d", len(all.Sessions), all.SessionsTotal, all.SessionsOmitted, settled+open)
		}
		one, _ := e.statusJSON(t, "--session", "s000042")
		if len(one.Sessions) != 1 || one.Sessions[0].ID != "s000042" || one.Sessions[0].State != "closed" {
			t.Errorf("--session s000042: %+v", one.Sessions)
		}
	}
	t.Run("offline", func(t *testing.T) { check(t, false) })

	p := e.run("--keep-sessions", "0")
	e.waitEvent(1, "start")
	t.Run("live", func(t *testing.T) { check(t, true) })
	p.signal(15)
	if code := p.wait(30 * time.Second); code != 0 {
		t.Fatalf("supervise exit %d", code)
	}

	const keep = 1000
	p = e.run("--keep-sessions", fmt.Sprint(keep))
	e.waitEvent(2, "start")
	waitFor(t, 3*time.Minute, "--keep-sessions to prune the journal", func() bool {
		st, _ := e.statusJSON(t)
		return st.SessionsTotal == keep+open
	})
	st, _ := e.statusJSON(t)
	if st.SessionCounts["parked"] != open || st.SessionCounts["closed"] != keep {
		t.Errorf("after pruning: %v, want %d closed and every %d parked", st.SessionCounts, keep, open)
	}
	all, _ := e.statusJSON(t, "--all")
	for _, s := range all.Sessions {
		if s.State == "closed" && s.ID < fmt.Sprintf("s%06d", settled-keep) {
			t.Errorf("%s kept, older than the newest %d settled", s.ID, keep)
		}
	}
	p.signal(15)
	p.wait(30 * time.Second)
}
