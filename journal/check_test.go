package journal

import (
	"bytes"
	"encoding/json"
	"hash/crc32"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
	bolt "go.etcd.io/bbolt"
)

// Every single-bit flip of a sealed record is caught: CRC-32C finds every
// error of up to 32 consecutive bits, and a flip in the check member itself
// either breaks the check or makes the record look unsealed, which schema
// 2 does not believe either.
func TestSealCatchesEveryBitFlip(t *testing.T) {
	raw, _ := json.Marshal(benchSession(3))
	v := seal(raw)
	if ok, sealed := unseal(v); !ok || !sealed {
		t.Fatalf("unseal(seal(r)) = %v, %v", ok, sealed)
	}
	var s record.Session
	if err := json.Unmarshal(v, &s); err != nil || s.ID != benchSession(3).ID {
		t.Fatalf("a sealed record does not decode as JSON: %v", err)
	}
	tx := &Tx{}
	for i := range len(v) * 8 {
		w := bytes.Clone(v)
		w[i/8] ^= 1 << (i % 8)
		if tx.verified(w) {
			t.Fatalf("bit %d flipped passes the check: %s", i, w)
		}
	}
	if ok, sealed := unseal(raw); ok || sealed {
		t.Fatalf("an unsealed record reads as sealed")
	}
	if !(&Tx{legacy: true}).verified(raw) {
		t.Fatal("an unsealed record of a schema-1 journal is not believed")
	}
}

// rawValue returns the stored bytes of key in bucket name.
func rawValue(t *testing.T, db *DB, name, key []byte) []byte {
	t.Helper()
	var v []byte
	db.b.View(func(tx *bolt.Tx) error {
		v = bytes.Clone(tx.Bucket(bucketRoot).Bucket(name).Get(key))
		return nil
	})
	return v
}

func asJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// checkFixture reads every record the fixture holds and compares it with
// what was written.
func checkFixture(t *testing.T, db *DB) {
	t.Helper()
	err := db.View(func(tx *Tx) error {
		for _, want := range fixtureSessions() {
			got, ok, err := tx.Session(want.ID)
			if err != nil || !ok || asJSON(got) != asJSON(want) {
				t.Errorf("session %q: %v %v\n got %s\nwant %s", want.ID, ok, err, asJSON(got), asJSON(want))
			}
		}
		n := 0
		if err := tx.ForEachSessionBrief(func(b SessionBrief, full func() (record.Session, error)) error {
			n++
			if s, _ := full(); s.ParkedBy == ParkedByDamaged || b.State != s.State {
				t.Errorf("session %q reads damaged or inconsistent: brief %v, full %+v", b.ID, b.State, s)
			}
			return nil
		}); err != nil {
			return err
		}
		if n != len(fixtureSessions()) {
			t.Errorf("%d sessions, want %d", n, len(fixtureSessions()))
		}
		runs, err := tx.LastRuns(100)
		if err != nil {
			return err
		}
		if len(runs) != len(fixtureRuns()) {
			t.Errorf("%d runs, want %d", len(runs), len(fixtureRuns()))
		}
		for i, want := range fixtureRuns() {
			if got := runs[len(runs)-1-i]; asJSON(got) != asJSON(want) {
				t.Errorf("run %d:\n got %s\nwant %s", want.Run, asJSON(got), asJSON(want))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if db.DamagedRuns() != 0 || db.DamagedSessions() != 0 {
		t.Errorf("%d damaged runs, %d damaged sessions, want none", db.DamagedRuns(), db.DamagedSessions())
	}
}

// A journal written by the code of schema 1 (testdata/schema1.db.gz, no
// record checks) loses nothing: read-only it is read as it is; opened for
// writing it is migrated to schema 2, every record sealed and read the
// same, and it opens again as schema 2.
func TestMigrateSchema1(t *testing.T) {
	path := openFixture(t, "schema1.db.gz")
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !ro.legacy {
		t.Error("the fixture does not read as schema 1")
	}
	checkFixture(t, ro)
	ro.Close()

	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkFixture(t, db)
	for _, s := range fixtureSessions() {
		if ok, _ := unseal(rawValue(t, db, bucketSessions, []byte(s.ID))); !ok {
			t.Errorf("session %q was not sealed by the migration", s.ID)
		}
	}
	for _, r := range fixtureRuns() {
		if ok, _ := unseal(rawValue(t, db, bucketRuns, u64(r.Run))); !ok {
			t.Errorf("run %d was not sealed by the migration", r.Run)
		}
	}
	if err := db.CheckRecords(); err != nil {
		t.Error(err)
	}
	db.Close()
	db, err = Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.legacy {
		t.Error("the migrated journal still reads as schema 1")
	}
	checkFixture(t, db)
}

// A migration cut short (some records sealed, the schema still 1) carries
// on at the next open, in batches smaller than the bucket.
func TestMigrateCarriesOn(t *testing.T) {
	path := openFixture(t, "schema1.db.gz")
	// Seal two sessions by hand, as a first migration transaction would
	// have before a crash.
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketRoot).Bucket(bucketSessions)
		for _, s := range fixtureSessions()[:2] {
			bk.Put([]byte(s.ID), seal(bytes.Clone(bk.Get([]byte(s.ID)))))
		}
		return nil
	})
	b.Close()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkFixture(t, db)
}

// flipJournal writes a journal of settled sessions f0..f9 (each written
// once, so its record lies in one place in the file), runs 1..3, and one
// open session; it returns the file and where the value of session id
// lies in it.
func flipJournal(t *testing.T, id string) (raw []byte, at, n int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		for i := range 10 {
			if err := tx.PutSession(record.Session{ID: "f" + strconv.Itoa(i), State: record.Idle, Turn: "t", Outcome: "completed",
				Updated: benchNow.Add(time.Duration(i) * time.Second), Run: 1}); err != nil {
				return err
			}
		}
		for i := uint64(1); i <= 3; i++ {
			tx.NextRun()
			if err := tx.PutRun(record.Run{Run: i, PID: int(100 + i), Reason: record.ReasonExit, Started: benchNow}); err != nil {
				return err
			}
		}
		return tx.PutSession(record.Session{ID: "open", State: record.InTurn, Turn: "t", Updated: benchNow})
	})
	if err != nil {
		t.Fatal(err)
	}
	v := rawValue(t, db, bucketSessions, []byte(id))
	db.Close()
	raw, _ = os.ReadFile(path)
	if c := bytes.Count(raw, v); c != 1 {
		t.Fatalf("the record of %s is %d times in the file, want once", id, c)
	}
	return raw, bytes.Index(raw, v), len(v)
}

