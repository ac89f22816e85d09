package journal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/supervise-dev/supervise/record"
)

// helperLogged commits sessions s0, s1, ... one logged transaction each,
// printing each id once UpdateLogged returned. With hold > 0 the bbolt
// commit of transaction number hold never starts: the process is killed
// with that transaction durable in the redo slot alone.
func helperLogged(path string, hold int) {
	db, err := Open(path, Options{Inline: true})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	n := 0
	testFinish = func() {
		n++
		if n == hold {
			fmt.Println("held")
			select {}
		}
	}
	for i := 0; ; i++ {
		id := "s" + strconv.Itoa(i)
		if err := db.UpdateLogged(func(tx *Tx) error {
			if err := tx.AddRestart(); err != nil {
				return err
			}
			return tx.PutSession(record.Session{ID: id, State: record.InTurn, Turn: "t"})
		}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(id)
	}
}

// runLoggedHelper starts helperLogged and reads acknowledgements until it
// has want of them (and, with hold, its "held"), then kills it with
// SIGKILL.
func runLoggedHelper(t *testing.T, path string, hold, want int) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "JOURNAL_HELPER_LOGGED="+path, "JOURNAL_HELPER_HOLD="+strconv.Itoa(hold))
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Signal(syscall.SIGKILL)
	br := bufio.NewReader(out)
	var acked []string
	held := hold == 0
	for len(acked) < want || !held {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("writer: %v (after %v)", err, acked)
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "held":
			held = true
		case strings.HasPrefix(line, "error"):
			t.Fatalf("writer: %s", line)
		default:
			acked = append(acked, line)
		}
	}
	return acked
}

// newLog returns a logger writing text lines, and the lines so far.
func newLog() (*slog.Logger, *[]string) {
	w := &lines{}
	return slog.New(slog.NewTextHandler(w, nil)), &w.msgs
}

type lines struct{ msgs []string }

func (l *lines) Write(p []byte) (int, error) {
	l.msgs = append(l.msgs, string(p))
	return len(p), nil
}

// checkAcked reopens path and checks that every acknowledged session is
// there, that the restarts counted one per acknowledgement, and that the
// file passes the full check; it returns what the journal logged.
func checkAcked(t *testing.T, path string, acked []string) []string {
	t.Helper()
	log, msgs := newLog()
	db, err := Open(path, Options{Log: log})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer db.Close()
	if err := db.Verify(); err != nil {
		t.Error(err)
	}
	if err := db.CheckRecords(); err != nil {
		t.Error(err)
	}
	db.View(func(tx *Tx) error {
		for _, id := range acked {
			if _, ok, _ := tx.Session(id); !ok {
				t.Errorf("acknowledged %s missing", id)
			}
		}
		if got := tx.Restarts(); got < uint64(len(acked)) {
			t.Errorf("restarts %d, want at least %d (one per acknowledged commit)", got, len(acked))
		}
		return nil
	})
	return *msgs
}

// TestLoggedCommitSurvivesKillBeforeBoltCommit: kill -9 with a logged
// transaction acknowledged (its record durable in the slot) and its bbolt
// commit not begun. The next open replays it, once.
func TestLoggedCommitSurvivesKillBeforeBoltCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	acked := runLoggedHelper(t, path, 4, 4) // the first names the journal (plain); the 4th logged one is held
	msgs := checkAcked(t, path, acked)
	if !strings.Contains(strings.Join(msgs, "\n"), "replayed the last commit from the redo slot") {
		t.Errorf("the open did not replay the held commit; it logged %q", msgs)
	}
	if msgs := checkAcked(t, path, acked); strings.Contains(strings.Join(msgs, "\n"), "replayed") {
		t.Errorf("the second open replayed again: %q", msgs)
	}
}

// TestLoggedCommitsSurviveKill is TestCommittedSurvivesKill for logged
// transactions, the kill landing wherever it lands (often inside bbolt's
// commit, which runs after the acknowledgement).
func TestLoggedCommitsSurviveKill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	var all []string
	for round := range 4 {
		acked := runLoggedHelper(t, path, 0, 10+round*7)
		// each round starts at s0 again: the ids repeat, the restarts add up
		all = append(all, acked...)
		db, err := Open(path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		db.View(func(tx *Tx) error {
			for _, id := range acked {
				if _, ok, _ := tx.Session(id); !ok {
					t.Errorf("round %d: acknowledged %s missing", round, id)
				}
			}
			if got := tx.Restarts(); got < uint64(len(all)) {
				t.Errorf("round %d: restarts %d, want at least %d", round, got, len(all))
			}
			return nil
		})
		if err := db.Verify(); err != nil {
			t.Errorf("round %d: %v", round, err)
		}
		db.Close()
	}
}

