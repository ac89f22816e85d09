package integration

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
)

// Fault matrix, reliability.md section 5 A: the journal under supervisor
// death and disk faults. docs/chaos.md has the table.

// seedFor returns the seed of a randomized case: SUPERVISE_MATRIX_SEED if
// set, else the clock; it is logged so a failure can be replayed.
func seedFor(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SUPERVISE_MATRIX_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (replay with SUPERVISE_MATRIX_SEED=%d)", seed, seed)
	return seed
}

// checkJournal opens the journal offline and checks it the way the chaos
// suite does: it opens, every page passes tx.Check, every record decodes,
// and each session's open-index entry agrees with its state (a transaction
// is all there or not at all). It returns the sessions.
func checkJournal(t *testing.T, path string) map[string]record.Session {
	t.Helper()
	db, err := journal.Open(path, journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("journal does not open: %v", err)
	}
	defer db.Close()
	if err := db.Verify(); err != nil {
		t.Fatalf("journal check: %v", err)
	}
	if err := db.CheckRecords(); err != nil {
		t.Fatalf("journal records: %v", err)
	}
	sessions := map[string]record.Session{}
	db.View(func(tx *journal.Tx) error {
		if err := forEachSession(tx, func(s record.Session) { sessions[s.ID] = s }); err != nil {
			t.Fatalf("sessions: %v", err)
		}
		open, err := tx.OpenSessions()
		if err != nil {
			t.Fatalf("open sessions: %v", err)
		}
		inIndex := map[string]bool{}
		for _, s := range open {
			inIndex[s.ID] = true
		}
		for id, s := range sessions {
			if s.State.Open() != inIndex[id] {
				t.Errorf("session %s is %s but its open-index entry is %v: a torn transaction", id, s.State, inIndex[id])
			}
		}
		return nil
	})
	return sessions
}

// ackedFills lists the sessions whose "fill" marker the agent saw
// acknowledged, and whether any unacknowledged one came before an acked one.
func (e *env) fills() (acked []string, firstUnacked int, ackedAfter []string) {
	firstUnacked = -1
	for i, ev := range e.events() {
		switch ev.kind {
		case "fill-acked":
			acked = append(acked, ev.arg)
			if firstUnacked >= 0 {
				ackedAfter = append(ackedAfter, ev.arg)
			}
		case "fill-unacked":
			if firstUnacked < 0 {
				firstUnacked = i
			}
		}
	}
	return acked, firstUnacked, ackedAfter
}

// strace attaches strace to pid with args and waits until every thread is
// traced. It returns a function that detaches (ends strace).
func strace(t *testing.T, pid int, args ...string) func() {
	t.Helper()
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace not installed (Debian: apt-get install strace)")
	}
	cmd := exec.Command("strace", append([]string{"-f", "-qq", "-p", strconv.Itoa(pid), "-o", "/dev/null"}, args...)...)
	errPipe, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var errText strings.Builder
	go io.Copy(&errText, errPipe)
	// strace reports nothing on attach with -qq; wait until every thread
	// of pid shows a tracer.
	waitFor(t, 10*time.Second, "strace to attach to every thread", func() bool {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, task := range tasks {
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
			if !strings.Contains(string(b), "TracerPid:\t"+strconv.Itoa(cmd.Process.Pid)) {
				return false
			}
		}
		return len(tasks) > 0
	})
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cmd.Process.Signal(syscall.SIGTERM) // strace detaches on SIGTERM
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}

