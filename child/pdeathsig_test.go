//go:build linux

package child

import (
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Fault matrix case 23, the parent-death signal's thread-exit regression
// (golang/go#27505): Pdeathsig fires when the thread that forked the child
// exits, not when the process does. The agent is started from a goroutine
// that locked its OS thread and then returns still locked, so that its
// thread exits, and other goroutines churn locked threads the same way;
// the agent must live on.
func TestFault23PdeathsigThreadExit(t *testing.T) {
	r := newReaper(t)
	var p *Process
	var startErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread() // never unlocked: this thread exits with the goroutine
		p, startErr = r.Start(Spec{Args: []string{"sleep", "1000"}})
	}()
	wg.Wait()
	if startErr != nil {
		t.Fatal(startErr)
	}
	t.Cleanup(func() { p.Kill(); <-p.Done() })
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			time.Sleep(time.Millisecond)
		}()
	}
	wg.Wait()
	// A child killed by its parent-death signal dies at once; give the
	// exiting threads a moment to be gone, then look.
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		select {
		case <-p.Done():
			e := p.Exit()
			t.Fatalf("the agent died when a thread of supervise exited: %s (signal %d)", e.String(), e.Signal)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := syscall.Kill(p.PID(), 0); err != nil {
		t.Fatalf("the agent is gone: %v", err)
	}
}
