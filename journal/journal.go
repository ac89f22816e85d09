package journal

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/record"
)

// Schema is the additive schema version inside the v1 root bucket.
//
// Schema 2: every session and run record carries its own check (check.go);
// a journal of schema 1 is migrated when opened for writing.
const Schema = 2

// schemaReach bounds the schema values Open takes for a newer release's:
// a journal whose schema n has Schema < n <= Schema+schemaReach, and whose
// schema record passes its check (see doc.go), is refused with ErrSchema
// and left alone. Any other value no release could have written: it is
// damage (ErrCorrupt), and the file is moved aside instead of refusing to
// start for ever. Releases raise the schema by one per additive change, so
// 16 covers any downgrade this project supports; a downgrade across more
// than 16 schema changes would see the newer journal as damaged, moved
// aside byte for byte, not lost.
const schemaReach = 16

// Errors returned by Open and Update.
var (
	// ErrLocked means another process holds the journal.
	ErrLocked = errors.New("journal is in use by another supervise")
	// ErrCorrupt means the file is damaged: not a bbolt file, bad
	// checksums, inconsistent pages, or a record that fails its own check
	// (a schema value no release wrote among them).
	ErrCorrupt = errors.New("journal is corrupt")
	// ErrNotJournal means the path holds something that is not a
	// supervise journal: a directory, a symlink, another program's bbolt
	// file.
	ErrNotJournal = errors.New("not a supervise journal")
	// ErrSchema means the journal was written by a newer supervise: its
	// schema is above Schema by at most 16 and its schema record passes
	// its check. Open refuses it and leaves it as it is.
	ErrSchema = errors.New("journal schema is newer than this supervise")
	// ErrReadOnly is returned by Update on a journal opened read-only.
	ErrReadOnly = errors.New("journal is open read-only")
	// ErrFault means a call faulted after the journal was opened: a read
	// of a page beyond the end of a file cut short while it was open (the
	// SIGBUS is made a panic and recovered), or a panic of bbolt on a
	// damaged page. The DB is then poisoned: every later call returns an
	// error wrapping ErrFault at once, without touching bbolt, and
	// DB.Faulted is closed. ErrFault matches ErrCorrupt too
	// (errors.Is(ErrFault, ErrCorrupt) is true).
	ErrFault error = &faultError{}
)

// LockedError is returned when another process holds the journal. It
// matches ErrLocked with errors.Is.
type LockedError struct {
	Path string
	// PID is the holder's pid from the owner sidecar file, 0 if unknown.
	PID int
}

func (e *LockedError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("journal %s is in use by supervise pid %d", e.Path, e.PID)
	}
	return fmt.Sprintf("journal %s is in use by another supervise", e.Path)
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Bucket and key names; see doc.go for the drawing.
var (
	bucketRoot     = []byte("v1")
	bucketMeta     = []byte("meta")
	bucketRuns     = []byte("runs")
	bucketSessions = []byte("sessions")
	bucketOpen     = []byte("open")

	keySchema   = []byte("schema")
	keySchemaCk = []byte("schema.crc")
	keyClean    = []byte("clean")
	keyOwner    = []byte("owner")
	keyChild    = []byte("child")
	keyRestarts = []byte("restarts")
)

// Options configure Open.
type Options struct {
	// Timeout bounds the wait for the file lock; 0 means 100ms. A second
	// supervisor should fail at once, not queue.
	Timeout time.Duration
	// ReadOnly opens with a shared lock for inspection; the file is not
	// created and Update fails.
	ReadOnly bool
	// Log, when set, is told of each record that fails its own check
	// (check.go), once per record.
	Log *slog.Logger
	// Inline runs every transaction on its caller's goroutine rather than
	// on one of the journal's: no hand-off to another thread and back,
	// which on an idle machine costs tens of µs each way (a restart's
	// commit paid two). A fault is still recovered, poisons the journal
	// and is returned, and every call after it returns ErrFault at once;
	// what Inline gives up is the return of a call that was already
	// waiting inside bbolt, on a lock another call's fault left held: it
	// stays blocked. So an owner that sets it watches Faulted with
	// something that makes no journal call (supervise's last resort kills
	// the agent's tree and exits 1 at once).
	Inline bool
}