// 8. An fsync that fails (EIO injected into the first fdatasync by strace;
// later ones succeed, so a retry would "work"): supervise fails closed. The
// marker in that commit and every later one are never acknowledged, the log
// says why, the agent is stopped and supervise exits 1; the journal is
// clean and the next start checks it before trusting it.
func TestFault08FsyncEIO(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=fill 2; log ready; listen")
	sv := e.run("--stop-timeout", "2s")
	e.waitLog(1, "ready")
	before, _, _ := e.fills()
	if len(before) != 2 {
		t.Fatalf("baseline markers not acknowledged: %v", before)
	}
	strace(t, sv.cmd.Process.Pid, "-e", "trace=fdatasync", "-e", "inject=fdatasync:error=EIO:when=1")
	f, err := os.OpenFile(e.fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("fill 6\n")
	f.Close()
	waitFor(t, 30*time.Second, "the markers to be sent or supervise to exit", func() bool {
		return e.count("fill-done") >= 2 || !sv.running()
	})
	// The agent may be stopped before it logs its unacknowledged marker;
	// what counts is that no marker past the two baseline ones was acked.
	acked, _, after := e.fills()
	if len(after) > 0 {
		t.Errorf("acknowledged after the first failed fsync: %v", after)
	}
	if len(acked) != 2 {
		t.Errorf("acknowledged %v, want only the two baseline markers", acked)
	}
	if code := sv.wait(30 * time.Second); code != 1 {
		t.Errorf("supervise exit %d after a failed fsync, want 1", code)
	}
	for _, want := range []string{"failing closed", "input/output error"} {
		if !strings.Contains(sv.stderr(), want) {
			t.Errorf("log lacks %q:\n%s", want, sv.stderr())
		}
	}
	if left := e.tagged(); len(left) > 0 {
		t.Errorf("processes left running after failing closed: %v", left)
	}
	sessions := checkJournal(t, filepath.Join(e.stateDir, "journal.db"))
	for _, id := range acked {
		if _, ok := sessions[id]; !ok {
			t.Errorf("acknowledged marker %s lost", id)
		}
	}
	// The next start checks every page before trusting the journal.
	if _, err := os.Stat(filepath.Join(e.stateDir, "journal.db.verify-failed")); err != nil {
		t.Errorf("no marker asking the next start to check the journal: %v", err)
	}
	e.set("TESTAGENT_SCRIPT=hang")
	sv = e.run()
	e.waitEvent(0, "hang")
	if _, err := os.Stat(filepath.Join(e.stateDir, "journal.db.verify-failed")); err == nil {
		t.Error("the next start did not check the journal")
	}
	e.stop(sv)
}

// 10. The filesystem under a running supervise turns read-only (ext4 with
// errors=remount-ro on a loop device, an error triggered through sysfs, as
// a failing disk would): the same as 8, fail closed, nothing acknowledged
// after the first error, the log says so; the journal is clean and holds
// every acknowledged marker once the disk is back.
func TestFault10ReadOnlyFilesystem(t *testing.T) {
	long(t, "root-only: makes an ext4 filesystem on a loop device and forces it read-only")
	if os.Geteuid() != 0 {
		t.Skip("needs root: a loop device and mount")
	}
	for _, tool := range []string{"mkfs.ext4", "losetup", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o700)
	if out, err := exec.Command("sh", "-c", "truncate -s 32M "+img+" && mkfs.ext4 -q -F "+img).CombinedOutput(); err != nil {
		t.Skipf("mkfs: %v %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop,errors=remount-ro", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a loop device here: %v %s", err, out)
	}
	mounted := true
	unmount := func() {
		if mounted {
			mounted = false
			exec.Command("umount", mnt).Run()
		}
	}
	t.Cleanup(unmount)
	src, _ := exec.Command("findmnt", "-no", "SOURCE", mnt).Output()
	trigger := filepath.Join("/sys/fs/ext4", filepath.Base(strings.TrimSpace(string(src))), "trigger_fs_error")
	if _, err := os.Stat(trigger); err != nil {
		t.Skipf("this kernel has no %s: %v", trigger, err)
	}
	e := newEnv(t)
	e.stateDir = filepath.Join(mnt, "state")
	e.vars = append(e.vars, "SUPERVISE_STATE_DIR="+e.stateDir)
	e.set("TESTAGENT_SCRIPT=fill 2; log ready; listen")
	sv := e.run("--stop-timeout", "2s")
	e.waitLog(1, "ready")
	if err := os.WriteFile(trigger, []byte("supervise fault matrix case 10"), 0o200); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the filesystem to turn read-only", func() bool {
		err := os.WriteFile(filepath.Join(mnt, "probe"), []byte("x"), 0o600)
		return errors.Is(err, syscall.EROFS)
	})
	f, err := os.OpenFile(e.fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("fill 6\n")
	f.Close()
	if code := sv.wait(30 * time.Second); code != 1 {
		t.Errorf("supervise exit %d on a read-only journal, want 1", code)
	}
	acked, _, after := e.fills()
	if len(after) > 0 || len(acked) != 2 {
		t.Errorf("acked %v (want only the two baseline markers), acked after the first failure %v", acked, after)
	}
	for _, want := range []string{"failing closed", "read-only file system"} {
		if !strings.Contains(sv.stderr(), want) {
			t.Errorf("log lacks %q:\n%s", want, sv.stderr())
		}
	}
	// The disk back: repair the filesystem, mount it again, check.
	unmount()
	exec.Command("e2fsck", "-fy", img).Run()
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v %s", err, out)
	}
	mounted = true
	sessions := checkJournal(t, filepath.Join(e.stateDir, "journal.db"))
	for _, id := range acked {
		if _, ok := sessions[id]; !ok {
			t.Errorf("acknowledged marker %s lost", id)
		}
	}
}