// crashImage holds the two files as a stop right after a logged record's
// sync would leave them (journal.db without the transaction, the slot with
// it), and the content with the transaction and without it.
type crashImage struct {
	journal, slot []byte
	before, after string
	staleSlot     []byte // the slot one record earlier (already applied)
}

func imageOfLoggedCommit(t *testing.T, prompt string) crashImage {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	db := open(t, path)
	for i := range 3 {
		if err := db.UpdateLogged(func(tx *Tx) error {
			return tx.PutSession(record.Session{ID: "a" + strconv.Itoa(i), State: record.Idle})
		}); err != nil {
			t.Fatal(err)
		}
	}
	var img crashImage
	var err error
	img.staleSlot = readFile(t, redoPath(path))
	if img.before, err = Dump(db); err != nil {
		t.Fatal(err)
	}
	testRedoDurable = func() {
		img.journal, img.slot = readFile(t, path), readFile(t, redoPath(path))
	}
	defer func() { testRedoDurable = nil }()
	if err := db.UpdateLogged(func(tx *Tx) error {
		if err := tx.SetChild(nil); err != nil {
			return err
		}
		if _, err := tx.NextRun(); err != nil {
			return err
		}
		if err := tx.PutRun(record.Run{Run: 7, Reason: record.ReasonSignal, Dirty: true}); err != nil {
			return err
		}
		return tx.PutSession(record.Session{ID: "b", State: record.ResumePending, Prompt: prompt, Resume: &record.Resume{Attempt: 1, Interrupted: 7}})
	}); err != nil {
		t.Fatal(err)
	}
	if img.after, err = Dump(db); err != nil {
		t.Fatal(err)
	}
	if img.journal == nil {
		t.Fatal("the hook did not run: the transaction was not logged")
	}
	if bytes.Equal(img.slot, img.staleSlot) {
		t.Fatal("the slot did not change")
	}
	return img
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// contentOf opens the journal and slot given, in a directory of their
// own, and returns the journal's content.
func contentOf(t *testing.T, journal, slot []byte) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	if err := os.WriteFile(path, journal, 0o600); err != nil {
		t.Fatal(err)
	}
	if slot != nil {
		if err := os.WriteFile(redoPath(path), slot, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Verify(); err != nil {
		t.Error(err)
	}
	s, err := Dump(db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRedoSlotReplaysOnlyTheNextRecordOfThisJournal: the crash image with
// the record replays to the state acknowledged; every slot that is not
// this journal's next whole record leaves journal.db as it is.
func TestRedoSlotReplaysOnlyTheNextRecordOfThisJournal(t *testing.T) {
	img := imageOfLoggedCommit(t, "")
	if got := contentOf(t, img.journal, img.slot); got != img.after {
		t.Errorf("crash image with the record durable:\n%s\nwant the acknowledged state:\n%s", got, img.after)
	}
	other := imageOfLoggedCommit(t, "") // another journal: its own redo.id
	torn := bytes.Clone(img.slot)
	copy(torn[512:], img.staleSlot[512:1024]) // one sector old
	flipped := bytes.Clone(img.slot)
	flipped[redoHead+3] ^= 0x10
	for _, c := range []struct {
		name string
		slot []byte
	}{
		{"no slot", nil},
		{"zeros", make([]byte, redoSize)},
		{"empty", []byte{}},
		{"the record before, already applied", img.staleSlot},
		{"a torn record", torn},
		{"a bit flipped", flipped},
		{"another journal's record", other.slot},
		{"cut short", img.slot[:redoHead+10]},
	} {
		if got := contentOf(t, img.journal, c.slot); got != img.before {
			t.Errorf("%s: the open changed the journal:\n%s\nwant\n%s", c.name, got, img.before)
		}
	}
}

// TestRedoSlotReplaysARecordOfManyPages: a record longer than the page an
// Open reads first (a 20 KiB prompt) replays whole; with one of its later
// pages lost it does not replay at all.
func TestRedoSlotReplaysARecordOfManyPages(t *testing.T) {
	img := imageOfLoggedCommit(t, strings.Repeat("p", 20<<10))
	n := redoHead + int(binary.BigEndian.Uint32(img.slot[len(redoMagic)+24:])) + 4
	if n <= 4*redoPage {
		t.Fatalf("the record is %d bytes: not the many pages this test is for", n)
	}
	// (The states hold the 20 KiB prompt: they are not printed.)
	if got := contentOf(t, img.journal, img.slot); got != img.after {
		t.Errorf("crash image with the record durable: not the acknowledged state (%d bytes of content, want %d)", len(got), len(img.after))
	}
	lost := bytes.Clone(img.slot)
	clear(lost[3*redoPage : 4*redoPage])
	if got := contentOf(t, img.journal, lost); got != img.before {
		t.Errorf("a record with its fourth page lost changed the journal (%d bytes of content, want %d)", len(got), len(img.before))
	}
}

// TestReadOnlyOpenSaysUnreplayed: a read-only open (supervise status with
// no supervise running) cannot replay; it says the slot holds a commit
// journal.db lacks, and reads the state before it. A writable open
// replays it, after which a read-only open has nothing to say.
func TestReadOnlyOpenSaysUnreplayed(t *testing.T) {
	img := imageOfLoggedCommit(t, "")
	path := filepath.Join(t.TempDir(), "journal.db")
	if err := os.WriteFile(path, img.journal, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(redoPath(path), img.slot, 0o600); err != nil {
		t.Fatal(err)
	}
	readOnly := func() (bool, string) {
		t.Helper()
		db, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		s, err := Dump(db)
		if err != nil {
			t.Fatal(err)
		}
		return db.Unreplayed(), s
	}
	if un, s := readOnly(); !un || s != img.before {
		t.Errorf("read-only open of the crash image: Unreplayed %v (want true), state before the commit %v", un, s == img.before)
	}
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if db.Unreplayed() {
		t.Error("a writable open, which replays, says Unreplayed")
	}
	db.Close()
	if un, s := readOnly(); un || s != img.after {
		t.Errorf("read-only open after the replay: Unreplayed %v (want false), the acknowledged state %v", un, s == img.after)
	}
	// A slot that is not this journal's next record is no news.
	if err := os.WriteFile(redoPath(path), img.staleSlot, 0o600); err != nil {
		t.Fatal(err)
	}
	if un, _ := readOnly(); un {
		t.Error("a stale slot reads as Unreplayed")
	}
}

// TestRedoSlotSwapFaults: the slot replaced under supervise (cp x && mv x
// journal.db.redo) is a fault at the next logged commit, which is not
// acknowledged.
func TestRedoSlotSwapFaults(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range 2 {
		if err := db.UpdateLogged(func(tx *Tx) error { return tx.AddRestart() }); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, redoPath(path), filepath.Join(dir, "x"))
	if err := os.Rename(filepath.Join(dir, "x"), redoPath(path)); err != nil {
		t.Fatal(err)
	}
	err = db.UpdateLogged(func(tx *Tx) error { return tx.AddRestart() })
	mustFaultReplaced(t, db, err)
}

// TestRedoSlotNotARegularFile: a link or a FIFO planted at the slot's name
// is neither followed nor waited on; commits are plain, and say so.
func TestRedoSlotNotARegularFile(t *testing.T) {
	for _, kind := range []string{"symlink", "fifo", "directory"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "journal.db")
			target := filepath.Join(dir, "target")
			if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
				t.Fatal(err)
			}
			var err error
			switch kind {
			case "symlink":
				err = os.Symlink(target, redoPath(path))
			case "fifo":
				err = syscall.Mkfifo(redoPath(path), 0o600)
			case "directory":
				err = os.Mkdir(redoPath(path), 0o700)
			}
			if err != nil {
				t.Fatal(err)
			}
			log, msgs := newLog()
			done := make(chan *DB)
			go func() {
				db, err := Open(path, Options{Log: log})
				if err != nil {
					t.Error(err)
				}
				done <- db
			}()
			var db *DB
			select {
			case db = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("Open blocked on the planted slot")
			}
			if db == nil {
				return
			}
			defer db.Close()
			for i := range 3 {
				if err := db.UpdateLogged(func(tx *Tx) error {
					return tx.PutSession(record.Session{ID: "s" + strconv.Itoa(i), State: record.Idle})
				}); err != nil {
					t.Fatal(err)
				}
			}
			db.View(func(tx *Tx) error {
				if _, ok, _ := tx.Session("s2"); !ok {
					t.Error("the commit is missing")
				}
				return nil
			})
			if b := readFile(t, target); string(b) != "keep" {
				t.Errorf("the link's target was written: %q", b)
			}
			if !strings.Contains(strings.Join(*msgs, "\n"), "redo slot cannot be used") {
				t.Errorf("nothing said the slot is unused: %q", *msgs)
			}
		})
	}
}

// TestLoggedCommitTooBigIsPlain: a transaction bigger than the slot is
// committed by bbolt before UpdateLogged returns, and leaves the slot
// alone.
func TestLoggedCommitTooBigIsPlain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	db := open(t, path)
	for i := range 2 {
		if err := db.UpdateLogged(func(tx *Tx) error {
			return tx.PutSession(record.Session{ID: "s" + strconv.Itoa(i), State: record.Idle})
		}); err != nil {
			t.Fatal(err)
		}
	}
	db.View(func(*Tx) error { return nil }) // the last bbolt commit done
	slot := readFile(t, redoPath(path))
	big := strings.Repeat("x", redoSize)
	testFinish = func() { t.Error("a transaction too big for the slot was logged") }
	defer func() { testFinish = nil }()
	if err := db.UpdateLogged(func(tx *Tx) error { return tx.PutSession(record.Session{ID: "big", State: record.InTurn, Prompt: big}) }); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(slot, readFile(t, redoPath(path))) {
		t.Error("the slot changed")
	}
	db.View(func(tx *Tx) error {
		if s, ok, _ := tx.Session("big"); !ok || s.Prompt != big {
			t.Error("the big session is missing")
		}
		return nil
	})
}

