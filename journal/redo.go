package journal

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// The redo slot: a commit durable after one fdatasync instead of bbolt's
// two.
//
// bbolt makes a commit durable with two syncs: its new pages, then the meta
// page that points at them (the order is what keeps a torn commit out). On
// a restart's path that pair is the largest step (docs/performance.md), and
// the death must be durable before the next child forks. UpdateLogged
// writes the transaction's changes, as a list of puts, deletes and bucket
// sequences, into one record in the file journal.db.redo, fdatasyncs it,
// and returns; bbolt's own commit of the same transaction then runs on a
// goroutine of its own, while the caller forks. If the process or the
// machine stops in between, the next Open replays the record.
//
// The file is one slot of redoSize bytes, written once with zeros (so a
// later overwrite allocates nothing and its fdatasync flushes data only),
// and every record is written at offset 0, padded with zeros to whole 4 KiB
// pages. One slot is enough: a logged transaction holds bbolt's writer lock
// from before its record is written until its bbolt commit has returned, so
// at most one record is ever not yet in journal.db.
//
// A record is
//
//	"svredo1\n" | journal id (16 bytes) | seq (u64) | payload length (u32) |
//	payload | CRC-32C (u32) of everything before it
//
// all big-endian; the payload is a list of operations, each
//
//	kind (1 put, 2 delete, 3 set the bucket's sequence) | bucket (0 meta,
//	1 runs, 2 sessions, 3 open) | key length (u32) | key | value length
//	(u32) | value
//
// The transaction itself stores seq under meta/redo, so journal.db says
// which record it holds. Open replays the slot when its record passes its
// check, names this journal (meta/redo.id, 16 random bytes set by the
// journal's first logged transaction, so that a slot left by a journal
// moved aside never lands in a fresh one) and is the next one
// (seq = meta/redo + 1). Anything else in the slot (zeros, a torn record,
// one already in journal.db, another journal's) is left alone: a record
// is in the slot before its caller hears of it, so a record that is not
// whole was never acknowledged.
//
// The slot is the journal: the same rules hold for it. It is opened without
// following a link at its name and refused if it is not a regular file
// (then every commit is plain bbolt, and supervise says so once), and after
// each record its name must still hold the open file (identity.go).

const (
	redoSize  = 256 << 10 // the slot; a bigger transaction commits plain
	redoPage  = 4096
	redoMagic = "svredo1\n"
	redoHead  = len(redoMagic) + 16 + 8 + 4
)

var (
	keyRedo   = []byte("redo")
	keyRedoID = []byte("redo.id")
)

// bucketID names one of v1's four buckets in a redo operation.
type bucketID byte

const (
	inMeta bucketID = iota
	inRuns
	inSessions
	inOpen
)

func (t *Tx) bucket(b bucketID) *bolt.Bucket {
	switch b {
	case inMeta:
		return t.meta()
	case inRuns:
		return t.runs()
	case inSessions:
		return t.sessions()
	}
	return t.open()
}

const (
	opPut byte = 1 + iota
	opDelete
	opSequence
)

// put, del and nextSequence are the only ways a Tx writes: each change is
// also taken down in t.ops when the transaction is logged.
func (t *Tx) put(b bucketID, k, v []byte) error {
	if err := t.bucket(b).Put(k, v); err != nil {
		return err
	}
	t.ops.add(opPut, b, k, v)
	return nil
}

func (t *Tx) del(b bucketID, k []byte) error {
	if err := t.bucket(b).Delete(k); err != nil {
		return err
	}
	t.ops.add(opDelete, b, k, nil)
	return nil
}

func (t *Tx) nextSequence(b bucketID) (uint64, error) {
	n, err := t.bucket(b).NextSequence()
	if err == nil {
		t.ops.add(opSequence, b, nil, u64(n))
	}
	return n, err
}

// redoOps is a logged transaction's record being built: the header's room,
// then the operations.
type redoOps struct{ buf []byte }

func (o *redoOps) add(kind byte, b bucketID, k, v []byte) {
	if o == nil {
		return
	}
	o.buf = append(o.buf, kind, byte(b))
	o.buf = binary.BigEndian.AppendUint32(o.buf, uint32(len(k)))
	o.buf = append(o.buf, k...)
	o.buf = binary.BigEndian.AppendUint32(o.buf, uint32(len(v)))
	o.buf = append(o.buf, v...)
}

