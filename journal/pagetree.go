package journal

import (
	"encoding/binary"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// bbolt's page format (go.etcd.io/bbolt/internal/common/page.go and
// bucket.go, stable since boltdb): a 16-byte header (id u64, flags u16,
// count u16, overflow u32) and count elements of 16 bytes after it.
const (
	pageHeader     = 16
	elementSize    = 16
	branchPageFlag = 0x01
	leafPageFlag   = 0x02
	bucketLeafFlag = 0x01
	bucketHeader   = 16 // root pgid u64, sequence u64
	maxTreeDepth   = 64 // a B+tree of 4 KiB pages 64 levels deep would hold more than any disk
)

// checkPageTree walks the pages reachable from tx's root bucket, through
// branch pages and the root pages of nested buckets, and returns an error
// at the first page reached twice (a cycle or a page shared by two
// parents: damage either way, which bbolt's own check reports as "multiple
// references"), or a page that is neither a branch nor a leaf, lies past
// the file's end or holds elements outside itself. It reads the file
// through a mapping of its own and never follows a page twice, so a cycle
// ends the walk: bbolt's check and its cursors descend one without end (a
// recursion that grows the stack until the runtime kills the process).
// buckets bounds how deep it follows nested buckets: 1 walks the root
// bucket's pages and those of the buckets in it (v1), not theirs; -1 walks
// everything. Call it inside a transaction (the file does not change under
// it) on a goroutine with SetPanicOnFault, as DB.run does.
func checkPageTree(tx *bolt.Tx, path string, buckets int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	ps := uint64(tx.DB().Info().PageSize)
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	defer unix.Munmap(data)
	// The walk reads through a mapping of its own, whose pages would count
	// in the RSS a second time beside bbolt's: every release pages drops
	// them all (the walk's path back up faults its few pages in again).
	const release = 256
	visited := 0
	read := func(id, n uint64) []byte {
		if visited++; visited%release == 0 {
			_ = unix.Madvise(data, unix.MADV_DONTNEED)
		}
		return data[id*ps : (id+n)*ps]
	}
	pages := uint64(size) / ps
	seen := make([]uint64, (pages+63)/64) // a bit per page of the file
	mark := func(id uint64) bool {        // reports whether id was marked before
		w, b := id/64, uint64(1)<<(id%64)
		was := seen[w]&b != 0
		seen[w] |= b
		return was
	}
	var walk func(id uint64, depth, nested int) error
	walk = func(id uint64, depth, nested int) error {
		switch {
		case id < 2:
			return fmt.Errorf("a page refers to meta page %d", id)
		case id >= pages:
			return fmt.Errorf("page %d lies past the end of the file (%d bytes)", id, size)
		case mark(id):
			return fmt.Errorf("page %d is reached twice: a cycle or a page with two parents", id)
		case depth > maxTreeDepth:
			return fmt.Errorf("page %d lies %d levels deep", id, depth)
		}
		hdr := read(id, 1)
		flags := binary.NativeEndian.Uint16(hdr[8:10])
		count := uint64(binary.NativeEndian.Uint16(hdr[10:12]))
		overflow := uint64(binary.NativeEndian.Uint32(hdr[12:16]))
		end := (id + 1 + overflow) * ps
		if end > uint64(size) {
			return fmt.Errorf("page %d and its %d overflow pages lie past the end of the file", id, overflow)
		}
		for o := id + 1; o <= id+overflow; o++ {
			if mark(o) {
				return fmt.Errorf("page %d's overflow page %d is reached twice", id, o)
			}
		}
		page := hdr
		if overflow > 0 {
			page = read(id, 1+overflow)
		}
		if pageHeader+count*elementSize > uint64(len(page)) {
			return fmt.Errorf("page %d: %d elements do not fit in it", id, count)
		}
		for i := range count {
			e := pageHeader + i*elementSize
			switch flags {
			case branchPageFlag:
				if err := walk(binary.NativeEndian.Uint64(page[e+8:e+16]), depth+1, nested); err != nil {
					return err
				}
			case leafPageFlag:
				if binary.NativeEndian.Uint32(page[e:e+4])&bucketLeafFlag == 0 {
					continue
				}
				pos := uint64(binary.NativeEndian.Uint32(page[e+4 : e+8]))
				ksize := uint64(binary.NativeEndian.Uint32(page[e+8 : e+12]))
				vsize := uint64(binary.NativeEndian.Uint32(page[e+12 : e+16]))
				v := e + pos + ksize
				if vsize < bucketHeader || v+vsize > uint64(len(page)) {
					return fmt.Errorf("page %d: bucket element %d lies outside the page", id, i)
				}
				// Root 0 is an inline bucket: a leaf inside the value,
				// which holds no buckets of its own.
				if root := binary.NativeEndian.Uint64(page[v : v+8]); root != 0 && (buckets < 0 || nested < buckets) {
					if err := walk(root, depth+1, nested+1); err != nil {
						return err
					}
				}
			default:
				return fmt.Errorf("page %d has type %#x where a branch or a leaf belongs", id, flags)
			}
		}
		return nil
	}
	return walk(uint64(tx.Cursor().Bucket().Root()), 1, 0)
}
