//go:build !linux || supervise_portable

package child

import "syscall"

// inner is empty where pidfds are not: a wrapper's inner death is not seen.
type inner map[int]int

// WatchInner does nothing on this platform: a wrapper CLI's inner death by
// a signal is not seen (Exit.InnerSignal stays 0).
func (p *Process) WatchInner() {}

func (in inner) killedBy() syscall.Signal { return 0 }

// InnerDeathsSeen reports whether WatchInner sees a wrapper's inner death:
// never on this platform.
func InnerDeathsSeen() bool { return false }
