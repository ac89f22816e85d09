package journal

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
	bolt "go.etcd.io/bbolt"
)

// TestMain lets the test binary act as a writer process that gets killed.
func TestMain(m *testing.M) {
	if path := os.Getenv("JOURNAL_HELPER_WRITE"); path != "" {
		helperWrite(path)
		return
	}
	if path := os.Getenv("JOURNAL_HELPER_LOGGED"); path != "" {
		hold, _ := strconv.Atoi(os.Getenv("JOURNAL_HELPER_HOLD"))
		helperLogged(path, hold)
		return
	}
	if path := os.Getenv("JOURNAL_HELPER_OPEN"); path != "" {
		db, err := Open(path, Options{})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		db.Close()
		return
	}
	os.Exit(m.Run())
}

// helperWrite commits sessions s0, s1, ... one transaction each, printing
// each id after its commit returned, until killed.
func helperWrite(path string) {
	db, err := Open(path, Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		id := "s" + strconv.Itoa(i)
		if err := db.Update(func(tx *Tx) error {
			return tx.PutSession(record.Session{ID: id, State: record.InTurn, Turn: "t"})
		}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(id)
	}
}

// open opens a fresh journal and checks its consistency when the test ends.
func open(t *testing.T, path string) *DB {
	t.Helper()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Verify(); err != nil {
			t.Errorf("journal inconsistent at end of test: %v", err)
		}
		db.Close()
	})
	return db
}

func TestCreateAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	err = db.Update(func(tx *Tx) error {
		if !tx.Clean() {
			t.Error("new journal not marked clean")
		}
		n, err := tx.NextRun()
		if err != nil || n != 1 {
			t.Errorf("first run number %d, %v", n, err)
		}
		if err := tx.PutRun(record.Run{Run: n, PID: 42, Started: now, Reason: record.ReasonRunning}); err != nil {
			return err
		}
		if err := tx.SetChild(&Child{Run: n, PID: 42, StartTime: 123, Tag: "T"}); err != nil {
			return err
		}
		if err := tx.AddRestart(); err != nil {
			return err
		}
		if err := tx.PutState("guard", map[string]int{"chain": 2}); err != nil {
			return err
		}
		return tx.SetClean(false)
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	db = open(t, path)
	db.View(func(tx *Tx) error {
		if tx.Clean() {
			t.Error("clean flag lost")
		}
		r, ok, err := tx.Run(1)
		if !ok || err != nil || r.PID != 42 || !r.Started.Equal(now) {
			t.Errorf("run 1 = %+v, %v, %v", r, ok, err)
		}
		c, ok, _ := tx.Child()
		if !ok || c.PID != 42 || c.StartTime != 123 {
			t.Errorf("child = %+v, %v", c, ok)
		}
		if tx.Restarts() != 1 {
			t.Errorf("restarts = %d", tx.Restarts())
		}
		var g map[string]int
		if ok, _ := tx.State("guard", &g); !ok || g["chain"] != 2 {
			t.Errorf("guard state = %v", g)
		}
		return nil
	})
	db.Update(func(tx *Tx) error { return tx.SetChild(nil) })
	db.View(func(tx *Tx) error {
		if _, ok, _ := tx.Child(); ok {
			t.Error("SetChild(nil) kept the child")
		}
		return nil
	})
}

func TestSecondOpenFailsFastNamingTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	open(t, path)
	start := time.Now()
	_, err := Open(path, Options{})
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	if le.PID != os.Getpid() {
		t.Errorf("holder pid %d, want %d", le.PID, os.Getpid())
	}
	if !strings.Contains(err.Error(), "in use by supervise pid") {
		t.Errorf("message %q does not name the holder", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second open took %v", d)
	}
	if _, err := Open(path, Options{ReadOnly: true}); !errors.Is(err, ErrLocked) {
		t.Errorf("read-only open while held: %v", err)
	}
}

// writeFile creates path with content and returns a function that checks
// the file is byte-for-byte unchanged.
func unchanged(t *testing.T, path string) func() {
	t.Helper()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		after, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(before, after) {
			t.Errorf("Open modified the rejected file (err %v)", err)
		}
	}
}