// TestBoltCommitFailureAfterRecordPoisons: bbolt's commit fails (a write
// error) after the record was acknowledged. The journal faults: no later
// call runs on a journal that lacks an acknowledged change; the next open
// of the files replays it.
func TestBoltCommitFailureAfterRecordPoisons(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := db.UpdateLogged(func(tx *Tx) error {
			return tx.PutSession(record.Session{ID: "s" + strconv.Itoa(i), State: record.Idle})
		}); err != nil {
			t.Fatal(err)
		}
	}
	db.View(func(*Tx) error { return nil }) // the last bbolt commit done
	failWrites(db)
	if err := db.UpdateLogged(func(tx *Tx) error { return tx.PutSession(record.Session{ID: "lost?", State: record.Idle}) }); err != nil {
		t.Fatalf("UpdateLogged: %v; the record was durable, so nil", err)
	}
	if err := db.View(func(*Tx) error { return nil }); !errors.Is(err, ErrFault) {
		t.Fatalf("a call after the failed commit returned %v, want ErrFault", err)
	}
	select {
	case <-db.Faulted():
	default:
		t.Fatal("Faulted is not closed")
	}
	// The process would exit now; its files are what the next start reads.
	copyFile(t, path, filepath.Join(dir, "copy.db"))
	copyFile(t, redoPath(path), redoPath(filepath.Join(dir, "copy.db")))
	db2, err := Open(filepath.Join(dir, "copy.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	db2.View(func(tx *Tx) error {
		if _, ok, _ := tx.Session("lost?"); !ok {
			t.Error("the acknowledged change is not in the journal after the next open")
		}
		return nil
	})
}

