package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// buildFirstMarker compiles testdata/firstmarker.c, the quickest agent
// there is (as the issue measured it: a small C agent), or skips.
func buildFirstMarker(t *testing.T) string {
	t.Helper()
	cc := ""
	for _, name := range []string{os.Getenv("CC"), "cc", "gcc", "clang"} {
		if p, err := exec.LookPath(name); name != "" && err == nil {
			cc = p
			break
		}
	}
	if cc == "" {
		t.Skip("no C compiler (cc, gcc or clang; apt-get install gcc): the agent that speaks at exec is C, so that nothing runs before its first datagram")
	}
	bin := filepath.Join(t.TempDir(), "firstmarker")
	if out, err := exec.Command(cc, "-O2", "-Wall", "-o", bin, filepath.Join("testdata", "firstmarker.c")).CombinedOutput(); err != nil {
		t.Fatalf("%s testdata/firstmarker.c: %v\n%s", cc, err, out)
	}
	return bin
}

// notifyCounters reads the notify counters from status --json.
func (e *env) notifyCounters() (accepted uint64, dropped map[string]uint64, outOfSequence uint64) {
	e.t.Helper()
	var st struct {
		Notify *struct {
			Accepted      uint64            `json:"accepted"`
			Dropped       map[string]uint64 `json:"dropped"`
			OutOfSequence uint64            `json:"out_of_sequence"`
		} `json:"notify"`
	}
	raw := e.statusRaw()
	if err := json.Unmarshal([]byte(raw), &st); err != nil || st.Notify == nil {
		e.t.Fatalf("no notify counters in status (%v):\n%s", err, raw)
	}
	return st.Notify.Accepted, st.Notify.Dropped, st.Notify.OutOfSequence
}

// The first marker is never dropped. An agent that sends turn-begin and a
// barrier (BARRIER=1 with a pipe's write end) as the very first thing at
// exec, then turn-end completed and a barrier, and exits 0, is relaunched
// by one supervise (--restart always) again and again: every barrier is
// answered '1', and no datagram of the agent's is dropped as a stranger's
// (a '1' alone would not show a refused marker whose refusal was
// forgotten when the child's start was recorded). 200 runs; SUPERVISE_LONG
// makes it 2000.
func TestFirstMarkerNeverDropped(t *testing.T) {
	agent := buildFirstMarker(t)
	n := iterations(200, 2000)
	e := newEnv(t)
	answers := filepath.Join(e.dir, "answers")
	e.set("FIRSTMARKER_ANSWERS="+answers, fmt.Sprintf("FIRSTMARKER_LAST=%d", n))
	start := time.Now()
	sv := e.start("run", "--restart", "always", "--", agent)
	var records []string
	waitFor(t, 10*time.Minute, fmt.Sprintf("%d runs of the agent", n), func() bool {
		b, _ := os.ReadFile(answers)
		records = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		return len(b) > 0 && len(records) >= n || !sv.running()
	})
	if !sv.running() {
		t.Fatalf("supervise exited %d after %d runs:\n%s", sv.code, len(records), lastBytes(sv.stderr(), 4000))
	}
	elapsed := time.Since(start)
	accepted, dropped, seq := e.notifyCounters()
	e.stop(sv)

	begin, end := map[string]int{}, map[string]int{}
	var bad []string
	for _, r := range records {
		var run int
		var b, en string
		if _, err := fmt.Sscanf(r, "run=%d begin=%s end=%s", &run, &b, &en); err != nil {
			t.Fatalf("bad record %q: %v", r, err)
		}
		begin[b]++
		end[en]++
		if b != "1" || en != "1" {
			bad = append(bad, r)
		}
	}
	// Datagrams are taken in order, so an unconfirmed barrier ('E') had
	// its marker dropped too: two drops. Any drop beyond those is a marker
	// whose barrier still answered '1'.
	falseAcks := int(dropped["sender"]) - 2*(n-begin["1"]) - 2*(n-end["1"])
	t.Logf("%d runs in %v: turn-begin barriers %v, turn-end barriers %v; datagrams accepted %d, dropped %v (%d markers dropped under a barrier answered '1'), out of sequence %d",
		len(records), elapsed.Round(time.Millisecond), begin, end, accepted, dropped, max(falseAcks, 0), seq)
	if begin["1"] != n || end["1"] != n {
		t.Errorf("%d of %d turn-begin barriers and %d of %d turn-end barriers answered '1' ('0' refused, 'E' closed unconfirmed, 'T' no answer); first: %v",
			begin["1"], n, end["1"], n, bad[:min(len(bad), 10)])
	}
	if dropped["sender"] != 0 {
		t.Errorf("%d datagrams of the agent dropped as a stranger's (reason sender), %d of them markers whose barrier answered '1'",
			dropped["sender"], max(falseAcks, 0))
	}
	var runs []int
	for _, r := range records {
		var run int
		fmt.Sscanf(r, "run=%d", &run)
		runs = append(runs, run)
	}
	slices.Sort(runs)
	for i, run := range runs {
		if run != i+1 || len(runs) != n {
			t.Errorf("records of runs %v, want one for each of runs 1 to %d", runs, n)
			break
		}
	}
}