// 2. bbolt's failpoints beforeSyncDataPages and beforeSyncMetaPage, as a
// process sees them: supervise is killed (SIGKILL injected by strace) at
// its Nth fdatasync while markers stream, N random with a recorded seed,
// so the kill lands before a commit's data sync or before its meta sync.
// strace counts a syscall's invocations per thread, and the journal's writer
// moves between Go's threads: the agent keeps committing (up to 400 markers)
// until some thread reaches its Nth sync. With "fill 8" (16 syncs) spread
// over enough threads, none reached N, and supervise never died (a CI run,
// seed 1796178229626131233).
// The in-flight transaction is then all there or not at all, the journal
// is clean, and every acknowledged marker is present.
func TestFault02KillAtSync(t *testing.T) {
	iterations := iterations(6, 40)
	rng := rand.New(rand.NewPCG(seedFor(t), 2))
	for i := 0; i < iterations; i++ {
		n := 1 + rng.IntN(6)
		e := newEnv(t)
		e.set("TESTAGENT_SCRIPT=log ready; listen")
		sv := e.run()
		e.waitLog(1, "ready")
		strace(t, sv.cmd.Process.Pid, "-e", "trace=fdatasync", "-e", fmt.Sprintf("inject=fdatasync:error=EIO:signal=KILL:when=%d", n))
		f, err := os.OpenFile(e.fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("fill 400\n")
		f.Close()
		if code := sv.wait(30 * time.Second); code != 128+9 {
			t.Fatalf("iteration %d (sync %d): supervise exit %d, want killed at the sync", i, n, code)
		}
		acked, _, _ := e.fills()
		sessions := checkJournal(t, filepath.Join(e.stateDir, "journal.db"))
		for _, id := range acked {
			if s, ok := sessions[id]; !ok || s.State != record.InTurn {
				t.Errorf("iteration %d (killed at sync %d): acknowledged marker %s is %+v (found %v)", i, n, id, s, ok)
			}
		}
		t.Logf("iteration %d: killed at fdatasync %d with %d markers acknowledged; %d sessions in the journal", i, n, len(acked), len(sessions))
		e.killLeftovers()
	}
}

// 4. kill -9 of supervise during the very first Open of a new journal, at
// random offsets (recorded seed): the file is then absent, empty or a valid
// journal, and the next supervise starts its agent, never crash-looping.
//
// Both supervises of an iteration share the agent log, so the test waits
// for the agent of the second one, by the pid that supervise logs as
// started. It once waited for any "hang": a late offset let the first
// supervise's agent log it before the kill, the test then sent SIGTERM to a
// second supervise that had not yet caught its signals, and the default
// action killed it (143, an empty log). Seed 1796139801550325698 found that
// (with -tags supervise_portable, whose start is quicker) and stays as a
// fixed case, beside the same kill made certain: after the agent logged.
func TestFault04KillDuringFirstOpen(t *testing.T) {
	t.Run("after the first agent ran", func(t *testing.T) {
		killDuringFirstOpen(t, 1, func(e *env) string {
			e.waitEvent(0, "hang")
			return "after its agent logged hang"
		})
	})
	for _, seed := range []uint64{1796139801550325698} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			killDuringFirstOpen(t, iterations(25, 100), randomKill(seed))
		})
	}
	t.Run("fresh seed", func(t *testing.T) {
		killDuringFirstOpen(t, iterations(25, 100), randomKill(seedFor(t)))
	})
}