// DB is an open journal. Its methods may be called from several
// goroutines at once, as bbolt's: one Update at a time runs, the others
// wait; Views run beside each other and beside an Update.
type DB struct {
	b        *bolt.DB
	path     string
	readOnly bool
	faults   faults
	inline   bool     // Options.Inline
	crc      crcMeter // the records' checks so far (check.go)
	// ident is the open file's identity, checked against the name after
	// every commit (identity.go); zero for a read-only journal.
	ident ident
	// legacy is set on a schema-1 journal opened read-only: its records
	// have no check, and are read as they are (check.go).
	legacy bool
	log    *slog.Logger
	// damagedSessions and damagedRuns count the records met that failed
	// their check.
	damagedSessions, damagedRuns damage
	// redo is the slot of UpdateLogged (redo.go), nil when read-only;
	// pending the bbolt commit of the last logged transaction.
	redo    *redoFile
	pending atomic.Pointer[pendingCommit]
	// unreplayed: read-only, and the slot holds a commit journal.db
	// lacks (Unreplayed).
	unreplayed bool
	// file is the open journal file and dir the directory it was opened
	// in, both nil when read-only: what keep.go needs to keep the file
	// when its name is replaced. keepOnce guards kept.
	file, dir *os.File
	keepOnce  sync.Once
	kept      keepState
}

// Open opens or creates the journal at path. See the package doc for the
// errors it returns; a file it rejects is left exactly as it was.
func Open(path string, opt Options) (db *DB, err error) {
	if opt.Timeout <= 0 {
		opt.Timeout = 100 * time.Millisecond
	}
	fi, err := os.Lstat(path)
	created := errors.Is(err, fs.ErrNotExist) && !opt.ReadOnly
	switch {
	case err == nil && !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: %w: it is a %s, not a regular file", path, ErrNotJournal, fileKind(fi.Mode()))
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, err
	case err != nil && opt.ReadOnly:
		return nil, err
	}
	// A damaged file can make bbolt panic or fault on a bad page while it
	// opens; turn that into ErrCorrupt instead of a crash loop. (bbolt's
	// handle, if it made one, is lost with its file lock: the file is
	// damaged, and the caller moves it aside.)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, r)
		}
	}()
	var file *os.File
	b, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:  opt.Timeout,
		ReadOnly: opt.ReadOnly,
		OpenFile: func(name string, flag int, mode os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag|syscall.O_NOFOLLOW, mode)
			file = f
			return f, err
		},
	})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, &LockedError{Path: path, PID: readOwnerPID(path)}
	case err != nil && isIOError(err):
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	case err != nil:
		// bbolt's own format errors: ErrInvalid, ErrVersionMismatch,
		// ErrChecksum, "file size too small", ...
		return nil, fmt.Errorf("%s: %w: %v", path, ErrCorrupt, err)
	}
	db = &DB{b: b, path: path, readOnly: opt.ReadOnly, faults: faults{ch: make(chan struct{})}, log: opt.Log, inline: opt.Inline}
	if !opt.ReadOnly {
		// The file bbolt locked must be the one at the name (see
		// identity.go); a name swapped while it opened is not damage, so
		// not ErrCorrupt: the caller may simply try again.
		if db.ident, err = identify(file, path); err != nil {
			db.closeBolt()
			return nil, fmt.Errorf("open journal: %w", err)
		}
		// The directory the journal is in, by a handle: where it is kept
		// if its name is replaced (keep.go), even if the state dir's own
		// name is swapped later.
		if db.dir, err = os.Open(filepath.Dir(path)); err != nil {
			db.closeBolt()
			return nil, fmt.Errorf("open journal %s: its directory: %w", path, err)
		}
		db.file = file
	}
	if err := db.init(); err != nil {
		db.closeBolt()
		return nil, err
	}
	if opt.ReadOnly {
		db.peekRedo()
	} else if err := db.openRedo(); err != nil {
		db.closeBolt()
		return nil, err
	}
	if created {
		// bbolt's fdatasyncs make the file's pages durable, not its name:
		// after a power cut a new file can be gone with every commit in
		// it, unless its directory is synced (ext4 with a journal happens
		// to commit the name with the first fdatasync; POSIX and other
		// filesystems do not promise it). Once here, before anything was
		// acknowledged. It also makes the rename of a damaged journal
		// durable, which Quarantine did just before a fresh Open.
		if err := syncDir(filepath.Dir(path)); err != nil {
			db.closeBolt()
			return nil, fmt.Errorf("open journal %s: sync its directory: %w", path, err)
		}
	}
	if !opt.ReadOnly {
		writeOwnerPID(path)
	}
	return db, nil
}

