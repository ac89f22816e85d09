package journal

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"

	"github.com/supervise-dev/supervise/record"
	bolt "go.etcd.io/bbolt"
)

// Records that check themselves (schema 2). bbolt checks its meta pages,
// not the records on its data pages: one flipped bit in a session record
// passes every page check, and a record that no longer decodes made
// status fail for good. So every session and run record ends with its own
// check, the CRC-32C (Castagnoli) of the record as json.Marshal wrote it,
// added as a last JSON member:
//
//	{"id":"s1","state":"idle",...,"crc32c":"1a2b3c4d"}
//
// The check covers the bytes before `,"crc32c":` followed by "}", which
// are json.Marshal's encoding of the record. The record stays JSON (a
// decoder ignores the member) and the fast readers (brief, field) find
// their fields where they were.
//
// A session record that fails its check, or does not decode, is
// quarantined: it reads as a session in state parked, ParkedBy
// ParkedByDamaged, with a reason saying so (DamagedSession), so that
// status shows it with its id and nothing resumes it; it is never
// deleted by pruning (it is parked). A damaged run record is skipped, and
// counted (DB.DamagedRuns). A journal of schema 1 (records without the
// check) is migrated when it is opened for writing: every record gets its
// check, and then the schema becomes 2; opened read-only, its records are
// read as they are.

// ParkedByDamaged marks a session whose journal record failed its own
// check or did not decode: its state is unknown, so it is parked, and a
// person decides (docs/reliability.md).
const ParkedByDamaged = "damaged"

// checkKey opens the check member of a record.
var checkKey = []byte(`,"crc32c":"`)

// checkLen is the length of the check member and the closing brace:
// `,"crc32c":"` 8 hex digits `"}`.
var checkLen = len(checkKey) + 8 + 2

// The records' check is CRC-32C (Castagnoli). hash/crc32 computes it with
// the CPU's CRC32 instruction, but making its Castagnoli table (at first
// use) also builds the tables of its three-way parallel loop, running the
// instruction over about 3 MB: 0.2 ms of every supervise start (perf, 60
// starts), for records of a few hundred bytes. So a journal's checks start
// in software, a table of 256 words made at first use in microseconds, and
// move to hash/crc32 once that journal has checked hwAfter bytes, where the
// parallel loop pays for itself (a large journal's check at open, a long
// listing). Both give the same sums (TestCRC32C).
const hwAfter = 1 << 20

// Both tables are made once, at first use, and never change.
var (
	castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })
	crcTable   = sync.OnceValue(func() *[256]uint32 {
		var t [256]uint32
		for i := range t {
			c := uint32(i)
			for range 8 {
				if c&1 == 1 {
					c = c>>1 ^ crc32.Castagnoli
				} else {
					c >>= 1
				}
			}
			t[i] = c
		}
		return &t
	})
)

// crcMeter counts the bytes a journal has checked, which decide how the
// next check is computed (hwAfter). A nil *crcMeter always computes in
// software.
type crcMeter struct{ n atomic.Int64 }

// crc32c returns the CRC-32C of p continued from crc, as crc32.Update with
// the Castagnoli table does.
func (m *crcMeter) crc32c(crc uint32, p []byte) uint32 {
	if m != nil && m.n.Add(int64(len(p))) > hwAfter {
		return crc32.Update(crc, castagnoli(), p)
	}
	t := crcTable()
	crc = ^crc
	for _, b := range p {
		crc = t[byte(crc)^b] ^ crc>>8
	}
	return ^crc
}

// seal returns raw, json.Marshal's encoding of a struct (an object with
// at least one member), with its check.
func (m *crcMeter) seal(raw []byte) []byte {
	if len(raw) < 3 || raw[len(raw)-1] != '}' {
		return raw // no struct's encoding: never written (putRecord marshals structs)
	}
	sum := m.crc32c(0, raw)
	out := make([]byte, 0, len(raw)+checkLen)
	out = append(out, raw[:len(raw)-1]...)
	out = append(out, checkKey...)
	out = hex.AppendEncode(out, []byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)})
	return append(out, '"', '}')
}

// unseal checks the record v: sealed reports whether it ends with a check
// member at all, ok whether that check passes.
func (m *crcMeter) unseal(v []byte) (ok, sealed bool) {
	n := len(v)
	if n < checkLen+2 || v[n-2] != '"' || v[n-1] != '}' {
		return false, false
	}
	i := n - checkLen
	if !bytes.Equal(v[i:i+len(checkKey)], checkKey) {
		return false, false
	}
	sum := m.crc32c(0, v[:i])
	sum = m.crc32c(sum, []byte{'}'})
	// Compared as text, lower-case as seal writes it: hex.Decode would take
	// an upper-case digit (one flipped bit) for the same value.
	var want [8]byte
	hex.Encode(want[:], []byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)})
	return bytes.Equal(v[i+len(checkKey):n-2], want[:]), true
}

