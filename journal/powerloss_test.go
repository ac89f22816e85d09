package journal_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/supervise-dev/supervise/record"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/internal/failpoint"
	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/journal"
)

// TestPowerLossCrashImages is fault-matrix case 3 (power loss), checked by
// enumerating crash states, the method of Pillai et al., "All File Systems
// Are Not Created Equal" (OSDI 2014), and of bbolt's own robustness tests,
// without a device-mapper or LazyFS.
//
// Recording. A workload drives the journal through the calls supervise's
// runner makes (the boot commit, launches, turn markers acknowledged one
// commit each, a death with its resume decisions, the resume's delivery, a
// death with the delivery folded into it, run and session pruning, a clean
// stop, a second boot). Every write bbolt issues to the file is recorded
// (journal.RecordWrites swaps bbolt's unexported writeAt). The sync points
// are inferred from bbolt's commit order, read in go.etcd.io/bbolt v1.5.0
// tx.go (Commit, write, writeMeta) and db.go (init, grow): a commit grows
// the file first with ftruncate and fsync, then writes its data pages
// (never pages 0 and 1), fdatasyncs, writes one meta page (page 0 or 1),
// and fdatasyncs again before Update returns. So a write to page 0 or 1
// ends a commit's data epoch, and the meta's own sync is complete by the
// time the next write or the caller's return comes. The recorder checks
// its inference: data writes never reach the meta pages, every journal
// call commits, and after every call the file rebuilt from the record is
// byte for byte the real one. The creation of the journal (bbolt's init
// write, then the journal's first transaction, both inside Open) happens
// before anything can be hooked; it is rebuilt from bbolt's init image and
// the pages that differ after Open.
//
// Crash images. A power cut between two syncs leaves the last synced file
// plus any subset of the page writes issued since (the page cache writes
// back in any order), each page possibly torn at 512-byte sectors. For
// every epoch (a commit's data pages; its meta page; bbolt's init write,
// which may also leave the file empty or absent) the test builds: every
// subset of the epoch's pages when it has at most 10 (beyond that, every
// subset of at most two pages written or two missing, and seeded random
// ones), and torn pages (a prefix or suffix of 1 to 7 sectors new, and
// seeded random sector sets) with the others old or new. Identical images
// are checked once.
//
// Checks, for each image, opened through supervise's boot path
// (journal.OpenState: open, the full check unless the journal says it was
// closed cleanly, the record check, quarantine of damage):
//   - the boot path opens a journal (supervise starts);
//   - a journal it trusts passes bbolt's full check and the record check
//     even where the boot path skipped them (never trusted while damaged);
//   - its whole content (every bucket, sequence, key and value) is the
//     content after the last commit that completed before the cut, or
//     after the commit in flight (a data epoch allows only the former):
//     every acknowledged marker is there, and no decision that a later
//     acknowledgement depended on is lost, since a commit is there whole
//     or not at all and commits land in order;
//   - a file moved aside (damaged) is allowed only while the journal is
//     being created, before anything was acknowledged.
//
// Limits. The model is the page cache of one file: it assumes fdatasync
// is honest (the drive flushes its cache; not ext4 fast_commit before
// 5.10.94, etcd-io/bbolt#562), and that a synced file size stays (bbolt
// grows with ftruncate and fsync). It models the file's pages, not its
// name: that a new journal's name is durable before Open returns (its
// directory fsynced) is TestNewJournalNameIsDurable's. It does not model
// the state dir's other files (the owner sidecar, the resume file), nor
// pages damaged by more than a power cut (bit rot: case 5). Torn pages are sampled, not all
// 256 sector sets. The default run checks a few thousand images;
// SUPERVISE_LONG=1 adds random subsets and sector sets and a longer
// workload.
func TestPowerLossCrashImages(t *testing.T) {
	long := os.Getenv("SUPERVISE_LONG") != ""
	seed := uint64(20261201)
	t.Logf("power-loss seed %d (long %v)", seed, long)
	start := time.Now()

	w := recordWorkload(t, long, false)
	ck := newChecker(t, w.fresh, true)
	en := enumerator{rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), long: long, ps: w.ps}
	for _, ep := range w.epochs {
		en.images(ep, func(img []byte) { ck.submit(ep, img) })
	}
	ck.wait()
	if ck.failed() {
		return
	}
	if ck.checked < 1000 {
		t.Errorf("only %d crash images checked; the test promises at least 1 000", ck.checked)
	}
	most, size, logged := 0, 0, 0
	for _, ep := range w.epochs {
		if ep.inSlot {
			logged++
			continue
		}
		most, size = max(most, len(ep.pending)), max(size, len(ep.durable))
	}
	if logged < 3 {
		t.Errorf("only %d logged transactions (a death's commit, redo.go) in the workload", logged)
	}
	t.Logf("checked %d crash images (%d epochs, %d commits, %d of them logged through the redo slot, up to %d pages written in one epoch, the file up to %d KiB; %d image-epoch pairs; %d moved aside while the journal was created; states: %d as before the commit in flight, %d with it) in %v",
		ck.checked, len(w.epochs), w.commits, logged, most, size>>10, ck.pairs, ck.quarantined, ck.before, ck.after, time.Since(start).Round(time.Millisecond))
}