// randomKill waits a random offset of up to 12 ms, drawn from seed.
func randomKill(seed uint64) func(*env) string {
	rng := rand.New(rand.NewPCG(seed, 4))
	return func(*env) string {
		offset := time.Duration(rng.IntN(12000)) * time.Microsecond
		time.Sleep(offset) // the random offset itself
		return "at " + offset.String()
	}
}

// killDuringFirstOpen runs case 4 n times: a new supervise, killed with
// SIGKILL once wait returns (it says when), then the next supervise on
// what it left.
func killDuringFirstOpen(t *testing.T, n int, wait func(*env) string) {
	kinds := map[string]int{}
	for i := 0; i < n; i++ {
		e := newEnv(t)
		e.set("TESTAGENT_SCRIPT=hang")
		path := filepath.Join(e.stateDir, "journal.db")
		sv := e.run()
		when := wait(e)
		sv.signal(syscall.SIGKILL)
		sv.wait(10 * time.Second)
		e.killLeftovers()
		kind := "valid"
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			kind = "absent"
		case fi.Size() == 0:
			kind = "empty"
		default:
			db, err := journal.Open(path, journal.Options{ReadOnly: true})
			switch {
			case err != nil && strings.Contains(err.Error(), "empty"):
				kind = "bbolt file without buckets"
			case err != nil:
				// A write cut at a page boundary by the kill: the next
				// start must move it aside (checked below).
				kind = "torn"
			default:
				if err := db.Verify(); err != nil {
					t.Errorf("iteration %d (kill %s): %v", i, when, err)
				}
				db.Close()
			}
		}
		kinds[kind]++
		sv = e.run()
		e.waitOwnAgent(sv, "hang")
		if !sv.running() {
			t.Fatalf("iteration %d (%s journal after a kill %s): supervise exited %d:\n%s", i, kind, when, sv.code, sv.stderr())
		}
		if moved := strings.Contains(sv.stderr(), "moved it aside"); moved != (kind == "torn") {
			t.Errorf("iteration %d: a %s journal, moved aside: %v:\n%s", i, kind, moved, sv.stderr())
		}
		e.stop(sv)
	}
	t.Logf("%d kills during the first open: journal left %v", n, kinds)
}

// startedRe matches supervise's log line for a child it started.
var startedRe = regexp.MustCompile(`msg="child started" run=\d+ pid=(\d+) `)

// waitOwnAgent waits until an agent that sv logged as started has logged
// kind, or sv has exited: in a log shared with an earlier supervise, a
// line of that one's agents says nothing about sv.
func (e *env) waitOwnAgent(sv *proc, kind string) {
	e.t.Helper()
	waitFor(e.t, 20*time.Second, fmt.Sprintf("%q from an agent this supervise started", kind), func() bool {
		if !sv.running() {
			return true
		}
		own := map[int]bool{}
		for _, m := range startedRe.FindAllStringSubmatch(sv.stderr(), -1) {
			pid, _ := strconv.Atoi(m[1])
			own[pid] = true
		}
		for _, ev := range e.events() {
			if ev.kind == kind && own[ev.pid] {
				return true
			}
		}
		return false
	})
}

