package journal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"unsafe"

	bolt "go.etcd.io/bbolt"
)

// This file lends the external tests of this directory (powerloss_test.go)
// what they need of bbolt, which only this package may import.

// RecordWrites makes rec see every write bbolt issues to db's file from now
// on, after the write returned nil: its bytes (rec may keep them: they are
// a copy) and its offset. bbolt has no hook for this; its pages go through
// the unexported func field DB.ops.writeAt (db.go: "ops struct { writeAt
// func(...) }", set to file.WriteAt at open), which is swapped here with
// reflect and unsafe. If a bbolt upgrade renames or retypes the field,
// RecordWrites panics: the test fails loudly instead of recording nothing.
// Call it before any transaction of db runs; rec runs on the goroutine
// that commits.
func RecordWrites(db *DB, rec func(b []byte, off int64)) {
	type writeAt = func(b []byte, off int64) (int, error)
	f := reflect.ValueOf(db.b).Elem().FieldByName("ops").FieldByName("writeAt")
	if !f.IsValid() || f.Type() != reflect.TypeOf(writeAt(nil)) {
		panic(fmt.Sprintf("bbolt's DB.ops.writeAt is gone or changed (%v): powerloss_test.go cannot record writes", f))
	}
	p := (*writeAt)(unsafe.Pointer(f.UnsafeAddr()))
	orig := *p
	*p = func(b []byte, off int64) (int, error) {
		n, err := orig(b, off)
		if err == nil {
			rec(bytes.Clone(b[:n]), off)
		}
		return n, err
	}
}

// PageSize returns the page size of db's file.
func PageSize(db *DB) int { return db.b.Info().PageSize }

// Dump returns every bucket, bucket sequence, key and value of db as text,
// in key order: the journal's logical content, whatever its pages.
func Dump(db *DB) (string, error) {
	var out bytes.Buffer
	err := db.run(false, func(tx *bolt.Tx) error {
		var walk func(path string, b *bolt.Bucket) error
		walk = func(path string, b *bolt.Bucket) error {
			fmt.Fprintf(&out, "%s seq=%d\n", path, b.Sequence())
			return b.ForEach(func(k, v []byte) error {
				if sub := b.Bucket(k); sub != nil {
					return walk(path+"/"+string(k), sub)
				}
				fmt.Fprintf(&out, "%s %q=%q\n", path, k, v)
				return nil
			})
		}
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name), b) })
	})
	return out.String(), err
}

// BoltInitImage returns what bbolt writes to a new, empty file before its
// first fdatasync (db.go init: two meta pages, an empty free list, an
// empty leaf, in one write at offset 0), made with bbolt itself in dir.
func BoltInitImage(dir string) ([]byte, error) {
	path := filepath.Join(dir, "bolt-init.db")
	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return nil, err
	}
	ps := b.Info().PageSize
	if err := b.Close(); err != nil {
		return nil, err
	}
	img, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	os.Remove(path)
	if len(img) < 4*ps {
		return nil, fmt.Errorf("bbolt's new file has %d bytes, not 4 pages of %d", len(img), ps)
	}
	return img[:4*ps], nil
}

// RecordRedoWrites makes rec see every record written to db's redo slot
// from now on (redo.go), after its write returned, before its sync.
func RecordRedoWrites(db *DB, rec func(b []byte, off int64)) { db.redo.record = rec }

// RedoPath is the name of the redo slot of the journal at path.
func RedoPath(path string) string { return redoPath(path) }

// RedoSize is the size of a redo slot.
const RedoSize = redoSize