// syncDir fsyncs the directory dir, making the names in it durable. A
// filesystem that cannot sync a directory (EINVAL) has nothing to sync.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// isIOError reports whether err comes from the operating system (permission,
// disk, lock) rather than from bbolt reading a malformed file.
func isIOError(err error) bool {
	var pe *fs.PathError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &errno)
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	}
	return "special file"
}

// init creates the buckets of a new journal, or checks that an existing
// file is a journal this supervise can read.
func (db *DB) init() error {
	var schema uint64
	check := func(tx *bolt.Tx) error {
		// The few pages every open reads (the root bucket and v1), walked
		// first: bbolt's cursors descend a page cycle without end.
		if err := checkPageTree(tx, db.path, 1); err != nil {
			return fmt.Errorf("%s: %w: %v", db.path, ErrCorrupt, err)
		}
		root := tx.Bucket(bucketRoot)
		if root == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if empty {
				return errEmpty
			}
			return fmt.Errorf("%s: %w: it has no %s bucket", db.path, ErrNotJournal, bucketRoot)
		}
		for _, name := range [][]byte{bucketMeta, bucketRuns, bucketSessions, bucketOpen} {
			if root.Bucket(name) == nil {
				return fmt.Errorf("%s: %w: bucket %s/%s is missing", db.path, ErrCorrupt, bucketRoot, name)
			}
		}
		meta := root.Bucket(bucketMeta)
		if err := checkSchema(meta.Get(keySchema), meta.Get(keySchemaCk)); err != nil {
			return fmt.Errorf("%s: %w", db.path, err)
		}
		schema = binary.BigEndian.Uint64(meta.Get(keySchema))
		return nil
	}
	err := db.run(false, check)
	switch {
	case err == nil && schema < 2 && db.readOnly:
		db.legacy = true
		return nil
	case err == nil && schema < 2:
		return db.migrate()
	case !errors.Is(err, errEmpty):
		return err
	}
	if db.readOnly {
		return fmt.Errorf("%s: %w: the file is empty", db.path, ErrNotJournal)
	}
	return db.run(true, func(tx *bolt.Tx) error {
		root, err := tx.CreateBucket(bucketRoot)
		if err != nil {
			return err
		}
		for _, name := range [][]byte{bucketMeta, bucketRuns, bucketSessions, bucketOpen} {
			if _, err := root.CreateBucket(name); err != nil {
				return err
			}
		}
		meta := root.Bucket(bucketMeta)
		if err := putSchema(meta, Schema); err != nil {
			return err
		}
		return meta.Put(keyClean, []byte{1})
	})
}

