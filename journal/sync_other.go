//go:build !linux

package journal

import "os"

// datasync makes f's data durable. Without fdatasync (macOS) it is
// File.Sync, which is fcntl(F_FULLFSYNC) there, as bbolt's own sync.
func datasync(f *os.File) error { return f.Sync() }