func TestRejectsWhatIsNotAJournal(t *testing.T) {
	dir := t.TempDir()

	notBolt := filepath.Join(dir, "text.db")
	os.WriteFile(notBolt, bytes.Repeat([]byte("not a journal\n"), 1000), 0o600)
	check := unchanged(t, notBolt)
	if _, err := Open(notBolt, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("text file: %v", err)
	}
	check()

	other := filepath.Join(dir, "other.db")
	b, _ := bolt.Open(other, 0o600, nil)
	b.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("widgets")); return err })
	b.Close()
	check = unchanged(t, other)
	if _, err := Open(other, Options{}); !errors.Is(err, ErrNotJournal) {
		t.Errorf("foreign bolt file: %v", err)
	}
	check()

	asDir := filepath.Join(dir, "dir.db")
	os.Mkdir(asDir, 0o700)
	if _, err := Open(asDir, Options{}); !errors.Is(err, ErrNotJournal) {
		t.Errorf("directory: %v", err)
	}

	link := filepath.Join(dir, "link.db")
	os.Symlink(filepath.Join(dir, "nowhere"), link)
	if _, err := Open(link, Options{}); !errors.Is(err, ErrNotJournal) {
		t.Errorf("dangling symlink: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "nowhere")); err == nil {
		t.Error("Open created the symlink's target")
	}

	if _, err := Open(filepath.Join(dir, "missing.db"), Options{ReadOnly: true}); err == nil {
		t.Error("read-only open created or accepted a missing file")
	}
}

// setSchema writes a fresh journal at path whose schema record is v and
// whose check record is ck (none when ck is nil), as a release, or damage,
// would have left it.
func setSchema(t *testing.T, path string, v, ck []byte) {
	t.Helper()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.b.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketRoot).Bucket(bucketMeta)
		if err := meta.Put(keySchema, v); err != nil {
			return err
		}
		if ck == nil {
			return meta.Delete(keySchemaCk)
		}
		return meta.Put(keySchemaCk, ck)
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
}

// Issue 21 item 6: damage is never mistaken for a version. A newer
// release's journal (a schema at most 16 ahead, with its check) is refused
// with ErrSchema, as before; a schema value no release could have written,
// or a schema record that fails its check, is ErrCorrupt, so that the
// journal is moved aside instead of refusing to start for ever. Either
// way Open leaves the file as it was, byte for byte.
func TestSchemaVersusDamage(t *testing.T) {
	const flipped = 4503599627370497 // schema 1 with bit 52 flipped: TestFault05RandomDamage seed 1796135621629718313
	checked := func(n uint64) []byte { return schemaCheck(u64(n)) }
	cases := []struct {
		name   string
		v, ck  []byte
		want   error // nil: opens
		reason string
	}{
		{"schema 1", u64(1), checked(1), nil, ""},
		{"schema 1 without a check (an older journal)", u64(1), nil, nil, ""},
		{"schema 2", u64(2), checked(2), nil, ""},
		{"schema 3 (a newer release)", u64(3), checked(3), ErrSchema, "schema 3"},
		{"schema 18 (16 ahead)", u64(Schema + schemaReach), checked(Schema + schemaReach), ErrSchema, "schema 18"},
		{"schema 19 (beyond reach)", u64(Schema + schemaReach + 1), checked(Schema + schemaReach + 1), ErrCorrupt, "no version"},
		{"schema 3 without a check", u64(3), nil, ErrCorrupt, "has no check"},
		{"schema 3 with the check of 2 (1 flipped)", u64(3), checked(2), ErrCorrupt, "fails its check"},
		{"schema 1 with a damaged check", u64(1), flip(checked(1), 2, 0x08), ErrCorrupt, "fails its check"},
		{"flipped schema with its own check", u64(flipped), checked(flipped), ErrCorrupt, "no version"},
		{"flipped schema with the check of 1", u64(flipped), checked(1), ErrCorrupt, "fails its check"},
		{"flipped schema without a check (an older journal)", u64(flipped), nil, ErrCorrupt, "no version"},
		{"schema 0", u64(0), checked(0), ErrCorrupt, "no version"},
		{"a 7-byte schema", u64(1)[1:], nil, ErrCorrupt, "bad schema record"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			setSchema(t, path, c.v, c.ck)
			if c.want == nil {
				db := open(t, path)
				if err := db.CheckRecords(); err != nil {
					t.Error(err)
				}
				return
			}
			check := unchanged(t, path)
			for _, opt := range []Options{{}, {ReadOnly: true}} {
				db, err := Open(path, opt)
				if err == nil {
					db.Close()
				}
				if errors.Is(err, ErrCorrupt) != (c.want == ErrCorrupt) || errors.Is(err, ErrSchema) != (c.want == ErrSchema) {
					t.Errorf("Open(%+v): %v, want only %v", opt, err, c.want)
				}
				if err != nil && !strings.Contains(err.Error(), c.reason) {
					t.Errorf("Open(%+v): %q does not say %q", opt, err, c.reason)
				}
			}
			check()
		})
	}
}