// checkSchema tells a journal this build reads (nil) from one a newer
// release wrote (ErrSchema) and from damage (ErrCorrupt), given the schema
// record v and its check record ck (nil when absent: journals written
// before the check existed have none). A record that fails its check is
// damage. So is a value no release could have written: 0, or beyond
// Schema+schemaReach. A newer schema counts only with a check that
// passes: every release that writes one writes the check too.
func checkSchema(v, ck []byte) error {
	if len(v) != 8 {
		return fmt.Errorf("%w: bad schema record (%d bytes)", ErrCorrupt, len(v))
	}
	n := binary.BigEndian.Uint64(v)
	checked := ck != nil && bytes.Equal(ck, schemaCheck(v))
	switch {
	case ck != nil && !checked:
		return fmt.Errorf("%w: schema record %d fails its check", ErrCorrupt, n)
	case n == 0 || n > Schema+schemaReach:
		return fmt.Errorf("%w: schema record %d is no version any release wrote", ErrCorrupt, n)
	case n <= Schema:
		return nil
	case !checked:
		return fmt.Errorf("%w: schema record %d has no check, which every release with a newer schema writes", ErrCorrupt, n)
	}
	return fmt.Errorf("%w (schema %d, this build reads up to %d)", ErrSchema, n, Schema)
}

// schemaCheck returns the check record of the schema record v: the
// CRC-32C (Castagnoli) of "supervise journal schema " followed by v's 8
// bytes, 4 bytes big-endian.
func schemaCheck(v []byte) []byte {
	var sw *crcMeter // 33 bytes: in software
	sum := sw.crc32c(sw.crc32c(0, []byte("supervise journal schema ")), v)
	return binary.BigEndian.AppendUint32(nil, sum)
}

// putSchema writes the schema record n and its check.
func putSchema(meta *bolt.Bucket, n uint64) error {
	if err := meta.Put(keySchema, u64(n)); err != nil {
		return err
	}
	return meta.Put(keySchemaCk, schemaCheck(u64(n)))
}

var errEmpty = errors.New("empty bolt file")

// errVerified rolls back Verify's write transaction.
var errVerified = errors.New("journal: verified (rolled back)")

// Path returns the journal's file path.
func (db *DB) Path() string { return db.path }

// Close releases the journal and its lock. All calls must have returned.
//
// Close of a faulted journal (see Faulted) returns nil at once and
// releases nothing: bbolt's Close takes the locks the fault may have left
// held and would wait for ever. The file descriptor, the mapping and the
// file lock are left to the end of the process, which is right: a journal
// that faulted after open makes supervise exit, and one that faulted while
// it was being checked at start is moved aside (Quarantine) before a fresh
// one is created under its name, so nothing waits for that lock.
//
// Close of a writable journal whose name no longer holds the open file
// (the state dir's journal was removed or replaced, and no commit or
// CheckName has seen it yet) keeps the open file first (keep.go).
func (db *DB) Close() error {
	db.settle()
	if !db.readOnly && db.Fault() == nil && db.ident.fi != nil && db.ident.check(db.path) != nil {
		db.keepOpen()
	}
	if !db.readOnly {
		os.Remove(ownerPath(db.path))
	}
	return db.closeBolt()
}

// closeBolt closes bbolt's handle, unless the journal faulted (see Close).
func (db *DB) closeBolt() error {
	if db.Fault() != nil {
		return nil
	}
	if db.redo != nil {
		db.redo.close()
	}
	if db.dir != nil {
		db.dir.Close()
	}
	return db.b.Close()
}

// Update runs fn in one read-write transaction and commits it durably. An
// error from fn rolls everything back and is returned. A damaged page met
// on the way (bbolt panics, or the mapping faults) returns ErrFault instead
// of crashing the process, and poisons the journal: see Faulted. fn runs on
// a goroutine of the journal's (the caller's with Options.Inline), never
// after Update returned.
func (db *DB) Update(fn func(*Tx) error) error {
	if db.readOnly {
		return ErrReadOnly
	}
	if err := db.run(true, func(tx *bolt.Tx) error { return fn(db.tx(tx)) }); err != nil {
		return err
	}
	// Committed and synced, into the open file: before the caller
	// acknowledges anything, that file must still be the journal
	// (identity.go).
	return db.CheckName()
}