// seal fills in the header and appends the check and the padding.
func (o *redoOps) seal(crc *crcMeter, id []byte, seq uint64) []byte {
	b := o.buf
	copy(b, redoMagic)
	copy(b[len(redoMagic):], id)
	binary.BigEndian.PutUint64(b[len(redoMagic)+16:], seq)
	binary.BigEndian.PutUint32(b[len(redoMagic)+24:], uint32(len(b)-redoHead))
	b = binary.BigEndian.AppendUint32(b, crc.crc32c(0, b))
	if pad := len(b) % redoPage; pad != 0 {
		b = append(b, make([]byte, redoPage-pad)...)
	}
	return b
}

// redoRecord is a decoded slot.
type redoRecord struct {
	id  []byte
	seq uint64
	ops []byte
}

// parseRedo decodes the slot's content; ok is false for anything that is
// not one whole record.
func parseRedo(crc *crcMeter, b []byte) (r redoRecord, ok bool) {
	if len(b) < redoHead+4 || string(b[:len(redoMagic)]) != redoMagic {
		return r, false
	}
	n := int(binary.BigEndian.Uint32(b[len(redoMagic)+24:]))
	if n > len(b)-redoHead-4 {
		return r, false
	}
	end := redoHead + n
	if crc.crc32c(0, b[:end]) != binary.BigEndian.Uint32(b[end:]) {
		return r, false
	}
	return redoRecord{id: b[len(redoMagic) : len(redoMagic)+16], seq: binary.BigEndian.Uint64(b[len(redoMagic)+16:]), ops: b[redoHead:end]}, true
}

// apply replays the record's operations in tx; an operation that does not
// decode fails the replay whole.
func (r redoRecord) apply(tx *bolt.Tx) error {
	root := tx.Bucket(bucketRoot)
	buckets := [...]*bolt.Bucket{root.Bucket(bucketMeta), root.Bucket(bucketRuns), root.Bucket(bucketSessions), root.Bucket(bucketOpen)}
	p := r.ops
	field := func() ([]byte, bool) {
		if len(p) < 4 {
			return nil, false
		}
		n := int(binary.BigEndian.Uint32(p))
		if n > len(p)-4 {
			return nil, false
		}
		f := p[4 : 4+n]
		p = p[4+n:]
		return f, true
	}
	for len(p) > 0 {
		if len(p) < 2 || int(p[1]) >= len(buckets) {
			return errors.New("an operation does not decode")
		}
		kind, b := p[0], buckets[p[1]]
		p = p[2:]
		k, ok1 := field()
		v, ok2 := field()
		if !ok1 || !ok2 {
			return errors.New("an operation does not decode")
		}
		var err error
		switch kind {
		case opPut:
			err = b.Put(bytes.Clone(k), bytes.Clone(v))
		case opDelete:
			err = b.Delete(k)
		case opSequence:
			if len(v) != 8 {
				return errors.New("a sequence is not 8 bytes")
			}
			err = b.SetSequence(binary.BigEndian.Uint64(v))
		default:
			return fmt.Errorf("unknown operation %d", kind)
		}
		if err != nil {
			return err
		}
	}
	return root.Bucket(bucketMeta).Put(keyRedo, u64(r.seq))
}

// redoFile is the open slot of a writable journal.
type redoFile struct {
	path string
	// h is the open slot, nil until it exists (the first logged
	// transaction makes it); CheckName reads it from any goroutine.
	h atomic.Pointer[slotHandle]
	// off: the slot cannot be used (not a regular file, not openable);
	// every commit is plain.
	off error
	// record, when set (tests), sees each record written, as RecordWrites
	// sees bbolt's writes.
	record func(b []byte, off int64)
}

// Test hooks, nil in production: testRedoDurable runs on UpdateLogged's
// caller once the record is durable and before bbolt's commit starts (the
// files are then what a kill -9 or a power cut would leave); testFinish at
// the start of bbolt's commit.
var testRedoDurable, testFinish func()

// testSlotSync, when set (tests), runs between a record's write and its
// fdatasync; an error it returns is the sync's.
var testSlotSync func() error

// slotHandle is the open slot file and its identity.
type slotHandle struct {
	f  *os.File
	id ident
}

// pendingCommit is a logged transaction's bbolt commit, running.
type pendingCommit struct {
	done chan struct{}
	err  error // set before done is closed
}

func redoPath(path string) string { return path + ".redo" }

// openRedo opens the slot of the journal at path, if there is one, and
// replays its record if journal.db lacks it.
func (db *DB) openRedo() error {
	r := &redoFile{path: redoPath(db.path)}
	db.redo = r
	h, err := openSlot(r.path, os.O_RDWR)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // made by the first logged transaction
	case err != nil:
		r.turnOff(db, err)
		return nil
	}
	r.h.Store(h)
	rec, ok, err := db.nextRecord(h.f)
	if err != nil || !ok {
		return err
	}
	if err := db.run(true, rec.apply); err != nil {
		if db.log != nil {
			db.log.Warn("journal: the redo slot's record passes its check but does not replay; left alone", "path", r.path, "seq", rec.seq, "err", err)
		}
		return nil
	}
	if db.log != nil {
		db.log.Info("journal: replayed the last commit from the redo slot: it was durable there, and the stop came before journal.db had it", "seq", rec.seq)
	}
	return nil
}

