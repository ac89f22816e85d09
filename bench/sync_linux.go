package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync flushes f's data to stable storage, as bbolt does on Linux
// (fdatasync).
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