// 5. Random damage to a journal a supervise died with (a session mid-turn,
// so a resume is owed): truncation at a random offset, random bit flips in
// the meta pages or in the data pages, a zero-filled page range, a dangling
// symlink. Recorded seed. Never a panic or a crash loop; either the damage
// is caught (moved aside, nothing resumed) or the journal still passes the
// full check offline and the resume it owes is the one delivered.
func TestFault05RandomDamage(t *testing.T) {
	iterations := iterations(16, 120)
	seed := seedFor(t)
	rng := rand.New(rand.NewPCG(seed, 5))
	// One journal owed a resume, reused as the template of every damage.
	base := newEnv(t)
	base.set("TESTAGENT_SCRIPT=turn-begin s1 t1; barrier; hang")
	sv := base.run()
	base.waitEvent(1, "barrier-ok")
	sv.signal(syscall.SIGKILL)
	sv.wait(10 * time.Second)
	base.killLeftovers()
	template, err := os.ReadFile(filepath.Join(base.stateDir, "journal.db"))
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	pages := len(template) / page
	outcomes := map[string]int{}
	for i := 0; i < iterations; i++ {
		b := append([]byte(nil), template...)
		var what string
		symlink := false
		switch k := rng.IntN(5); k {
		case 0:
			n := rng.IntN(len(b))
			b = b[:n]
			what = fmt.Sprintf("truncated to %d bytes", n)
		case 1:
			var flips []string
			for j := 0; j < 1+rng.IntN(8); j++ {
				off := rng.IntN(2)*page + rng.IntN(128)
				b[off] ^= 1 << rng.IntN(8)
				flips = append(flips, strconv.Itoa(off))
			}
			what = "bits flipped in the meta pages at " + strings.Join(flips, ",")
		case 2:
			var flips []string
			for j := 0; j < 1+rng.IntN(8); j++ {
				off := 2*page + rng.IntN(len(b)-2*page)
				b[off] ^= 1 << rng.IntN(8)
				flips = append(flips, strconv.Itoa(off))
			}
			what = "bits flipped in the data pages at " + strings.Join(flips, ",")
		case 3:
			p := rng.IntN(pages)
			n := 1 + rng.IntN(3)
			end := min(len(b), (p+n)*page)
			clear(b[p*page : end])
			what = fmt.Sprintf("pages %d..%d zero-filled", p, end/page-1)
		case 4:
			symlink = true
			what = "a dangling symlink"
		}
		t.Run(fmt.Sprintf("%d", i), func(t *testing.T) {
			e := newEnv(t)
			os.MkdirAll(e.stateDir, 0o700)
			path := filepath.Join(e.stateDir, "journal.db")
			if symlink {
				os.Symlink(filepath.Join(e.dir, "nowhere"), path)
			} else {
				os.WriteFile(path, b, 0o600)
			}
			// Offline verdict on a copy, with the same checks supervise runs.
			verdict := "damaged"
			if !symlink {
				cp := filepath.Join(e.dir, "copy.db")
				os.WriteFile(cp, b, 0o600)
				if db, err := journal.Open(cp, journal.Options{ReadOnly: true}); err == nil {
					if db.Verify() == nil && db.CheckRecords() == nil {
						verdict = "intact"
					}
					db.Close()
				}
			}
			e.set("TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
			sv := e.run()
			waitFor(t, 20*time.Second, "the agent", func() bool { return e.count("took-done") > 0 || !sv.running() })
			stderr := sv.stderr()
			if crashed.MatchString(stderr) {
				t.Fatalf("%s: supervise panicked:\n%s", what, stderr)
			}
			if !sv.running() {
				t.Fatalf("%s: supervise exited %d instead of starting its agent:\n%s", what, sv.code, stderr)
			}
			quarantined := strings.Contains(stderr, "moved it aside")
			took := e.took(0)
			switch {
			case quarantined && len(took) > 0:
				t.Errorf("%s: resumed %v from a quarantined journal", what, took)
			case !quarantined && verdict == "damaged":
				t.Errorf("%s: the damage fails the offline check but supervise used the journal (took %v):\n%s", what, took, stderr)
			case !quarantined && (len(took) != 1 || took[0] != "s1 attempt=1"):
				// bbolt has no checksums on data pages: a flip inside a
				// record's bytes can change it and still pass every
				// check. Only an unchanged s1 owes exactly one resume.
				if s1, ok := offlineSession(filepath.Join(e.dir, "copy.db"), "s1"); ok && s1.State == record.InTurn && s1.CrashCount == 0 {
					t.Errorf("%s: an intact journal owed s1 one resume; took %v", what, took)
				} else {
					t.Logf("%s: the damage changed s1 (%+v) without failing a check; took %v", what, s1, took)
				}
			}
			outcome := "intact, s1 resumed"
			if quarantined {
				outcome = "caught, moved aside"
			}
			outcomes[outcome]++
			t.Logf("%s: %s", what, outcome)
			e.stop(sv)
		})
	}
	t.Logf("seed %d: %d damages: %v", seed, iterations, outcomes)
}

// crashed matches what the Go runtime prints when a process dies of a
// panic or a fault (a recovered panic quoted in a log line does not match).
var crashed = regexp.MustCompile(`(?m)^(panic: |fatal error: |goroutine \d+ |\[signal SIG)`)

func offlineSession(path, id string) (s record.Session, ok bool) {
	db, err := journal.Open(path, journal.Options{ReadOnly: true})
	if err != nil {
		return s, false
	}
	defer db.Close()
	db.View(func(tx *journal.Tx) error { s, ok, _ = tx.Session(id); return nil })
	return s, ok
}

// 7. Disk full (a 2 MiB tmpfs, filled): once a commit has failed for want
// of space, a marker for a new session is refused at once, its barrier
// answered '0' (not left to time out); nothing unjournaled is
// acknowledged; when space is back supervise recovers by itself, the
// journal is clean, and no refused session is in it.
func TestFault07DiskFullNewSessionsRefused(t *testing.T) {
	long(t, "root-only: mounts a 2 MiB tmpfs and fills it")
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(mnt, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	e := newEnv(t)
	e.stateDir = filepath.Join(mnt, "state")
	e.vars = append(e.vars, "SUPERVISE_STATE_DIR="+e.stateDir)
	e.set("TESTAGENT_SCRIPT=fill 2; log ready; listen")
	sv := e.run()
	e.waitLog(1, "ready")
	filler := filepath.Join(mnt, "filler")
	exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=64k").Run()
	e.tell("fill 30")
	waitFor(t, 20*time.Second, "a failed commit", func() bool { return strings.Contains(sv.stderr(), "commit failed") })
	e.tell("fill 4")
	refused := 0
	var refusedIDs []string
	for _, ev := range e.events() {
		if ev.kind == "fill-unacked" && strings.Contains(ev.arg, "answered 0") {
			refused++
			refusedIDs = append(refusedIDs, strings.Fields(ev.arg)[0])
		}
	}
	if refused == 0 {
		t.Errorf("no new session was refused with '0' on a full disk:\n%v", e.events())
	}
	if !strings.Contains(sv.stderr(), "marker for a new session refused") {
		t.Errorf("the refusal is not logged:\n%s", sv.stderr())
	}
	acked, _, _ := e.fills()
	commits := e.journalCommits()
	os.Remove(filler)
	// The failed batch is retried with backoff; once it commits, new
	// sessions are taken again.
	waitFor(t, 20*time.Second, "the retried commit", func() bool { return e.journalCommits() > commits })
	e.tell("fill 2")
	after, _, _ := e.fills()
	if len(after) < len(acked)+2 {
		t.Errorf("supervise did not recover when space came back: acked %v then %v", acked, after)
	}
	sv.signal(syscall.SIGKILL)
	sv.wait(10 * time.Second)
	sessions := checkJournal(t, filepath.Join(e.stateDir, "journal.db"))
	for _, id := range after {
		if _, ok := sessions[id]; !ok {
			t.Errorf("acknowledged marker %s is not in the journal", id)
		}
	}
	for _, id := range refusedIDs {
		if _, ok := sessions[id]; ok {
			t.Errorf("refused session %s is in the journal", id)
		}
	}
	t.Logf("%d markers for new sessions refused with '0' on the full disk", refused)
}