// schemaRecord is the schema record and its check as they lie in a page of
// the file: bbolt stores each key followed by its value, in key order, and
// keySchemaCk follows keySchema.
func schemaRecord(n uint64) []byte {
	b := append(append([]byte(nil), keySchema...), u64(n)...)
	return append(append(b, keySchemaCk...), schemaCheck(u64(n))...)
}

// The probe itself, in the file rather than through bbolt: one bit of the
// schema value flipped in the data pages (bbolt has no checksum there).
// Before, Open said the journal was newer; now it is damage.
func TestSchemaBitFlipInFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rec := schemaRecord(Schema)
	if bytes.Count(raw, rec) == 0 {
		t.Fatalf("schema record %q not found in the file", rec)
	}
	damaged := append([]byte(nil), rec...)
	damaged[len(keySchema)+1] ^= 0x10 // Schema + 2^52
	os.WriteFile(path, bytes.ReplaceAll(raw, rec, damaged), 0o600)
	check := unchanged(t, path)
	_, err = Open(path, Options{})
	if want := strconv.FormatUint(Schema|1<<52, 10); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), want) {
		t.Errorf("schema flipped to %s: %v, want ErrCorrupt", want, err)
	}
	check()
}

// fillJournal writes enough records to span many pages.
func fillJournal(t *testing.T, path string) {
	t.Helper()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		db.Update(func(tx *Tx) error {
			for j := 0; j < 50; j++ {
				n, _ := tx.NextRun()
				tx.PutRun(record.Run{Run: n, PID: j, Reason: record.ReasonExit, Argv: []string{strings.Repeat("x", 100)}})
				tx.PutSession(record.Session{ID: fmt.Sprintf("s%d-%d", i, j), State: record.InTurn})
			}
			return nil
		})
	}
	db.Close()
}

// TestCorruptFiles damages a real journal in the ways a disk or a person
// can, and checks that each is reported as corrupt, never opened as if
// nothing happened, and left untouched.
func TestCorruptFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.db")
	fillJournal(t, good)
	raw, _ := os.ReadFile(good)
	const page = 4096
	cases := map[string][]byte{
		"truncated to half":   raw[:len(raw)/2],
		"truncated mid-meta":  raw[:page+100],
		"meta pages zeroed":   append(make([]byte, 2*page), raw[2*page:]...),
		"zero-filled":         make([]byte, len(raw)),
		"one meta bit-flip":   flip(raw, 16+page*0, 0x01),
		"both meta bit-flips": flip(flip(raw, 20, 0x40), page+20, 0x40),
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "journal.db")
			os.WriteFile(path, content, 0o600)
			check := unchanged(t, path)
			db, err := Open(path, Options{})
			if err == nil {
				// bbolt fell back to the other meta page, or the damage is
				// in pages only a full check reaches.
				err = db.Verify()
				db.Close()
			}
			if name == "one meta bit-flip" {
				// One good meta page is enough: bbolt's two-meta design.
				if err != nil && !errors.Is(err, ErrCorrupt) {
					t.Errorf("unexpected error class: %v", err)
				}
			} else if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotJournal) {
				t.Errorf("damaged journal accepted: %v", err)
			}
			os.Remove(ownerPath(path))
			check()
		})
	}
}

func flip(b []byte, off int, mask byte) []byte {
	c := append([]byte(nil), b...)
	c[off] ^= mask
	return c
}

func TestQuarantine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	os.WriteFile(path, []byte("garbage"), 0o600)
	os.WriteFile(redoPath(path), []byte("slot"), 0o600)
	dst, err := Quarantine(path, time.Date(2026, 11, 29, 1, 2, 3, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(dst), "journal.db.corrupt-20261129T010203") {
		t.Errorf("quarantined as %s", dst)
	}
	if b, _ := os.ReadFile(dst); string(b) != "garbage" {
		t.Error("content changed")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Error("original path still exists")
	}
	if b, _ := os.ReadFile(redoPath(dst)); string(b) != "slot" {
		t.Error("the redo slot did not go with the journal")
	}
	db := open(t, path) // a fresh journal can start in its place
	_ = db
}

