package journal

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync makes f's data durable: fdatasync, as bbolt does on Linux.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