// TestRedoSyncFailurePoisons: the record's fdatasync fails. The record may
// still reach the disk and it is the next one, so an Open could replay it;
// had the journal gone on, a later plain commit would be overwritten by
// that replay. The journal faults instead: no later commit.
func TestRedoSyncFailurePoisons(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "journal.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 2 {
		if err := db.UpdateLogged(func(tx *Tx) error {
			return tx.PutSession(record.Session{ID: "s" + strconv.Itoa(i), State: record.Idle})
		}); err != nil {
			t.Fatal(err)
		}
	}
	testSlotSync = func() error { return syscall.EIO }
	err = db.UpdateLogged(func(tx *Tx) error { return tx.PutSession(record.Session{ID: "s0", State: record.InTurn}) })
	testSlotSync = nil
	if !errors.Is(err, ErrFault) {
		t.Fatalf("UpdateLogged with its sync failing returned %v, want ErrFault", err)
	}
	if err := db.Update(func(tx *Tx) error { return tx.PutSession(record.Session{ID: "s0", State: record.Parked}) }); !errors.Is(err, ErrFault) {
		t.Fatalf("a plain commit after the failed sync returned %v, want ErrFault", err)
	}
	select {
	case <-db.Faulted():
	default:
		t.Fatal("Faulted is not closed")
	}
}

// failWrites makes every later write bbolt issues to db's file fail (see
// RecordWrites for the field).
func failWrites(db *DB) {
	type writeAt = func(b []byte, off int64) (int, error)
	f := reflect.ValueOf(db.b).Elem().FieldByName("ops").FieldByName("writeAt")
	p := (*writeAt)(unsafe.Pointer(f.UnsafeAddr()))
	*p = func([]byte, int64) (int, error) { return 0, syscall.EIO }
}