// View runs fn in a read-only transaction; like Update, a damaged page is
// ErrFault.
func (db *DB) View(fn func(*Tx) error) error {
	return db.run(false, func(tx *bolt.Tx) error { return fn(db.tx(tx)) })
}

func (db *DB) tx(tx *bolt.Tx) *Tx {
	return &Tx{tx: tx, root: tx.Bucket(bucketRoot), db: db, legacy: db.legacy}
}

// Verify runs bbolt's full consistency check (every page reachable or free,
// none referenced twice) and returns ErrCorrupt with the first problems.
// It first walks the page tree itself, following no page twice
// (checkPageTree): bbolt descends a page cycle without end.
func (db *DB) Verify() error {
	var problems []string
	// The check runs in a write transaction that is rolled back: bbolt
	// 1.5.0's Tx.Check reads the freelist without the lock a writer's Begin
	// holds while it releases pending pages (a data race the race detector
	// found beside the loop's commits), so no commit may begin while it
	// runs. Commits wait for the check; a read-only journal has no writer.
	check := func(tx *bolt.Tx) error {
		// bbolt checks on a goroutine of its own, where a read of a page
		// past the end of a truncated file is a SIGBUS that nothing can
		// recover (SetPanicOnFault is per goroutine): a crash at every
		// start. Every page lies below the high-water mark, so a file
		// shorter than that is damaged; say so before reading a page.
		fi, err := os.Stat(db.path)
		if err != nil {
			return err
		}
		if need := tx.Size(); fi.Size() < need {
			problems = append(problems, fmt.Sprintf("the file is %d bytes but its pages reach %d: truncated", fi.Size(), need))
			return nil
		}
		// bbolt's check and its cursors descend a page cycle without end:
		// walk the page tree first, following no page twice.
		if err := checkPageTree(tx, db.path, -1); err != nil {
			problems = append(problems, err.Error())
			return nil
		}
		for e := range tx.Check() {
			if len(problems) < 5 {
				problems = append(problems, e.Error())
			}
		}
		return nil
	}
	err := db.run(!db.readOnly, func(tx *bolt.Tx) error {
		if err := check(tx); err != nil {
			return err
		}
		if tx.Writable() {
			return errVerified // roll back: the check writes nothing
		}
		return nil
	})
	if errors.Is(err, errVerified) {
		err = nil
	}
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: %w: %s", db.path, ErrCorrupt, strings.Join(problems, "; "))
	}
	return nil
}

// CheckRecords decodes every record a supervisor reads at boot (meta, the
// last runs, the open sessions) and returns ErrCorrupt if a meta record
// does not decode: a damaged record must be caught before it is acted on,
// not crash the supervisor at every start. A damaged run or session record
// is not an error: it is quarantined (check.go).
func (db *DB) CheckRecords() error {
	return db.View(func(tx *Tx) error {
		if _, _, err := tx.Owner(); err != nil {
			return err
		}
		if _, _, err := tx.Child(); err != nil {
			return err
		}
		if _, err := tx.LastRuns(10); err != nil {
			return err
		}
		_, err := tx.OpenSessions()
		return err
	})
}

// Quarantine renames the file at path aside, to path.corrupt-<UTC time>,
// and returns the new name. It never deletes or rewrites the file.
func Quarantine(path string, now time.Time) (string, error) {
	dst := path + ".corrupt-" + now.UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(path, dst); err != nil {
		return "", err
	}
	// Its redo slot goes with it (redo.go), so that the copy keeps its
	// last commit. A slot left behind is harmless: it names the old
	// journal, and a fresh one replays only its own records.
	_ = os.Rename(redoPath(path), redoPath(dst))
	os.Remove(ownerPath(path))
	return dst, nil
}