// TestPowerLossCheckerCatchesNoSync checks the checker: the same workload
// with the data pages' fdatasync taken out of every commit (bbolt with
// NoSync lets the page cache write a commit's meta page before its data)
// must give crash images the boot path trusts while damaged, or whose
// content no commit left. If it found none, the enumeration or the checks
// would be too weak to prove anything.
func TestPowerLossCheckerCatchesNoSync(t *testing.T) {
	w := recordWorkload(t, false, true)
	// One image at a time, stopping at the first violation: some images of
	// this broken protocol make bbolt's own check recurse for ever (a page
	// cycle, etcd-io/bbolt#877), and the first damaged image must be found
	// before one of those is opened. The data pages come first in each
	// epoch, so the first image with the meta page is the meta alone.
	ck := newChecker(t, w.fresh, false)
	ck.stopAtFirst = true
	en := enumerator{rng: rand.New(rand.NewPCG(1, 2)), ps: w.ps}
	for _, ep := range w.epochs {
		en.images(ep, func(img []byte) { ck.submit(ep, img) })
		if ck.violated() {
			break
		}
	}
	ck.wait()
	if !ck.violated() {
		t.Fatalf("no violation in %d crash images without the data sync: the checker proves nothing", ck.checked)
	}
	t.Logf("without the data sync, crash image %d violates, as it must: %s", ck.checked, ck.first)
}

// TestPowerLossCheckerCatchesLostRedo checks the checker on the redo slot:
// the same workload with the slot gone from every image (a replay that
// never happens, or a record not synced before the caller heard of it)
// must give an image that lacks an acknowledged death: bbolt's commit of
// a logged transaction starts only after the acknowledgement.
func TestPowerLossCheckerCatchesLostRedo(t *testing.T) {
	w := recordWorkload(t, false, false)
	ck := newChecker(t, w.fresh, false)
	ck.stopAtFirst = true
	en := enumerator{rng: rand.New(rand.NewPCG(1, 2)), ps: w.ps}
	for _, ep := range w.epochs {
		if ep.inSlot {
			continue
		}
		ep.slot = nil
		en.images(ep, func(img []byte) { ck.submit(ep, img) })
		if ck.violated() {
			break
		}
	}
	ck.wait()
	if !ck.violated() {
		t.Fatalf("no violation in %d crash images without the redo slot: the checker proves nothing of it", ck.checked)
	}
	first, _, _ := strings.Cut(ck.first, "\n")
	t.Logf("without the redo slot, crash image %d violates, as it must: %s", ck.checked, first)
}

// pageWrite is one page of a recorded write.
type pageWrite struct {
	page int64
	data []byte
}

// epoch is the time between two syncs: durable is the file as the last
// sync left it, pending the page writes issued since. A crash image of the
// epoch holds durable with any of pending applied, whole or torn.
type epoch struct {
	label   string
	durable []byte
	// absentOK: the file may be missing or empty after the cut (bbolt's
	// init write to a new file: neither its size nor its name is synced).
	absentOK bool
	pending  []pageWrite
	// allowed are the journal contents an image may show; fresh means
	// any journal created anew (before anything was acknowledged), damage
	// moved aside included.
	allowed []string
	fresh   bool
	// slot is the redo slot's content through the epoch (nil: no slot
	// file). inSlot: the pending writes are the slot's (a logged
	// transaction's record), durable is the slot before them, and the
	// journal file is journal. afterOnly: the epoch is a bbolt commit of
	// a logged transaction, acknowledged before it began, so allowed[0]
	// is the state after it and the only one.
	slot      []byte
	inSlot    bool
	journal   []byte
	afterOnly bool
}