func TestOpenIndexTracksState(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "journal.db"))
	put := func(s record.Session) {
		t.Helper()
		if err := db.Update(func(tx *Tx) error { return tx.PutSession(s) }); err != nil {
			t.Fatal(err)
		}
	}
	openIDs := func() []string {
		var ids []string
		db.View(func(tx *Tx) error {
			ss, err := tx.OpenSessions()
			for _, s := range ss {
				ids = append(ids, s.ID+":"+string(s.State))
			}
			return err
		})
		return ids
	}
	put(record.Session{ID: "a", State: record.InTurn})
	put(record.Session{ID: "b", State: record.Idle})
	put(record.Session{ID: "c", State: record.Parked, Reason: "x"})
	if got := strings.Join(openIDs(), ","); got != "a:in_turn,c:parked" {
		t.Errorf("open = %s", got)
	}
	put(record.Session{ID: "a", State: record.Idle})
	put(record.Session{ID: "c", State: record.Closed})
	put(record.Session{ID: "b", State: record.Waiting})
	if got := strings.Join(openIDs(), ","); got != "b:waiting" {
		t.Errorf("open = %s", got)
	}
	var all []string
	db.View(func(tx *Tx) error {
		return tx.ForEachSession(func(s record.Session) error { all = append(all, s.ID); return nil })
	})
	if strings.Join(all, ",") != "a,b,c" {
		t.Errorf("all sessions = %v", all)
	}
	if err := db.Update(func(tx *Tx) error { return tx.PutSession(record.Session{}) }); err == nil {
		t.Error("session without id accepted")
	}
}

func TestLastRunsAndPrune(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "journal.db"))
	db.Update(func(tx *Tx) error {
		for i := 0; i < 25; i++ {
			n, _ := tx.NextRun()
			tx.PutRun(record.Run{Run: n})
		}
		return nil
	})
	runs := func() (nums []uint64) {
		db.View(func(tx *Tx) error {
			rs, _ := tx.LastRuns(100)
			for _, r := range rs {
				nums = append(nums, r.Run)
			}
			return nil
		})
		return
	}
	db.View(func(tx *Tx) error {
		rs, _ := tx.LastRuns(3)
		if len(rs) != 3 || rs[0].Run != 25 || rs[2].Run != 23 {
			t.Errorf("LastRuns(3) = %+v", rs)
		}
		return nil
	})
	var n int
	db.Update(func(tx *Tx) (err error) { n, err = tx.PruneRuns(10, 4); return })
	if got := runs(); n != 4 || len(got) != 21 || got[len(got)-1] != 5 {
		t.Errorf("after bounded prune: deleted %d, runs %v", n, got)
	}
	db.Update(func(tx *Tx) (err error) { n, err = tx.PruneRuns(10, 1000); return })
	if got := runs(); n != 11 || len(got) != 10 || got[len(got)-1] != 16 || got[0] != 25 {
		t.Errorf("after full prune: deleted %d, runs %v", n, got)
	}
}

// TestCommittedSurvivesKill kills a writer process with SIGKILL in the
// middle of a stream of commits: every commit it reported as returned must
// be in the journal, and the journal must be consistent.
func TestCommittedSurvivesKill(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "JOURNAL_HELPER_WRITE="+path)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(out)
		var acked []string
		for len(acked) < 20+round*7 {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("writer: %v (after %v)", err, acked)
			}
			acked = append(acked, strings.TrimSpace(line))
		}
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()

		db, err := Open(path, Options{})
		if err != nil {
			t.Fatalf("reopen after kill: %v", err)
		}
		if err := db.Verify(); err != nil {
			t.Errorf("round %d: %v", round, err)
		}
		db.View(func(tx *Tx) error {
			for _, id := range acked {
				if _, ok, _ := tx.Session(id); !ok {
					t.Errorf("round %d: acknowledged %s missing", round, id)
				}
			}
			return nil
		})
		db.Update(func(tx *Tx) error { // start the next round from scratch
			ss, _ := tx.OpenSessions()
			for _, s := range ss {
				s.State = record.Closed
				tx.PutSession(s)
			}
			return nil
		})
		db.Close()
	}
}