// nextRecord reads the slot f and returns its record if it is the one
// journal.db lacks: whole, this journal's, and the next.
func (db *DB) nextRecord(f *os.File) (redoRecord, bool, error) {
	slot, err := readRecord(f)
	if err != nil {
		return redoRecord{}, false, fmt.Errorf("open journal %s: read %s: %w", db.path, f.Name(), err)
	}
	rec, ok := parseRedo(&db.crc, slot)
	if !ok {
		return rec, false, nil
	}
	var id []byte
	var applied uint64
	if err := db.run(false, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketRoot).Bucket(bucketMeta)
		id = bytes.Clone(meta.Get(keyRedoID))
		if v := meta.Get(keyRedo); len(v) == 8 {
			applied = binary.BigEndian.Uint64(v)
		}
		return nil
	}); err != nil {
		return rec, false, err
	}
	// Else journal.db has it, or it is not this journal's.
	return rec, id != nil && bytes.Equal(id, rec.id) && rec.seq == applied+1, nil
}

// peekRedo is openRedo for a read-only journal, which cannot replay: it
// notes whether the slot holds a commit journal.db lacks (Unreplayed).
// A slot that cannot be read is no news: the next writable open says why.
func (db *DB) peekRedo() {
	h, err := openSlot(redoPath(db.path), os.O_RDONLY)
	if err != nil {
		return
	}
	defer h.f.Close()
	_, db.unreplayed, _ = db.nextRecord(h.f)
}

// Unreplayed reports whether a read-only journal's redo slot held, when
// it was opened, a commit that journal.db lacks: the process that made it
// stopped before bbolt's commit finished. The next writable open replays
// it; until then the journal reads as before that commit. Always false
// for a writable journal, which replays at open.
func (db *DB) Unreplayed() bool { return db.unreplayed }

// readRecord reads the slot's first page and, if its header gives a longer
// record, as much more as the record says (within the slot): a start reads
// one page for the usual record, not the whole slot.
func readRecord(f *os.File) ([]byte, error) {
	b := make([]byte, redoPage)
	n, err := f.ReadAt(b, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	b = b[:n]
	if n < redoHead || string(b[:len(redoMagic)]) != redoMagic {
		return b, nil
	}
	want := redoHead + int(binary.BigEndian.Uint32(b[len(redoMagic)+24:])) + 4
	if want <= n || n < redoPage {
		return b, nil
	}
	want = min(want, redoSize)
	b = append(b, make([]byte, want-n)...)
	m, err := f.ReadAt(b[n:], int64(n))
	if err != nil && err != io.EOF {
		return nil, err
	}
	return b[:n+m], nil
}

// openSlot opens the slot at path with flag, never following a link at
// its name nor blocking on what is there, and refuses anything but a
// regular file.
func openSlot(path string, flag int) (*slotHandle, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("it is a %s, not a regular file", fileKind(fi.Mode()))
	}
	return &slotHandle{f: f, id: ident{fi: fi}}, nil
}

// check returns an error wrapping ErrReplaced unless the slot's name holds
// the open slot (nil while there is none).
func (r *redoFile) check() error {
	if h := r.h.Load(); h != nil {
		return h.id.check(r.path)
	}
	return nil
}

// close closes the slot file, if open.
func (r *redoFile) close() {
	if h := r.h.Swap(nil); h != nil {
		h.f.Close()
	}
}

func (r *redoFile) turnOff(db *DB, err error) {
	r.off = err
	if db.log != nil {
		db.log.Warn("journal: the redo slot cannot be used; every commit waits for bbolt's two syncs", "path", r.path, "err", err)
	}
}

// create makes the slot: redoSize zeros, synced, its name synced.
func (r *redoFile) create() error {
	h, err := openSlot(r.path, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return err
	}
	f := h.f
	err = func() error {
		zeros := make([]byte, 16<<10)
		for off := int64(0); off < redoSize; off += int64(len(zeros)) {
			if _, err := f.WriteAt(zeros, off); err != nil {
				return err
			}
		}
		if err := f.Sync(); err != nil {
			return err
		}
		if err := syncDir(filepath.Dir(r.path)); err != nil {
			return err
		}
		return h.id.check(r.path)
	}()
	if err != nil {
		f.Close()
		return err
	}
	r.h.Store(h)
	return nil
}

