//go:build !linux

package chaos

import (
	"errors"
	"syscall"
)

type proc struct {
	pid   int
	ppid  int
	start uint64
	pgrp  int
	sid   int
	comm  string
	tag   string
}

func (p proc) String() string { return p.comm }

func (p proc) alive() bool { return false }

func (p proc) notifyClient() bool { return false }

func scanTree(prefix string, exact bool) []proc { return nil }

func walkTree(leader int) []proc { return nil }

type target struct{ pid int }

var errPlatform = errors.New("supervise chaos needs Linux (pidfd and /proc)")

func pin(pid int, check func() bool) (*target, error) { return nil, errPlatform }

func (t *target) kill() error { return errPlatform }

func (t *target) close() {}

// superviseAttr is empty: no parent-death signal outside Linux.
func superviseAttr() *syscall.SysProcAttr { return nil }