// A file cut short below its high-water mark, with the pages a boot reads
// still there: the full check reports it as corrupt instead of faulting on
// a page past the end of the file on bbolt's check goroutine (a SIGBUS no
// recover can catch, so a crash at every start).
func TestVerifyTruncatedBelowHighWater(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *Tx) error {
		for i := uint64(1); i <= 3000; i++ {
			if err := tx.PutRun(record.Run{Run: i, Argv: []string{strings.Repeat("x", 200)}}); err != nil {
				return err
			}
		}
		return nil
	})
	var need int64
	db.b.View(func(tx *bolt.Tx) error { need = tx.Size(); return nil })
	db.Close()
	full, _ := os.ReadFile(path)
	opened := 0
	for k := int64(1); k <= 8; k++ {
		// Cut k pages below the high-water mark; a cut the open itself
		// meets is fine (ErrCorrupt there), the point is the one it does not.
		if err := os.WriteFile(path, full[:need-k*4096], 0o600); err != nil {
			t.Fatal(err)
		}
		// Read-only, as an offline check opens it (a read-write open
		// loads the free list on the caller's goroutine).
		db, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			continue
		}
		opened++
		err = db.Verify()
		db.Close()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("Verify of a journal cut %d pages short: %v, want ErrCorrupt", k, err)
		}
	}
	if opened == 0 {
		t.Fatal("every cut was caught at open: the case the check must catch did not occur")
	}
}

// Fault matrix case 3's static half: the journal never runs with NoSync
// (nor skips the sync when it grows), so a commit that returned is on disk.
func TestNeverNoSync(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "journal.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.b.NoSync || db.b.NoGrowSync {
		t.Errorf("journal opened with NoSync=%v NoGrowSync=%v", db.b.NoSync, db.b.NoGrowSync)
	}
}

// TestNewJournalNameIsDurable checks, under strace, that creating a
// journal fsyncs its directory (so that a power cut cannot take the new
// file's name with its commits: the crash-image test models one file's
// pages, not its name), and that opening an existing one does not (no
// cost on a restart). Skipped without strace.
func TestNewJournalNameIsDurable(t *testing.T) {
	st, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("needs strace")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	syncs := func() int {
		t.Helper()
		out := filepath.Join(t.TempDir(), "trace")
		// -e signal=none: the Go runtime's SIGURG, printed while an
		// fsync is in flight on another thread, would split its line.
		cmd := exec.Command(st, "-f", "-qq", "-y", "-e", "trace=fsync", "-e", "signal=none", "-o", out, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "JOURNAL_HELPER_OPEN="+path)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("strace cannot trace here: %v: %s", err, b)
		}
		trace, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		// With -y each fd is followed by its path: fsync(3</tmp/.../001>).
		// The call's end is not matched: with -f, another thread's event
		// can still end the line in "<unfinished ...>".
		return len(regexp.MustCompile(`fsync\(\d+<`+regexp.QuoteMeta(dir)+`>`).FindAll(trace, -1))
	}
	if n := syncs(); n != 1 {
		t.Errorf("creating the journal fsynced its directory %d times, want 1", n)
	}
	if n := syncs(); n != 0 {
		t.Errorf("opening the existing journal fsynced its directory %d times, want 0", n)
	}
}

// TestVerifyBucketCycle opens a journal whose pages form a cycle (a crash
// image of a commit without its data sync, found by enumerating
// TestPowerLossCheckerCatchesNoSync's images without stopping): bbolt
// descends it without end, in tx.Check and in a plain cursor seek (a
// recursion that grows the stack until the runtime kills the process), so
// supervise would hang or crash at every start (fault-matrix case 5, not
// a power-loss case: bbolt's commit order cannot leave such a file).
// Verify walks the page tree first (checkPageTree), following no page
// twice, and must call the file damaged at once.
func TestVerifyBucketCycle(t *testing.T) {
	gz, err := os.ReadFile(filepath.Join("testdata", "bucket-cycle.db.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	img, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "journal.db")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		db, err := Open(path, Options{})
		if err == nil {
			err = db.Verify()
			db.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("Open and Verify = %v, want ErrCorrupt", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Verify did not return within 30 s: it recursed into the bucket cycle")
	}
}
