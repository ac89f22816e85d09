package statecmd

import (
	"os"
	"syscall"
)

// inode is the file's inode number (0 when unknown): a rotation makes a
// new file at the same name.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
