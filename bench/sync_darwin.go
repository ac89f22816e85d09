package main

import "os"

// datasync flushes f's data to stable storage, as bbolt does on macOS:
// File.Sync, which is fcntl(F_FULLFSYNC) there.
func datasync(f *os.File) error { return f.Sync() }