// workload is what record returns.
type workload struct {
	ps      int64
	epochs  []epoch
	commits int
	fresh   string // the content of a newly created journal
}

// recorder collects bbolt's writes into commits.
type recorder struct {
	ps   int64
	path string

	mu      sync.Mutex
	data    []pageWrite
	commits []commit
	records [][]byte // the redo slot's writes, each a whole record at offset 0
	err     error
}

func (r *recorder) record(b []byte, off int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if off != 0 || int64(len(b))%r.ps != 0 {
		r.err = fmt.Errorf("redo write of %d bytes at %d is not whole pages at 0", len(b), off)
		return
	}
	r.records = append(r.records, b)
}

// commit is one recorded bbolt commit: its file size (after bbolt's grow,
// which is synced), its data pages and its meta page.
type commit struct {
	size int64
	data []pageWrite
	meta pageWrite
}

func (r *recorder) write(b []byte, off int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if off%r.ps != 0 || int64(len(b))%r.ps != 0 {
		r.err = fmt.Errorf("write of %d bytes at %d is not whole pages", len(b), off)
		return
	}
	if off < 2*r.ps {
		if int64(len(b)) != r.ps {
			r.err = fmt.Errorf("write of %d bytes at meta page %d", len(b), off/r.ps)
			return
		}
		fi, err := os.Stat(r.path)
		if err != nil {
			r.err = err
			return
		}
		r.commits = append(r.commits, commit{size: fi.Size(), data: r.data, meta: pageWrite{off / r.ps, b}})
		r.data = nil
		return
	}
	r.data = append(r.data, split(b, off, r.ps)...)
}

func split(b []byte, off, ps int64) []pageWrite {
	var out []pageWrite
	for i := int64(0); i < int64(len(b)); i += ps {
		out = append(out, pageWrite{(off + i) / ps, b[i : i+ps]})
	}
	return out
}

// apply returns base, grown to at least size, with the writes applied.
func apply(base []byte, size int64, ps int64, ws ...pageWrite) []byte {
	n := max(int64(len(base)), size)
	for _, w := range ws {
		n = max(n, (w.page+1)*ps)
	}
	out := make([]byte, n)
	copy(out, base)
	for _, w := range ws {
		copy(out[w.page*ps:], w.data)
	}
	return out
}