// R8: one bit flipped in a settled session record's value bytes, 50
// seeded flips. The journal opens (read-only and for writing), its boot
// checks pass, the session reads as damaged (parked by "damaged", with its
// id), every other record reads as it was, and pruning goes on.
func TestFlippedSessionRecord(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	raw, at, n := flipJournal(t, "f3")
	for range 50 {
		bit := rng.IntN(n * 8)
		w := bytes.Clone(raw)
		w[at+bit/8] ^= 1 << (bit % 8)
		path := filepath.Join(t.TempDir(), "journal.db")
		os.WriteFile(path, w, 0o600)
		for _, opt := range []Options{{ReadOnly: true}, {}} {
			db, err := Open(path, opt)
			if err != nil {
				t.Fatalf("bit %d: Open(%+v): %v", bit, opt, err)
			}
			if err := db.Verify(); err != nil {
				t.Errorf("bit %d: Verify: %v (bbolt's pages are intact)", bit, err)
			}
			if err := db.CheckRecords(); err != nil {
				t.Errorf("bit %d: CheckRecords: %v", bit, err)
			}
			err = db.View(func(tx *Tx) error {
				s, ok, err := tx.Session("f3")
				if err != nil || !ok || s.State != record.Parked || s.ParkedBy != ParkedByDamaged || s.ID != "f3" {
					t.Errorf("bit %d: f3 reads %+v %v %v, want damaged", bit, s, ok, err)
				}
				seen := 0
				err = tx.ForEachSessionBrief(func(b SessionBrief, full func() (record.Session, error)) error {
					seen++
					s, err := full()
					switch {
					case err != nil:
						t.Errorf("bit %d: %s: %v", bit, b.ID, err)
					case b.ID == "f3" && (b.State != record.Parked || s.ParkedBy != ParkedByDamaged):
						t.Errorf("bit %d: f3 briefs as %v, %+v", bit, b.State, s)
					case b.ID != "f3" && s.ParkedBy == ParkedByDamaged:
						t.Errorf("bit %d: %s reads damaged too", bit, b.ID)
					}
					return nil
				})
				if seen != 11 {
					t.Errorf("bit %d: %d sessions listed, want 11", bit, seen)
				}
				runs, _ := tx.LastRuns(10)
				if len(runs) != 3 {
					t.Errorf("bit %d: %d runs, want 3", bit, len(runs))
				}
				return err
			})
			if err != nil {
				t.Errorf("bit %d: %v", bit, err)
			}
			if !opt.ReadOnly {
				if _, err := db.PruneSessions(2, 100); err != nil {
					t.Errorf("bit %d: PruneSessions: %v", bit, err)
				}
				db.View(func(tx *Tx) error {
					if s, ok, _ := tx.Session("f3"); !ok || s.ParkedBy != ParkedByDamaged {
						t.Errorf("bit %d: the damaged session was pruned or changed: %+v %v", bit, s, ok)
					}
					return nil
				})
			}
			db.Close()
		}
	}
}

