package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 31, items 1 to 3: the tree check by what the kernel knows (R1),
// the journal is the file at its name (R2), records that check themselves
// (R8). Each test is a fault-matrix case of docs/chaos.md.

// statusAll is `supervise status --json --all` for stateDir, decoded
// loosely; it fails the test if status fails.
func statusAll(t *testing.T, stateDir string) status {
	t.Helper()
	out, err := statusAllRaw(stateDir)
	if err != nil {
		t.Fatalf("supervise status --json --all: %v\n%s", err, out)
	}
	var st status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, out)
	}
	return st
}

func statusAllRaw(stateDir string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, superviseBin, "status", "--json", "--all", "--state-dir", stateDir)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return append(out, errb.Bytes()...), err
	}
	return out, nil
}

// turnLoop is an agent that ends one turn after another, each in a session
// of its own (s1, s2, ...), through `supervise notify` with its barrier, and
// appends the session's id to $ACKS once supervise confirmed its turn-end
// journaled. While the file $GATE exists it stops between two turns (and
// says so by creating $PAUSED).
const turnLoop = `i=0
while :; do
	while [ -e "$GATE" ]; do : > "$PAUSED"; sleep 0.02; done
	i=$((i+1))
	"$SV" notify turn-begin --session "s$i" --turn t || exit 3
	"$SV" notify turn-end --session "s$i" --turn t --outcome completed || exit 4
	echo "s$i" >> "$ACKS"
done
`

// acked reads the sessions the agent was told were journaled.
func acked(path string) []string {
	b, _ := os.ReadFile(path)
	return strings.Fields(string(b))
}