func ownerPath(path string) string { return path + ".owner" }

// writeOwnerPID records our pid beside the journal so that a second
// supervisor can name the holder. Best effort: the lock itself is bbolt's.
// It never writes through a symbolic link, and is not synced: a pid lost
// to a power failure names no holder, and the holder is gone with it
// (statedir.WriteHint).
func writeOwnerPID(path string) {
	_ = statedir.WriteHint(filepath.Dir(path), filepath.Base(ownerPath(path)), []byte(strconv.Itoa(os.Getpid())+"\n"))
}

func readOwnerPID(path string) int {
	b, err := os.ReadFile(ownerPath(path))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// Tx is one journal transaction. It is valid only inside the function
// passed to Update or View.
type Tx struct {
	tx   *bolt.Tx
	root *bolt.Bucket
	db   *DB
	// legacy: records without a check are believed (check.go).
	legacy bool
	// ops takes down every change of a logged transaction (redo.go).
	ops *redoOps
}

func (t *Tx) meta() *bolt.Bucket     { return t.root.Bucket(bucketMeta) }
func (t *Tx) runs() *bolt.Bucket     { return t.root.Bucket(bucketRuns) }
func (t *Tx) sessions() *bolt.Bucket { return t.root.Bucket(bucketSessions) }
func (t *Tx) open() *bolt.Bucket     { return t.root.Bucket(bucketOpen) }

func (t *Tx) getJSON(b *bolt.Bucket, key []byte, v any) (bool, error) {
	raw := b.Get(key)
	if raw == nil {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("%w: record %q: %v", ErrCorrupt, key, err)
	}
	return true, nil
}

func (t *Tx) putJSON(b bucketID, key []byte, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return t.put(b, key, raw)
}

// Clean reports whether the last supervisor shut down cleanly.
func (t *Tx) Clean() bool {
	v := t.meta().Get(keyClean)
	return len(v) == 1 && v[0] == 1
}

// SetClean sets the clean-shutdown flag.
func (t *Tx) SetClean(clean bool) error {
	v := byte(0)
	if clean {
		v = 1
	}
	return t.put(inMeta, keyClean, []byte{v})
}

// Owner returns the supervisor that holds, or last held, the journal.
func (t *Tx) Owner() (Owner, bool, error) {
	var o Owner
	ok, err := t.getJSON(t.meta(), keyOwner, &o)
	return o, ok, err
}

// SetOwner records the supervisor holding the journal.
func (t *Tx) SetOwner(o Owner) error { return t.putJSON(inMeta, keyOwner, o) }

// Child returns the child believed running, if any.
func (t *Tx) Child() (Child, bool, error) {
	var c Child
	ok, err := t.getJSON(t.meta(), keyChild, &c)
	return c, ok, err
}

// SetChild records the running child; nil records that none runs.
func (t *Tx) SetChild(c *Child) error {
	if c == nil {
		return t.del(inMeta, keyChild)
	}
	return t.putJSON(inMeta, keyChild, c)
}

// Restarts returns how many relaunches after a death the journal has seen.
func (t *Tx) Restarts() uint64 {
	v := t.meta().Get(keyRestarts)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

// AddRestart counts one relaunch after a death.
func (t *Tx) AddRestart() error { return t.put(inMeta, keyRestarts, u64(t.Restarts()+1)) }

// State reads the policy document stored under key into v.
func (t *Tx) State(key string, v any) (bool, error) {
	return t.getJSON(t.meta(), []byte("state."+key), v)
}

// PutState stores a small policy document under key.
func (t *Tx) PutState(key string, v any) error {
	return t.putJSON(inMeta, []byte("state."+key), v)
}

// NextRun allocates the next run number (1, 2, ...).
func (t *Tx) NextRun() (uint64, error) { return t.nextSequence(inRuns) }

// PutRun stores r under its run number.
func (t *Tx) PutRun(r record.Run) error { return t.putRecord(inRuns, u64(r.Run), r) }

// DeleteRun removes run n (a reservation that never launched).
func (t *Tx) DeleteRun(n uint64) error { return t.del(inRuns, u64(n)) }

// Run returns run n; a damaged record (check.go) reads as absent.
func (t *Tx) Run(n uint64) (record.Run, bool, error) {
	v := t.runs().Get(u64(n))
	if v == nil {
		return record.Run{}, false, nil
	}
	r, ok := t.decodeRun(u64(n), v)
	return r, ok, nil
}

// LastRuns returns up to n of the most recent runs, newest first. It reads
// only those records (and the damaged ones among them, which it skips and
// counts: DB.DamagedRuns), however many runs the journal holds.
func (t *Tx) LastRuns(n int) ([]record.Run, error) {
	var out []record.Run
	c := t.runs().Cursor()
	for k, v := c.Last(); k != nil && len(out) < n; k, v = c.Prev() {
		if r, ok := t.decodeRun(k, v); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// PruneRuns deletes the oldest runs so that at most keep remain, deleting at
// most max in this call so that one transaction stays small. It returns how
// many it deleted.
func (t *Tx) PruneRuns(keep, max int) (int, error) {
	c := t.runs().Cursor()
	first, _ := c.First()
	last, _ := c.Last()
	if first == nil || keep <= 0 {
		return 0, nil
	}
	lo, hi := binary.BigEndian.Uint64(first), binary.BigEndian.Uint64(last)
	if hi-lo+1 <= uint64(keep) {
		return 0, nil
	}
	cut := hi - uint64(keep) + 1 // delete keys below cut
	var doomed [][]byte
	for k, _ := c.First(); k != nil && len(doomed) < max; k, _ = c.Next() {
		if binary.BigEndian.Uint64(k) >= cut {
			break
		}
		doomed = append(doomed, append([]byte(nil), k...))
	}
	for _, k := range doomed { // not Cursor.Delete then Next: that skips keys
		if err := t.del(inRuns, k); err != nil {
			return 0, err
		}
	}
	return len(doomed), nil
}

// PutSession stores s and keeps the open index in step with its state.
func (t *Tx) PutSession(s record.Session) error {
	id := []byte(s.ID)
	if len(id) == 0 {
		return errors.New("session without an id")
	}
	if err := t.putRecord(inSessions, id, s); err != nil {
		return err
	}
	if s.State.Open() {
		return t.put(inOpen, id, nil)
	}
	return t.del(inOpen, id)
}

// Session returns the session with the given id. A record that fails its
// check or does not decode reads as DamagedSession (check.go).
func (t *Tx) Session(id string) (record.Session, bool, error) {
	v := t.sessions().Get([]byte(id))
	if v == nil {
		return record.Session{}, false, nil
	}
	return t.decodeSession([]byte(id), v), true, nil
}

// OpenSessions returns the sessions in the open index, the only ones a
// boot or a death needs; settled sessions are not read.
func (t *Tx) OpenSessions() ([]record.Session, error) {
	var out []record.Session
	err := t.open().ForEach(func(k, _ []byte) error {
		s, ok, err := t.Session(string(k))
		if err != nil {
			return err
		}
		if ok {
			out = append(out, s)
		}
		return nil
	})
	return out, err
}

// SessionBrief is what ForEachSessionBrief decodes of every session.
type SessionBrief struct {
	ID      string
	State   record.SessionState
	Updated time.Time
}

// ForEachSessionBrief calls fn for every session, in id order, with only
// its state and last update decoded; full decodes the whole record when fn
// needs it (valid during the call). It is cheaper than ForEachSession for
// a scan that needs most records only to count them.
func (t *Tx) ForEachSessionBrief(fn func(b SessionBrief, full func() (record.Session, error)) error) error {
	return t.sessions().ForEach(func(k, v []byte) error {
		b, err := brief(k, v)
		if err != nil || !t.verified(v) {
			d := DamagedSession(string(k), "")
			b = SessionBrief{ID: d.ID, State: d.State}
		}
		return fn(b, func() (record.Session, error) { return t.decodeSession(k, v), nil })
	})
}

// brief reads a session record's state and last update without decoding
// it: a scan of 100 000 records costs milliseconds, not seconds. It relies
// on the record being json.Marshal's encoding of Session (as putJSON writes
// it): the id is the only field before "state", and inside a JSON string
// every quote is escaped, so the first `,"state":"` and `,"updated":"` are
// the fields themselves. Any other record is decoded in full.
func brief(k, v []byte) (SessionBrief, error) {
	b := SessionBrief{ID: string(k)}
	if st, ok := field(v, `,"state":"`); ok {
		if up, ok := field(v, `,"updated":"`); ok {
			if t, err := time.Parse(time.RFC3339Nano, string(up)); err == nil {
				b.State, b.Updated = record.SessionState(st), t
				return b, nil
			}
		}
	}
	var full struct {
		State   record.SessionState `json:"state"`
		Updated time.Time           `json:"updated"`
	}
	if err := json.Unmarshal(v, &full); err != nil {
		return b, fmt.Errorf("%w: session %q: %v", ErrCorrupt, k, err)
	}
	b.State, b.Updated = full.State, full.Updated
	return b, nil
}

// field returns the unescaped string value that follows key in v, if it
// has no escapes.
func field(v []byte, key string) ([]byte, bool) {
	i := bytes.Index(v, []byte(key))
	if i < 0 {
		return nil, false
	}
	rest := v[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return nil, false
	}
	return rest[:j], true
}

// settledKey is a settled session found by PruneSessions.
type settledKey struct {
	updated time.Time
	id      string
}

// PruneSessions deletes settled sessions (idle or closed: see
// SessionState.Open) beyond the newest keep, oldest first by their last
// update; open sessions are never deleted. It reads in one transaction and
// deletes in transactions of at most batch sessions, each rechecking that a
// doomed session is still settled and unchanged, so it may run beside the
// supervisor's own commits. It returns how many it deleted. keep <= 0 keeps
// everything.
func (db *DB) PruneSessions(keep, batch int) (int, error) {
	if keep <= 0 {
		return 0, nil
	}
	if batch <= 0 {
		batch = 1000
	}
	var settled []settledKey
	err := db.View(func(tx *Tx) error {
		return tx.ForEachSessionBrief(func(b SessionBrief, _ func() (record.Session, error)) error {
			if !b.State.Open() {
				settled = append(settled, settledKey{b.Updated, b.ID})
			}
			return nil
		})
	})
	if err != nil || len(settled) <= keep {
		return 0, err
	}
	sort.Slice(settled, func(i, j int) bool {
		if !settled[i].updated.Equal(settled[j].updated) {
			return settled[i].updated.Before(settled[j].updated)
		}
		return settled[i].id < settled[j].id
	})
	doomed := settled[:len(settled)-keep]
	deleted := 0
	for len(doomed) > 0 {
		n := min(batch, len(doomed))
		part := doomed[:n]
		doomed = doomed[n:]
		n = 0
		err := db.Update(func(tx *Tx) error {
			n = 0
			for _, d := range part {
				s, ok, err := tx.Session(d.id)
				if err != nil {
					return err
				}
				if !ok || s.State.Open() || !s.Updated.Equal(d.updated) {
					continue // changed since the scan: not ours to delete
				}
				if err := tx.del(inSessions, []byte(d.id)); err != nil {
					return err
				}
				if err := tx.del(inOpen, []byte(d.id)); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return deleted, err
		}
		deleted += n
	}
	return deleted, nil
}