// A damaged run record is skipped and counted, once.
func TestFlippedRunRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *Tx) error {
		for i := uint64(1); i <= 3; i++ {
			tx.NextRun()
			tx.PutRun(record.Run{Run: i, PID: int(100 + i), Reason: record.ReasonExit})
		}
		return nil
	})
	v := rawValue(t, db, bucketRuns, u64(2))
	db.Close()
	raw, _ := os.ReadFile(path)
	i := bytes.Index(raw, v)
	raw[i+5] ^= 0x04
	os.WriteFile(path, raw, 0o600)
	var logged bytes.Buffer
	db, err = Open(path, Options{Log: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range 2 {
		db.View(func(tx *Tx) error {
			runs, err := tx.LastRuns(10)
			if err != nil || len(runs) != 2 || runs[0].Run != 3 || runs[1].Run != 1 {
				t.Errorf("LastRuns = %+v, %v; want runs 3 and 1", runs, err)
			}
			if _, ok, err := tx.Run(2); ok || err != nil {
				t.Errorf("Run(2) = %v, %v; want absent", ok, err)
			}
			return nil
		})
	}
	if n := db.DamagedRuns(); n != 1 {
		t.Errorf("DamagedRuns = %d, want 1", n)
	}
	if l := logged.String(); strings.Count(l, "failed its own check") != 1 || !strings.Contains(l, "damaged_runs=1") {
		t.Errorf("the damaged run is not logged once with its count:\n%s", l)
	}
}

// BenchmarkSeal and BenchmarkVerify are what the record check adds to a
// put and to a read of one session record the size a turn marker writes.
func BenchmarkSeal(b *testing.B) {
	raw, _ := json.Marshal(benchSession(3))
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		seal(raw)
	}
}

func BenchmarkVerify(b *testing.B) {
	raw, _ := json.Marshal(benchSession(3))
	v := seal(raw)
	tx := &Tx{}
	b.ReportAllocs()
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		if !tx.verified(v) {
			b.Fatal("fails")
		}
	}
}

// The records' CRC-32C, in software below hwAfter bytes and with hash/crc32
// beyond, is hash/crc32's Castagnoli sum for every length and split.
func TestCRC32C(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 5000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	var m crcMeter
	check := func() {
		for n := range 600 {
			p := buf[:n]
			if got, want := m.crc32c(0, p), crc32.Checksum(p, tab); got != want {
				t.Fatalf("crc32c of %d bytes = %08x, want %08x (after %d bytes checked)", n, got, want, m.n.Load())
			}
			k := n / 3
			if got, want := m.crc32c(m.crc32c(0, p[:k]), p[k:]), crc32.Checksum(p, tab); got != want {
				t.Fatalf("crc32c of %d bytes in two parts = %08x, want %08x", n, got, want)
			}
		}
		if got, want := m.crc32c(0, buf), crc32.Checksum(buf, tab); got != want {
			t.Fatalf("crc32c of %d bytes = %08x, want %08x", len(buf), got, want)
		}
	}
	check() // in software: 0.4 MB in all, under hwAfter
	for m.n.Load() <= hwAfter {
		m.crc32c(0, buf)
	}
	check() // with hash/crc32
	// A record sealed in one mode passes the check in the other.
	rec := []byte(`{"id":"s1","state":"idle"}`)
	if ok, sealed := unseal(m.seal(rec)); !ok || !sealed {
		t.Errorf("unseal in software of a record sealed with hash/crc32: %v, %v", ok, sealed)
	}
	if ok, sealed := m.unseal(seal(rec)); !ok || !sealed {
		t.Errorf("unseal with hash/crc32 of a record sealed in software: %v, %v", ok, sealed)
	}
}

// seal and unseal outside a journal: in software.
func seal(raw []byte) []byte            { return (*crcMeter)(nil).seal(raw) }
func unseal(v []byte) (ok, sealed bool) { return (*crcMeter)(nil).unseal(v) }

// DamagedRuns returns how many distinct run records this DB skipped
// because they failed their check or did not decode.
func (db *DB) DamagedRuns() int64 { return db.damagedRuns.n.Load() }

// DamagedSessions returns how many distinct session records this DB read
// as DamagedSession.
func (db *DB) DamagedSessions() int64 { return db.damagedSessions.n.Load() }