// swapJournal is what cp journal.db x && mv x journal.db does.
func swapJournal(t *testing.T, stateDir string) {
	t.Helper()
	path := filepath.Join(stateDir, "journal.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(stateDir, "x")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// symlinkStateDir moves the state dir away and puts at its name a
// symbolic link to a copy of it taken now (a stale copy from then on).
func symlinkStateDir(t *testing.T, stateDir string) {
	t.Helper()
	stale := stateDir + ".stale"
	if err := os.Mkdir(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(stateDir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "journal.db"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(stateDir, stateDir+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(stale, stateDir); err != nil {
		t.Fatal(err)
	}
}

// R2: the journal is replaced under a running supervise while its agent
// ends turns with barriers; supervise must notice at the next commit,
// acknowledge nothing more, kill the tree and exit 1; after a kill -9 (if
// it had not exited) and a restart, every turn-end it acknowledged is in
// the journal the restart reads.
//
// paused: the replacement is made between two of the agent's turns, so
// every acknowledged turn-end was committed before the copy: none may be
// missing. continuous: the agent does not stop; a turn-end committed
// between the copy and the rename is in the old file only (no check can
// see a copy being read), so the test requires every turn-end acknowledged
// before the copy began, and nothing acknowledged after the one commit in
// flight when the rename landed.
func testJournalReplaced(t *testing.T, replace func(*testing.T, string), paused bool) {
	e := newEnv(t)
	script := filepath.Join(e.dir, "agent.sh")
	os.WriteFile(script, []byte(turnLoop), 0o700)
	acks := filepath.Join(e.dir, "acks")
	gate := filepath.Join(e.dir, "gate")
	pausedFile := filepath.Join(e.dir, "paused")
	e.set("SV="+superviseBin, "ACKS="+acks, "GATE="+gate, "PAUSED="+pausedFile)
	sv := e.start("run", "--state-dir", e.stateDir, "--", "sh", script)
	waitFor(t, 60*time.Second, "20 acknowledged turn-ends", func() bool { return len(acked(acks)) >= 20 })
	if paused {
		os.WriteFile(gate, nil, 0o600)
		waitFor(t, 30*time.Second, "the agent to stop between turns", func() bool {
			_, err := os.Stat(pausedFile)
			return err == nil
		})
	}
	before := len(acked(acks))
	replace(t, e.stateDir)
	after := len(acked(acks))
	os.Remove(gate)

	// Fixed, supervise exits 1 at its next commit; unfixed, it goes on
	// acknowledging into the old file: either ends the wait.
	waitFor(t, 60*time.Second, "supervise to exit, or to acknowledge turn-ends after the replacement", func() bool {
		return !sv.running() || len(acked(acks)) > after+1
	})
	if sv.running() {
		t.Errorf("supervise still runs and acknowledges turn-ends after its journal was replaced; kill -9")
		sv.cmd.Process.Signal(syscall.SIGKILL)
	}
	if code := sv.wait(60 * time.Second); code != 1 && code != 128+int(syscall.SIGKILL) {
		t.Errorf("supervise exit code %d after its journal was replaced, want 1 (a journal fault)", code)
	} else if code == 1 && !strings.Contains(sv.stderr(), "journal faulted") {
		t.Errorf("the log does not name the journal fault:\n%s", sv.stderr())
	}
	waitFor(t, 20*time.Second, "the agent's tree to be gone", func() bool { return len(e.tagged()) == 0 })
	all := acked(acks)
	switch {
	case paused && len(all) != after:
		t.Errorf("%d turn-ends acknowledged after the journal was replaced between turns, want 0", len(all)-after)
	case !paused && len(all) > after+1:
		t.Errorf("%d turn-ends acknowledged after the journal was replaced, want at most the one in flight", len(all)-after)
	}

	// The next start reads what is at the name (through the link, in the
	// symlinked case, as a person's restart would).
	next := e.start("run", "--state-dir", e.stateDir, "--", "true")
	if c := next.wait(60 * time.Second); c != 0 {
		t.Fatalf("the restart exited %d, want 0:\n%s", c, next.stderr())
	}
	if strings.Contains(next.stderr(), "moved it aside") {
		t.Errorf("the restart found the replaced journal damaged:\n%s", next.stderr())
	}
	st := statusAll(t, e.stateDir)
	have := map[string]string{}
	for _, s := range st.Sessions {
		have[s.ID] = s.LastOutcome
	}
	missing, window := 0, 0
	for i, id := range all {
		if have[id] == "completed" {
			continue
		}
		if paused || i < before || i > after {
			missing++
			if missing <= 5 {
				t.Errorf("turn-end of %s was acknowledged (%d of %d, %d before the replacement) and is missing after the restart", id, i+1, len(all), before)
			}
		} else {
			window++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged turn-ends missing after the restart", missing, len(all))
	}
	t.Logf("%d turn-ends acknowledged, %d before the replacement began, %d while it was made; %d of those made between the copy and the rename are in the old file only",
		len(all), before, after-before, window)
}

func TestR2JournalSwapped(t *testing.T) {
	t.Parallel()
	t.Run("paused", func(t *testing.T) { testJournalReplaced(t, swapJournal, true) })
	t.Run("continuous", func(t *testing.T) { testJournalReplaced(t, swapJournal, false) })
}

func TestR2StateDirSymlinked(t *testing.T) {
	t.Parallel()
	t.Run("paused", func(t *testing.T) { testJournalReplaced(t, symlinkStateDir, true) })
}

// forkedResume is a Python program that connects to the control socket
// argv[1], forks and exits; the child waits until it was re-parented (the
// process that connected is gone), sends POST /resume?session=argv[2] on
// the connection and writes the status line it got to argv[3].
const forkedResume = `
import os, socket, sys
path, session, out = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
me = os.getpid()
if os.fork() != 0:
    os._exit(0)
while os.getppid() == me:
    os.sched_yield()
s.sendall(("POST /resume?session=%s HTTP/1.1\r\nHost: supervise\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" % session).encode())
data = b""
while True:
    b = s.recv(4096)
    if not b:
        break
    data += b
with open(out + ".tmp", "w") as f:
    f.write(data.decode(errors="replace").split("\r\n")[0] + "\n")
os.rename(out + ".tmp", out)
`

// parkedSession starts supervise with an agent that parks s1 (two dirty
// deaths mid-turn: the crash breaker) and then runs script as its third
// run; once s1 is parked it creates the file $GO, which the attack waits
// for.
func parkedSession(t *testing.T, e *env, script string) *proc {
	t.Helper()
	gate := filepath.Join(e.dir, "go")
	e.set("SV="+superviseBin, "GO="+gate,
		"TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; exit 1",
		"TESTAGENT_SCRIPT_2=resumed s1 t1; barrier; exit 1",
		"TESTAGENT_SCRIPT_3=log parked; "+script)
	sv := e.run("--backoff-initial", "10ms")
	e.waitLog(3, "parked")
	if got := sessionState(t, e, "s1"); got != "parked" {
		t.Fatalf("s1 is %q before the attack, want parked", got)
	}
	os.WriteFile(gate, nil, 0o600)
	return sv
}

func sessionState(t *testing.T, e *env, id string) string {
	t.Helper()
	for _, s := range e.status().Sessions {
		if s.ID == id {
			return s.State
		}
	}
	return ""
}

// waitFile waits for path to exist and returns its content.
func waitFile(t *testing.T, path, what string) string {
	t.Helper()
	var b []byte
	waitFor(t, 60*time.Second, what, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil
	})
	return string(b)
}

// afterAttack checks that s1 is still parked and the refusal logged, then
// that a person's supervise resume, from this test (no descendant of
// supervise), still works.
func afterAttack(t *testing.T, e *env, sv *proc, answer string) {
	t.Helper()
	if !strings.Contains(answer, "403") {
		t.Errorf("the agent's resume got %q, want a 403 refusal", strings.TrimSpace(answer))
	}
	if got := sessionState(t, e, "s1"); got != "parked" {
		t.Errorf("s1 is %q after the agent's own resume, want parked", got)
	}
	if !strings.Contains(sv.stderr(), "control: refused a resume") {
		t.Errorf("the refusal is not logged:\n%s", sv.stderr())
	}
	if out, code := e.cli("resume", "--state-dir", e.stateDir, "s1"); code != 0 {
		t.Errorf("a person's resume from outside the tree failed (%d): %s", code, out)
	} else if got := sessionState(t, e, "s1"); got == "parked" {
		t.Errorf("s1 is still parked after a person's resume")
	}
	e.stop(sv)
}

// R1 (orphan): a process of the agent's tree orphans itself (re-parented to
// supervise, a child subreaper) and clears its environment, so it lacks
// the SUPERVISE_TREE tag, then runs supervise resume on its own session:
// refused, and the session stays parked.
func TestR1OrphanResumeRefused(t *testing.T) {
	t.Parallel()
	requireLinuxBackend(t, "the control socket's peer credentials (pidfd, SO_PEERCRED)")
	e := newEnv(t)
	out := filepath.Join(e.dir, "orphan.out")
	script := filepath.Join(e.dir, "orphan.sh")
	// The subshell outlives the sh that started it (re-parented to
	// supervise), waits until that sh is gone, and runs supervise resume
	// with an empty environment.
	os.WriteFile(script, []byte(`while [ ! -e "$GO" ]; do sleep 0.01; done
(
	while kill -0 $$ 2>/dev/null; do sleep 0.01; done
	env -i "$SV" resume --state-dir "$SUPERVISE_STATE_DIR" s1 > "$OUT.tmp" 2>&1
	echo "exit $?" >> "$OUT.tmp"
	mv "$OUT.tmp" "$OUT"
) &
exit 0
`), 0o600)
	e.set("OUT="+out, "ORPHAN="+script)
	sv := parkedSession(t, e, `sh sh "$ORPHAN"; log tried; hang`)
	answer := waitFile(t, out, "the orphan's resume to finish")
	if strings.Contains(answer, "exit 0") {
		t.Errorf("the orphan's supervise resume succeeded: %q", answer)
	}
	if strings.Contains(answer, "refused") {
		answer += " (403)"
	}
	afterAttack(t, e, sv, answer)
}

// R1 (forked connection): connect to the control socket, fork, let the
// connecting process exit, and send POST /resume from the child: the peer
// recorded at connect is gone, so the request is refused (fail closed),
// not taken as coming from outside.
func TestR1ForkedConnectionRefused(t *testing.T) {
	t.Parallel()
	requireLinuxBackend(t, "the control socket's peer credentials (pidfd, SO_PEERCRED)")
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found: the forking client is a Python program")
	}
	e := newEnv(t)
	prog := filepath.Join(e.dir, "forked.py")
	os.WriteFile(prog, []byte(forkedResume), 0o600)
	out := filepath.Join(e.dir, "forked.out")
	script := filepath.Join(e.dir, "forked.sh")
	os.WriteFile(script, []byte(`while [ ! -e "$GO" ]; do sleep 0.01; done
exec python3 "$PROG" "$SUPERVISE_STATE_DIR/control.sock" s1 "$OUT"
`), 0o600)
	e.set("PROG="+prog, "OUT="+out, "FORKED="+script)
	sv := parkedSession(t, e, `sh sh "$FORKED"; log tried; hang`)
	afterAttack(t, e, sv, waitFile(t, out, "the forked client's answer"))
}

// recordCopies returns the extents of every copy of session id's record
// in the journal file raw (the live one and any left in freed pages): from
// `{"id":"ID",` to the end of its check member.
func recordCopies(raw []byte, id string) [][2]int {
	var out [][2]int
	start := []byte(`{"id":"` + id + `","state":`)
	for off := 0; ; {
		i := bytes.Index(raw[off:], start)
		if i < 0 {
			return out
		}
		i += off
		end := bytes.IndexByte(raw[i:], '}') + 1 // a record without a check (schema 1) has no nested object here
		if j := bytes.Index(raw[i:], []byte(`"crc32c":"`)); j >= 0 && j < 64<<10 {
			end = j + len(`"crc32c":"`) + 8 + 2
		}
		if end <= 0 {
			return out
		}
		out = append(out, [2]int{i, i + end})
		off = i + 1
	}
}

// R8: one bit flipped in a settled session record's value bytes, 50
// seeded flips. status works offline, live (a supervise running on that
// journal), and after that run; the session is shown parked, damaged, with
// its id; the others are as they were.
func TestR8FlippedSessionRecordStatus(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	e := newEnv(t)
	script := ""
	for i := 1; i <= 5; i++ {
		script += fmt.Sprintf("turn-begin s%d t1; turn-end s%d t1 completed; ", i, i)
	}
	e.set("TESTAGENT_SCRIPT=" + script + "barrier; exit 0")
	if code := e.run().wait(60 * time.Second); code != 0 {
		t.Fatalf("the run that writes the sessions exited %d", code)
	}
	pristine, err := os.ReadFile(filepath.Join(e.stateDir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	copies := recordCopies(pristine, "s3")
	if len(copies) == 0 {
		t.Fatalf("no record of s3 in the journal")
	}
	shortest := copies[0][1] - copies[0][0]
	for _, c := range copies {
		shortest = min(shortest, c[1]-c[0])
	}
	check := func(t *testing.T, when, stateDir string) {
		t.Helper()
		out, err := statusAllRaw(stateDir)
		if err != nil {
			t.Fatalf("%s: supervise status failed: %v\n%s", when, err, out)
		}
		var st status
		if err := json.Unmarshal(out, &st); err != nil {
			t.Fatalf("%s: status JSON: %v\n%s", when, err, out)
		}
		seen := 0
		for _, s := range st.Sessions {
			switch {
			case s.ID == "s3" && (s.State != "parked" || !strings.Contains(s.Reason, "checksum")):
				t.Errorf("%s: s3 is %s (%q), want parked as damaged", when, s.State, s.Reason)
			case s.ID != "s3" && s.LastOutcome != "completed":
				t.Errorf("%s: %s is %s/%q, want its completed turn", when, s.ID, s.State, s.LastOutcome)
			}
			seen++
		}
		if seen != 5 {
			t.Errorf("%s: %d sessions shown, want 5", when, seen)
		}
	}
	for n := range 50 {
		bit := rng.IntN(shortest * 8)
		t.Run(fmt.Sprintf("flip%d-bit%d", n, bit), func(t *testing.T) {
			raw := bytes.Clone(pristine)
			for _, c := range copies { // the live copy among them
				raw[c[0]+bit/8] ^= 1 << (bit % 8)
			}
			f := newEnv(t)
			os.MkdirAll(f.stateDir, 0o700)
			os.WriteFile(filepath.Join(f.stateDir, "journal.db"), raw, 0o600)
			check(t, "offline", f.stateDir)
			f.set("TESTAGENT_SCRIPT=ready; hang")
			sv := f.run()
			waitFor(t, 30*time.Second, "supervise to run the agent", func() bool { return f.count("start") >= 1 })
			check(t, "live", f.stateDir)
			f.stop(sv)
			check(t, "after the run", f.stateDir)
		})
	}
}

// R8 at boot: the record of a session that was mid-turn when supervise was
// killed fails its check. The next start does not resume it (nothing about
// its turn can be believed): it is shown parked, damaged, with its id.
func TestR8DamagedOpenSessionNotResumed(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1; turn-begin s2 t1; barrier; hang", "TESTAGENT_SCRIPT=resume-file; hang")
	sv := e.run("--backoff-initial", "10ms")
	e.waitEvent(1, "barrier-ok")
	sv.signal(syscall.SIGKILL)
	sv.wait(30 * time.Second)
	if !portableBackend { // there the agent outlives supervise until the next one ends it (docs/macos.md)
		waitFor(t, 20*time.Second, "the agent's tree to be gone", func() bool { return len(e.tagged()) == 0 })
	}
	path := filepath.Join(e.stateDir, "journal.db")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	copies := recordCopies(raw, "s1")
	if len(copies) == 0 {
		t.Fatal("no record of s1 in the journal")
	}
	shortest := copies[0][1] - copies[0][0]
	for _, c := range copies {
		shortest = min(shortest, c[1]-c[0])
	}
	bit := rng.IntN(shortest * 8)
	for _, c := range copies {
		raw[c[0]+bit/8] ^= 1 << (bit % 8)
	}
	os.WriteFile(path, raw, 0o600)
	t.Logf("flipped bit %d of s1's record", bit)

	next := e.run("--backoff-initial", "10ms")
	ev := e.waitEvent(2, "resume-file")
	if strings.Contains(ev.arg, "s1") {
		t.Errorf("the damaged session was resumed: %s", ev.arg)
	}
	if !strings.Contains(ev.arg, "s2") {
		t.Errorf("the intact session s2 was not resumed: %q", ev.arg)
	}
	for _, s := range e.status().Sessions {
		if s.ID == "s1" && (s.State != "parked" || !strings.Contains(s.Reason, "checksum")) {
			t.Errorf("s1 is %s (%q), want parked as damaged", s.State, s.Reason)
		}
	}
	e.stop(next)
}