// crc is the meter of t's journal, nil (software) for a Tx of none.
func (t *Tx) crc() *crcMeter {
	if t.db == nil {
		return nil
	}
	return &t.db.crc
}

// verified reports whether the record v may be believed: its check passes,
// or it has none and the journal is of schema 1 (read-only, not migrated).
func (t *Tx) verified(v []byte) bool {
	ok, sealed := t.crc().unseal(v)
	return ok || (!sealed && t.legacy)
}

// putRecord stores v, sealed, under key in b.
func (t *Tx) putRecord(b bucketID, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return t.put(b, key, t.crc().seal(raw))
}

// DamagedSession is what a session record that failed its own check (or
// did not decode) reads as: parked, by ParkedByDamaged, under its id.
func DamagedSession(id string, why string) record.Session {
	return record.Session{ID: id, State: record.Parked, ParkedBy: ParkedByDamaged,
		Reason: "the journal record of this session failed its checksum (" + why + "): its state is unknown, so it is not resumed " +
			"automatically; a person decides (supervise resume " + id + ")"}
}

// decodeSession decodes the session record v stored under key k, or
// returns DamagedSession if it fails its check or does not decode.
func (t *Tx) decodeSession(k, v []byte) record.Session {
	if !t.verified(v) {
		t.db.damaged(&t.db.damagedSessions, "session", k)
		return DamagedSession(string(k), "bad check")
	}
	var s record.Session
	if err := json.Unmarshal(v, &s); err != nil || s.ID != string(k) {
		t.db.damaged(&t.db.damagedSessions, "session", k)
		return DamagedSession(string(k), "it does not decode")
	}
	return s
}

// decodeRun decodes the run record v, false if it is damaged (counted).
func (t *Tx) decodeRun(k, v []byte) (record.Run, bool) {
	var r record.Run
	if !t.verified(v) || json.Unmarshal(v, &r) != nil {
		t.db.damaged(&t.db.damagedRuns, "run", k)
		return record.Run{}, false
	}
	return r, true
}

// damage counts the damaged records a DB met, each key once.
type damage struct {
	mu   sync.Mutex
	seen map[string]bool
	n    atomic.Int64
}

func (db *DB) damaged(d *damage, kind string, k []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	if d.seen[string(k)] || len(d.seen) >= 1<<16 {
		return
	}
	d.seen[string(k)] = true
	d.n.Add(1)
	if db.log != nil {
		db.log.Error("journal: a record failed its own check and is quarantined", "kind", kind,
			"key", fmt.Sprintf("%q", k), "damaged_sessions", db.damagedSessions.n.Load(), "damaged_runs", db.damagedRuns.n.Load())
	}
}

// migrateBatch bounds the records one migration transaction rewrites.
const migrateBatch = 10000

// migrate brings a schema-1 journal to schema 2: every session and run
// record without a check gets one, computed over the record as it is
// (json.Marshal's encoding, which is what schema 1 wrote), in transactions
// of at most migrateBatch records; then the schema record says 2. A crash
// midway leaves schema 1, and the next open carries on: a record that
// already has a check is left alone. Nothing is decoded, dropped or
// rewritten otherwise.
func (db *DB) migrate() error {
	for _, name := range [][]byte{bucketSessions, bucketRuns} {
		var after []byte // the last key looked at
		for done := false; !done; {
			err := db.run(true, func(tx *bolt.Tx) error {
				b := tx.Bucket(bucketRoot).Bucket(name)
				c := b.Cursor()
				k, v := c.First()
				if after != nil {
					k, v = c.Seek(after)
					if k != nil && bytes.Equal(k, after) {
						k, v = c.Next()
					}
				}
				type record struct{ k, v []byte }
				var batch []record
				for ; k != nil && len(batch) < migrateBatch; k, v = c.Next() {
					after = bytes.Clone(k)
					if _, sealed := db.crc.unseal(v); sealed || v == nil {
						continue // checked already (or a nested bucket: none are)
					}
					batch = append(batch, record{after, db.crc.seal(v)})
				}
				done = k == nil
				for _, r := range batch { // not while the cursor walks
					if err := b.Put(r.k, r.v); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s: migrating the journal to schema %d: %w", db.path, Schema, err)
			}
		}
	}
	return db.run(true, func(tx *bolt.Tx) error {
		return putSchema(tx.Bucket(bucketRoot).Bucket(bucketMeta), Schema)
	})
}
