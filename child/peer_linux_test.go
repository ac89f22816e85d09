//go:build linux && !supervise_portable

package child

import (
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// connector is a Python program that connects to the unix socket argv[1]
// in one of three ways (argv[2]):
//
//	direct: connects, sends one byte, waits for the socket to close;
//	orphan: waits until its parent has exited (it is started in the
//	        background of a shell that exits at once), then as direct;
//	forked: connects, forks, and exits; the child waits until it was
//	        re-parented (the connecting process is gone), then sends the
//	        byte and waits.
const connector = `
import os, socket, sys
path, mode = sys.argv[1], sys.argv[2]
def wait_orphaned(ppid):
    while os.getppid() == ppid:
        os.sched_yield()
if mode == "orphan":
    wait_orphaned(int(sys.argv[3]))
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
if mode == "forked":
    me = os.getpid()
    if os.fork() != 0:
        os._exit(0)
    wait_orphaned(me)
s.sendall(b"x")
s.recv(1)
`

func needPython(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the connector is a Python program")
	}
	return p
}

// accept listens on a fresh socket, runs start (which connects), and
// returns the peer of the first connection once it sent its byte.
func accept(t *testing.T, start func(path string)) *Peer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	start(path)
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	raw, _ := c.(*net.UnixConn).SyscallConn()
	var p *Peer
	raw.Control(func(fd uintptr) { p = PeerOf(int(fd)) })
	t.Cleanup(p.Close)
	if _, err := c.Read(make([]byte, 1)); err != nil {
		t.Fatalf("reading the connector's byte: %v", err)
	}
	return p
}

// A child of this process is of its tree (this process stands for
// supervise: the tree's orphans are re-parented to it).
func TestPeerChildIsTree(t *testing.T) {
	py := needPython(t)
	var cmd *exec.Cmd
	p := accept(t, func(path string) {
		cmd = exec.Command(py, "-c", connector, path, "direct")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Wait() }) // after the connection closed
	})
	if o, why := p.Origin(0, ""); o != OriginTree {
		t.Errorf("a child's origin = %v (%s), want tree", o, why)
	}
	if p.PID() != cmd.Process.Pid {
		t.Errorf("peer pid %d, want the connector's %d", p.PID(), cmd.Process.Pid)
	}
}

// A process whose parents reach init without this process is outside,
// and a process in the agent's cgroup would be tree whatever its parents:
// this one is not in a cgroup named for no agent.
func TestPeerOrphanIsOutside(t *testing.T) {
	py := needPython(t)
	// A reaper test made this process a child subreaper (process-wide):
	// the orphan would come here, and be of its tree. Not for this test,
	// which runs alone (it is not parallel).
	var flag int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&flag)), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if flag != 0 {
		unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	}
	p := accept(t, func(path string) {
		// sh starts the connector in the background and exits; the
		// connector, orphaned, goes to init (this test process is no
		// subreaper), then connects.
		cmd := exec.Command("sh", "-c", `"$0" -c "$1" "$2" orphan $$ </dev/null >/dev/null 2>&1 & exit 0`, py, connector, path)
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
	})
	if o, why := p.Origin(0, "/sys/fs/cgroup/no-such-agent"); o != OriginOutside {
		t.Errorf("an orphan re-parented to init: origin = %v (%s), want outside", o, why)
	}
	dir, err := cgroupOf(p.PID())
	if err != nil {
		t.Skipf("no cgroup v2 here: %v", err)
	}
	if o, why := p.Origin(0, dir); o != OriginTree {
		t.Errorf("a process in the agent's cgroup: origin = %v (%s), want tree", o, why)
	}
}

// Connect, fork, exit: the child that sends is not the peer; the peer is
// gone, and that is unknown, not outside.
func TestPeerForkedConnectionIsUnknown(t *testing.T) {
	py := needPython(t)
	p := accept(t, func(path string) {
		// Orphaned at once so that the sender is outside this process's
		// tree too: only the connector's death can refuse it.
		cmd := exec.Command("sh", "-c", `"$0" -c "$1" "$2" forked </dev/null >/dev/null 2>&1 & exit 0`, py, connector, path)
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
	})
	if o, why := p.Origin(0, ""); o != OriginUnknown {
		t.Errorf("a connection whose connector exited: origin = %v (%s), want unknown", o, why)
	}
}

// A closed Peer is unknown.
func TestPeerClosedIsUnknown(t *testing.T) {
	py := needPython(t)
	var cmd *exec.Cmd
	p := accept(t, func(path string) {
		cmd = exec.Command(py, "-c", connector, path, "direct")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Wait() }) // after the connection closed
	})
	p.Close()
	if o, _ := p.Origin(0, ""); o != OriginUnknown {
		t.Errorf("a closed peer's origin = %v, want unknown", o)
	}
}

// A socket that is not one yields an unknown peer.
func TestPeerOfBadFD(t *testing.T) {
	p := PeerOf(-1)
	defer p.Close()
	if o, why := p.Origin(0, ""); o != OriginUnknown || why == "" {
		t.Errorf("PeerOf(-1).Origin = %v (%q), want unknown with a reason", o, why)
	}
}