// recordWorkload runs the workload and returns its epochs.
//
// noDataSync merges each recorded commit's data and meta epochs into one,
// as if the fdatasync between them were gone (the checker's own test).
func recordWorkload(t *testing.T, long, noDataSync bool) *workload {
	t.Helper()
	dir := t.TempDir()
	path := statedir.JournalPath(dir)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	// Creation: bbolt's init write, then the journal's first commit, both
	// inside Open.
	db, _, err := journal.OpenState(dir, failpoint.Points{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	ps := int64(journal.PageSize(db))
	initImg, err := journal.BoltInitImage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	created, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := journal.Dump(db)
	if err != nil {
		t.Fatal(err)
	}
	w := &workload{ps: ps, fresh: fresh}
	w.epochs = append(w.epochs, epoch{label: "create: bbolt's init write", absentOK: true,
		pending: split(initImg, 0, ps), fresh: true})
	base := apply(initImg, int64(len(created)), ps)
	var first epoch
	first.label, first.durable, first.fresh = "create: the journal's first commit, data", base, true
	var meta []pageWrite
	for p := int64(0); p*ps < int64(len(created)); p++ {
		if bytes.Equal(base[p*ps:(p+1)*ps], created[p*ps:(p+1)*ps]) {
			continue
		}
		pw := pageWrite{p, created[p*ps : (p+1)*ps]}
		if p < 2 {
			meta = append(meta, pw)
		} else {
			first.pending = append(first.pending, pw)
		}
	}
	if len(meta) != 1 {
		t.Fatalf("the journal's first commit changed %d meta pages, want 1", len(meta))
	}
	w.epochs = append(w.epochs, first, epoch{label: "create: the journal's first commit, meta",
		durable: apply(base, 0, ps, first.pending...), pending: meta, fresh: true})

	// From here every write is recorded. states[i] is the content after
	// the i-th recorded commit; states[-1] (prev) the fresh journal.
	rec := &recorder{ps: ps, path: path}
	durable := created
	prev := fresh
	hook := func(db *journal.DB) {
		journal.RecordWrites(db, rec.write)
		journal.RecordRedoWrites(db, rec.record)
	}
	slotPath := journal.RedoPath(path)
	var slot []byte // the slot's durable content; nil while it does not exist
	hook(db)

	// call runs one journal call the runner makes and turns the commits it
	// made into epochs; the content after it is what was acknowledged.
	call := func(label string, fn func() error) {
		t.Helper()
		n0, r0 := len(rec.commits), len(rec.records)
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		rec.mu.Lock()
		cs, rs, rerr := rec.commits[n0:], rec.records[r0:], rec.err
		rec.mu.Unlock()
		if rerr != nil {
			t.Fatalf("%s: recording: %v", label, rerr)
		}
		if len(cs) == 0 {
			t.Fatalf("%s: no commit recorded", label)
		}
		if slot == nil {
			if _, err := os.Stat(slotPath); err == nil {
				// made (zeros, synced) by this call's first logged
				// transaction before its commit; zeros are no record,
				// nor is a missing or partial slot
				slot = make([]byte, journal.RedoSize)
			}
		}
		if len(rs) > 1 || len(rs) == 1 && len(cs) != 1 {
			t.Fatalf("%s: %d redo records for %d commits; a logged call writes one record, then its commit", label, len(rs), len(cs))
		}
		logged := len(rs) == 1
		for i, c := range cs {
			l := label
			if len(cs) > 1 {
				l = fmt.Sprintf("%s (commit %d of %d)", label, i+1, len(cs))
			}
			grown := apply(durable, c.size, ps)
			withData := apply(grown, 0, ps, c.data...)
			after := apply(withData, 0, ps, c.meta)
			st := stateOf(t, after)
			if logged {
				// The record's epoch: either state; then bbolt's
				// commit, acknowledged already: the state after only.
				w.epochs = append(w.epochs, epoch{label: l + ", redo record", inSlot: true, journal: durable,
					durable: slot, pending: split(rs[0], 0, ps), allowed: []string{prev, st}})
				slot = apply(slot, 0, ps, split(rs[0], 0, ps)...)
			}
			if noDataSync {
				w.epochs = append(w.epochs, epoch{label: l, durable: grown, slot: slot,
					pending: append(append([]pageWrite(nil), c.data...), c.meta), allowed: []string{prev, st}})
			} else {
				w.epochs = append(w.epochs,
					epoch{label: l + ", data", durable: grown, slot: slot, pending: c.data, allowed: []string{prev}},
					epoch{label: l + ", meta", durable: withData, slot: slot, pending: []pageWrite{c.meta}, allowed: []string{prev, st}})
			}
			if logged {
				for k := len(w.epochs) - 1; k >= 0 && !w.epochs[k].inSlot; k-- {
					w.epochs[k].allowed, w.epochs[k].afterOnly = []string{st}, true
				}
			}
			durable, prev = after, st
			w.commits++
		}
		real, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(real, durable) {
			t.Fatalf("%s: the file rebuilt from the recorded writes differs from the real one: the sync inference is wrong", label)
		}
		if slot != nil {
			if real, err := os.ReadFile(slotPath); err != nil || !bytes.Equal(real, slot) {
				t.Fatalf("%s: the redo slot rebuilt from the recorded records differs from the real one (err %v)", label, err)
			}
		}
		if got, err := journal.Dump(db); err != nil || got != prev {
			t.Fatalf("%s: content acknowledged differs from the recorded file's (err %v)", label, err)
		}
	}
	up := func(label string, fn func(tx *journal.Tx) error) { call(label, func() error { return db.Update(fn) }) }
	// upLogged is a death's commit as the runner makes it (redo.go): the
	// call returns once the record is durable; the View after it waits
	// for bbolt's commit, so that the recording is complete.
	upLogged := func(label string, fn func(tx *journal.Tx) error) {
		call(label, func() error {
			if err := db.UpdateLogged(fn); err != nil {
				return err
			}
			return db.View(func(*journal.Tx) error { return nil })
		})
	}

	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	owner := journal.Owner{PID: 4242, StartTime: 1, BootID: "boot-a", Started: t0}
	prompt := strings.Repeat("refactor the parser and run the tests; ", 8)
	sessions := map[string]record.Session{}
	put := func(tx *journal.Tx, s record.Session) error { sessions[s.ID] = s; return tx.PutSession(s) }
	run := uint64(0)
	policy := func(tx *journal.Tx, n int) error {
		if err := tx.PutState("backoff", map[string]any{"failures": n, "next": at(n)}); err != nil {
			return err
		}
		return tx.PutState("guard", map[string]any{"chain": n})
	}
	boot := func(label string, reserve uint64) {
		up(label, func(tx *journal.Tx) error {
			if err := tx.SetChild(nil); err != nil {
				return err
			}
			if err := tx.PutRun(record.Run{Run: reserve, Reason: record.ReasonStarting, Started: at(int(reserve))}); err != nil {
				return err
			}
			if err := tx.SetOwner(owner); err != nil {
				return err
			}
			return tx.SetClean(false)
		})
	}
	launch := func(n uint64, relaunch bool) {
		up(fmt.Sprintf("launch run %d", n), func(tx *journal.Tx) error {
			if err := tx.PutRun(record.Run{Run: n, PID: 1000 + int(n), StartTime: int64(n), Started: at(int(n)), Reason: record.ReasonRunning, Argv: []string{"agent", "--resume"}}); err != nil {
				return err
			}
			if relaunch {
				if err := tx.AddRestart(); err != nil {
					return err
				}
			}
			return tx.SetChild(&journal.Child{Run: n, PID: 1000 + int(n), StartTime: int64(n), PGID: 1000 + int(n), Tag: fmt.Sprintf("SUPERVISE_TAG=%d", n), BootID: "boot-a", Started: at(int(n))})
		})
		run = n
	}
	marker := func(id string, st record.SessionState, phase string) {
		up(fmt.Sprintf("marker %s %s %s (acknowledged)", id, st, phase), func(tx *journal.Tx) error {
			s := sessions[id]
			s.ID, s.State, s.Phase, s.Run, s.Updated = id, st, phase, run, at(int(run)*100+len(sessions))
			if st == record.InTurn && s.Turn == "" {
				s.Turn, s.Prompt, s.TurnStarted = "turn-"+id, prompt, s.Updated
			}
			if st == record.Idle || st == record.Closed {
				s.Turn, s.Phase, s.Prompt, s.Resume, s.CrashCount, s.Outcome = "", "", "", nil, 0, "completed"
			}
			return put(tx, s)
		})
	}
	// death commits the run's end, the decision for every session found
	// mid-turn (a resume owed), the policy, the next reservation and the
	// run pruning, as the runner's death commit does with the pending
	// decisions; fold also records the resumes' delivery to the reserved
	// run in the same commit (the change proposed for issue 25 item 2).
	death := func(n uint64, keepRuns int, fold bool) {
		label := fmt.Sprintf("death of run %d, decisions, reservation of run %d", n, n+1)
		if fold {
			label += ", delivery folded in"
		}
		upLogged(label, func(tx *journal.Tx) error {
			for _, id := range sortedIDs(sessions) {
				s := sessions[id]
				if s.State != record.InTurn {
					continue
				}
				s.CrashCount++
				s.State, s.Reason, s.Updated = record.ResumePending, "signal", at(int(n)*100+99)
				s.Resume = &record.Resume{Attempt: s.CrashCount, Interrupted: n, Reason: "signal", Message: "continue " + s.Turn, Since: s.Updated}
				if fold {
					s.Resume.Delivered, s.Resume.Run = 1, n+1
				}
				if err := put(tx, s); err != nil {
					return err
				}
			}
			if err := tx.PutRun(record.Run{Run: n, PID: 1000 + int(n), StartTime: int64(n), Started: at(int(n)), Ended: at(int(n) + 1), Signal: 9, Reason: record.ReasonSignal, Dirty: true}); err != nil {
				return err
			}
			if err := tx.SetChild(nil); err != nil {
				return err
			}
			if err := policy(tx, int(n)); err != nil {
				return err
			}
			if err := tx.PutRun(record.Run{Run: n + 1, Reason: record.ReasonStarting, Started: at(int(n) + 1)}); err != nil {
				return err
			}
			_, err := tx.PruneRuns(keepRuns, 100)
			return err
		})
	}
	deliver := func(n uint64) {
		up(fmt.Sprintf("resume delivery to run %d", n), func(tx *journal.Tx) error {
			for _, id := range sortedIDs(sessions) {
				s := sessions[id]
				if s.Resume == nil {
					continue
				}
				r := *s.Resume
				r.Delivered++
				r.Run = n
				s.Resume = &r
				if err := put(tx, s); err != nil {
					return err
				}
			}
			return nil
		})
	}
	resumed := func(id string) { marker(id, record.InTurn, "model") }

	many := 24
	cycles := 3
	if long {
		many, cycles = 40, 5
	}
	boot("boot commit of supervise A", 1)
	launch(1, false)
	for _, id := range []string{"a", "b", "c"} {
		marker(id, record.InTurn, "")
		marker(id, record.InTurn, "tool")
	}
	marker("a", record.Idle, "")
	death(1, 4, false)
	deliver(2)
	launch(2, true)
	resumed("b")
	marker("c", record.Closed, "")
	for i := range many { // enough sessions to split leaves and grow the file
		marker(fmt.Sprintf("s%03d", i), record.InTurn, "tool")
	}
	for i := 0; i < many; i += 2 {
		marker(fmt.Sprintf("s%03d", i), record.Idle, "")
	}
	death(2, 4, true)
	launch(3, true)
	for c := range cycles { // a crash loop, runs pruned past 4
		n := uint64(3 + c)
		resumed("b")
		death(n, 4, c%2 == 0)
		if c%2 == 1 {
			deliver(n + 1)
		}
		launch(n+1, true)
	}
	for i := 1; i < many; i += 2 {
		marker(fmt.Sprintf("s%03d", i), record.Closed, "")
	}
	call("prune settled sessions beyond 6, 4 per commit", func() error {
		n, err := db.PruneSessions(6, 4)
		if err == nil && n == 0 {
			err = errors.New("nothing pruned")
		}
		return err
	})
	up("clean stop", func(tx *journal.Tx) error {
		if err := tx.SetChild(nil); err != nil {
			return err
		}
		if err := tx.DeleteRun(run + 1); err != nil {
			return err
		}
		return tx.SetClean(true)
	})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// The next supervise: the boot path writes nothing; its boot commit is
	// the first write after a clean stop.
	db, _, err = journal.OpenState(dir, failpoint.Points{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hook(db)
	owner = journal.Owner{PID: 4343, StartTime: 2, BootID: "boot-a", Started: at(9999)}
	boot("boot commit of supervise B", run+1)
	launch(run+1, false)
	marker("b", record.Idle, "")
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	return w
}

func sortedIDs(m map[string]record.Session) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	for i := range ids { // insertion sort: a few dozen ids
		for j := i; j > 0 && ids[j] < ids[j-1]; j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
	return ids
}

// stateOf returns the content of the journal image img, opened read-only
// on a copy.
func stateOf(t *testing.T, img []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.db")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := journal.Open(path, journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("a synced image does not open: %v", err)
	}
	defer db.Close()
	s, err := journal.Dump(db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// enumerator builds the crash images of an epoch.
type enumerator struct {
	rng  *rand.Rand
	long bool
	ps   int64
}

const sectors = 8 // 512-byte sectors in a 4 KiB page

// images calls emit with every crash image of ep it builds.
func (en *enumerator) images(ep epoch, emit func([]byte)) {
	n := len(ep.pending)
	full := byte(1<<sectors - 1)
	build := func(masks []byte) []byte {
		img := apply(ep.durable, 0, en.ps)
		for i, pw := range ep.pending {
			m := masks[i]
			if m == 0 {
				continue
			}
			if end := (pw.page + 1) * en.ps; int64(len(img)) < end {
				img = append(img, make([]byte, end-int64(len(img)))...)
			}
			ss := en.ps / sectors
			for s := int64(0); s < sectors; s++ {
				if m&(1<<s) != 0 {
					copy(img[pw.page*en.ps+s*ss:pw.page*en.ps+(s+1)*ss], pw.data[s*ss:(s+1)*ss])
				}
			}
		}
		return img
	}
	if ep.absentOK {
		emit(nil) // absent or empty: the same to the boot path but for the name
	}
	subset := func(bits uint64) {
		masks := make([]byte, n)
		for i := range masks {
			if bits&(1<<i) != 0 {
				masks[i] = full
			}
		}
		emit(build(masks))
	}
	exhaust := 10
	if n <= exhaust {
		for bits := uint64(0); bits < 1<<n; bits++ {
			subset(bits)
		}
	} else {
		all := uint64(1)<<n - 1
		subset(0)
		subset(all)
		for i := range n {
			subset(1 << i)
			subset(all &^ (1 << i))
			for j := i + 1; j < n; j++ {
				subset(1<<i | 1<<j)
				subset(all &^ (1<<i | 1<<j))
			}
		}
		random := 64
		if en.long {
			random = 192
		}
		for range random {
			subset(en.rng.Uint64() & all)
		}
	}
	// Torn pages: a prefix or a suffix of the page's sectors reached the
	// disk, or a random set of them; the other pages all old, all new, or
	// (long) at random.
	var torn []byte
	for k := 1; k < sectors; k++ {
		if en.long || k == 1 || k == 4 || k == sectors-1 {
			torn = append(torn, byte(1<<k-1), full&^byte(1<<(sectors-k)-1))
		}
	}
	extra, contexts := 1, 1
	if en.long {
		extra, contexts = 4, 3
	}
	for range extra {
		torn = append(torn, byte(1+en.rng.IntN(int(full)-1)))
	}
	for i := range n {
		for _, m := range torn {
			for c := range contexts {
				masks := make([]byte, n)
				for j := range masks {
					switch {
					case contexts == 1 && (i+int(m))%2 == 1:
						masks[j] = full
					case c == 1:
						masks[j] = full
					case c > 1 && en.rng.IntN(2) == 1:
						masks[j] = full
					}
				}
				masks[i] = m
				emit(build(masks))
			}
		}
	}
}

// checker opens crash images through the boot path on a few goroutines.
type checker struct {
	t      *testing.T
	fresh  string
	report bool // report violations as test errors (else only count them)
	// stopAtFirst: images are checked one at a time as they come, and
	// none after the first violation.
	stopAtFirst bool
	dir         string
	first       string // the first violation

	jobs chan job
	wg   sync.WaitGroup

	mu          sync.Mutex
	seen        map[[32]byte]*result
	checked     int
	pairs       int
	quarantined int
	before      int
	after       int
	violations  int
}

type job struct {
	ep            *epoch
	journal, slot []byte // the two files of the image (nil: absent)
	sum           [32]byte
}

// result is what the boot path made of one image.
type result struct {
	done        chan struct{}
	state       string
	quarantined bool
	err         error
}

func newChecker(t *testing.T, fresh string, report bool) *checker {
	return &checker{t: t, fresh: fresh, report: report, seen: map[[32]byte]*result{}}
}

// start starts the workers on the first submit.
func (c *checker) start() {
	c.jobs = make(chan job)
	for range max(2, runtime.GOMAXPROCS(0)) {
		c.wg.Add(1)
		go c.worker(c.t.TempDir())
	}
}

func (c *checker) submit(ep epoch, img []byte) {
	j := job{ep: &ep, journal: img, slot: ep.slot}
	if ep.inSlot {
		j.journal, j.slot = ep.journal, img
	}
	h := sha256.New()
	for _, f := range [][]byte{j.journal, j.slot} {
		if f == nil {
			h.Write([]byte{0}) // the absent file
		} else {
			h.Write([]byte{1})
			h.Write(f)
		}
	}
	h.Sum(j.sum[:0])
	if c.stopAtFirst { // inline, so that nothing is opened after a violation
		if c.dir == "" {
			c.dir = c.t.TempDir()
		}
		if !c.violated() {
			c.process(c.dir, j)
		}
		return
	}
	if c.jobs == nil {
		c.start()
	}
	c.jobs <- j
}

func (c *checker) wait() {
	if c.jobs == nil {
		return
	}
	close(c.jobs)
	c.wg.Wait()
}

func (c *checker) failed() bool { return c.t.Failed() }

func (c *checker) violated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.violations > 0
}

func (c *checker) worker(dir string) {
	defer c.wg.Done()
	for j := range c.jobs {
		c.process(dir, j)
	}
}

// process checks one image, or takes the result of the same image
// checked before.
func (c *checker) process(dir string, j job) {
	c.mu.Lock()
	r, ok := c.seen[j.sum]
	if !ok {
		r = &result{done: make(chan struct{})}
		c.seen[j.sum] = r
		c.checked++
	}
	c.pairs++
	c.mu.Unlock()
	if !ok {
		r.state, r.quarantined, r.err = boot(dir, j.journal, j.slot)
		close(r.done)
	}
	<-r.done
	c.judge(j, r)
}

// judge checks one image's result against its epoch.
func (c *checker) judge(j job, r *result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(format string, args ...any) {
		if c.violations == 0 {
			c.first = fmt.Sprintf("epoch %q: %s", j.ep.label, fmt.Sprintf(format, args...))
		}
		c.violations++
		if c.report && c.violations <= 10 {
			c.t.Errorf("crash image in epoch %q (sha256 %x): %s", j.ep.label, j.sum[:6], fmt.Sprintf(format, args...))
		}
	}
	switch {
	case r.err != nil:
		fail("%v", r.err)
	case j.ep.fresh:
		if r.quarantined {
			c.quarantined++
		}
		if r.state != c.fresh {
			fail("a journal being created opened with content other than a fresh journal's:\n%s", r.state)
		}
	case r.quarantined:
		fail("moved aside as damaged after something was acknowledged: acknowledged markers lost")
	case r.state == j.ep.allowed[0] && j.ep.afterOnly:
		c.after++
	case r.state == j.ep.allowed[0]:
		c.before++
	case len(j.ep.allowed) > 1 && r.state == j.ep.allowed[1]:
		c.after++
	default:
		fail("its content is neither the last synced commit's nor the one in flight's:\n%s\nwant:\n%s", r.state, j.ep.allowed[0])
	}
}

// boot writes img as the state dir's journal and slot as its redo slot
// (nil: no such file), opens the journal through supervise's boot path,
// checks what the boot path trusts, and returns the content it opened
// with and whether it moved the file aside.
func boot(dir string, img, slot []byte) (state string, quarantined bool, err error) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		os.Remove(filepath.Join(dir, e.Name()))
	}
	path := statedir.JournalPath(dir)
	if img != nil {
		if err := os.WriteFile(path, img, 0o600); err != nil {
			return "", false, err
		}
	}
	if slot != nil {
		if err := os.WriteFile(journal.RedoPath(path), slot, 0o600); err != nil {
			return "", false, err
		}
	}
	var logb bytes.Buffer
	db, later, err := journal.OpenState(dir, failpoint.Points{}, slog.New(slog.NewTextHandler(&logb, nil)))
	if err != nil {
		return "", false, fmt.Errorf("the boot path failed: supervise would not start: %w", err)
	}
	defer db.Close()
	if later {
		return "", false, errors.New("the boot path deferred the check of a small journal")
	}
	moved, _ := filepath.Glob(path + ".corrupt-*")
	quarantined = len(moved) > 0
	if quarantined != strings.Contains(logb.String(), "moved it aside") {
		return "", false, fmt.Errorf("moved aside %v but the log says %q", quarantined, logb.String())
	}
	// Never trusted while damaged: the full checks pass on what the boot
	// path kept, also where it skipped them (a journal closed cleanly).
	if err := db.Verify(); err != nil {
		return "", quarantined, fmt.Errorf("trusted while damaged: %w", err)
	}
	if err := db.CheckRecords(); err != nil {
		return "", quarantined, fmt.Errorf("trusted while damaged: %w", err)
	}
	state, err = journal.Dump(db)
	return state, quarantined, err
}