// write puts rec in the slot and makes it durable.
func (r *redoFile) write(rec []byte) error {
	f := r.h.Load().f
	if _, err := f.WriteAt(rec, 0); err != nil {
		return err
	}
	if r.record != nil {
		r.record(bytes.Clone(rec), 0)
	}
	if testSlotSync != nil {
		if err := testSlotSync(); err != nil {
			return err
		}
	}
	return datasync(f)
}

// UpdateLogged is Update, durable sooner: it returns once fn's changes are
// in the redo slot, synced (one fdatasync), and both names hold the open
// files; bbolt's commit of the same transaction then finishes on a
// goroutine of the journal's. Every later call of the journal waits for
// that commit first, and a failure of it poisons the journal (Faulted):
// the change is durable in the slot but not in the open journal, which
// must not take another commit. A transaction too big for the slot, the
// journal's first (it names the journal, meta/redo.id), or one on a
// journal whose slot cannot be used commits as Update does.
//
// fn runs on the caller's goroutine, as with Options.Inline, whatever the
// journal's options.
func (db *DB) UpdateLogged(fn func(*Tx) error) (err error) {
	if db.readOnly {
		return ErrReadOnly
	}
	db.settle()
	if err := db.Fault(); err != nil {
		return err
	}
	r := db.redo
	if r.off != nil {
		return db.Update(fn)
	}
	if r.h.Load() == nil {
		if err := r.create(); err != nil {
			r.turnOff(db, err)
			return db.Update(fn)
		}
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	// A panic in bbolt or a memory fault poisons the journal, as in
	// runHere; the transaction is not rolled back (that may fault again),
	// so bbolt's writer lock stays held: nothing takes it after a fault.
	defer func() {
		if p := recover(); p != nil {
			err = db.poison(p)
		}
	}()
	btx, err := db.b.Begin(true)
	if err != nil {
		return err
	}
	meta := btx.Bucket(bucketRoot).Bucket(bucketMeta)
	id := bytes.Clone(meta.Get(keyRedoID))
	var seq uint64
	if v := meta.Get(keyRedo); len(v) == 8 {
		seq = binary.BigEndian.Uint64(v)
	}
	seq++
	t := db.tx(btx)
	if id == nil { // the journal's first: name it, commit plain
		id = make([]byte, 16)
		rand.Read(id)
		if err := meta.Put(keyRedoID, id); err != nil {
			btx.Rollback()
			return err
		}
	} else {
		t.ops = &redoOps{buf: make([]byte, redoHead, 4096)}
		if err := t.put(inMeta, keyRedo, u64(seq)); err != nil {
			btx.Rollback()
			return err
		}
	}
	if err := fn(t); err != nil {
		btx.Rollback()
		return err
	}
	if t.ops == nil || len(t.ops.buf)+4 > redoSize {
		if err := btx.Commit(); err != nil {
			return err
		}
		return db.CheckName()
	}
	if err := r.write(t.ops.seal(&db.crc, id, seq)); err != nil {
		// The record may still reach the disk (a failed fdatasync says
		// nothing of what did), and it is the next one: an Open would
		// replay it over any later commit. So the journal takes none.
		btx.Rollback()
		return db.poison(fmt.Errorf("write %s: %w", r.path, err))
	}
	// Durable in the slot. Before the caller acknowledges anything, both
	// names must hold the open files.
	if err := db.ident.check(db.path); err != nil {
		btx.Rollback()
		return db.replaced(err)
	}
	if err := r.check(); err != nil {
		btx.Rollback()
		return db.poison(err)
	}
	if testRedoDurable != nil {
		testRedoDurable()
	}
	p := &pendingCommit{done: make(chan struct{})}
	db.pending.Store(p)
	go db.finish(btx, p)
	return nil
}

// finish is bbolt's commit of a logged transaction.
func (db *DB) finish(btx *bolt.Tx, p *pendingCommit) {
	debug.SetPanicOnFault(true)
	defer func() {
		if r := recover(); r != nil {
			p.err = db.poison(r)
		}
		close(p.done)
	}()
	if testFinish != nil {
		testFinish()
	}
	if err := btx.Commit(); err != nil {
		p.err = db.poison(fmt.Errorf("the commit of a change already durable in %s failed: %w", db.redo.path, err))
		return
	}
	if err := db.ident.check(db.path); err != nil {
		p.err = db.replaced(err)
	}
}

// settle waits for a logged transaction's bbolt commit, if one runs, so
// that no call reads or writes the journal without it.
func (db *DB) settle() {
	if p := db.pending.Load(); p != nil {
		<-p.done
	}
}
