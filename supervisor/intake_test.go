package supervisor

import (
	"io"
	"os"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/marker"
)

// A datagram accepted for a tree that has died by the time the loop takes
// it is dropped, its barrier closed without the acknowledgement byte; the
// live tree's datagrams are applied.
func TestLateDatagramFromADeadRun(t *testing.T) {
	s := newTestSupervisor(t)
	s.root.Store(&treeRoot{pid: 1 << 30, run: 5})

	late := inMsg{Message: marker.Message{PID: 100, Session: "late", Turn: "t1", Event: marker.EventTurnBegin}, run: 4}
	s.take(late)
	if _, ok := s.m.Sessions["late"]; ok {
		t.Error("a marker from run 4 was applied while run 5 is live")
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s.take(inMsg{Message: marker.Message{PID: 100, Barrier: true, Fd: w}, run: 4})
	r.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(r); err != nil || len(b) != 0 {
		t.Errorf("the dead run's barrier read %q, %v; want a bare close (EOF, no byte)", b, err)
	}

	live := inMsg{Message: marker.Message{PID: 101, Session: "live", Turn: "t1", Event: marker.EventTurnBegin}, run: 5}
	s.take(live)
	if sess, ok := s.m.Sessions["live"]; !ok || sess.Turn != "t1" {
		t.Errorf("the live run's marker was not applied: %+v", s.m.Sessions["live"])
	}

	// Between runs no tree is live: nothing from a tree is applied, but
	// supervise's own datagrams (run 0) are.
	s.root.Store(nil)
	s.take(inMsg{Message: marker.Message{PID: 101, Session: "between", Turn: "t2", Event: marker.EventTurnBegin}, run: 5})
	if _, ok := s.m.Sessions["between"]; ok {
		t.Error("a marker from a dead run was applied between runs")
	}

	// handle, on the Serve goroutine, drops it before the loop sees it.
	s.in.accepted = 4
	s.root.Store(&treeRoot{pid: 1 << 30, run: 5})
	s.handle(marker.Message{PID: 100, Session: "late2", Event: marker.EventTurnBegin})
	if len(s.ch.msgc) != 0 {
		t.Error("handle passed on a datagram accepted for a dead run")
	}
	s.in.accepted = 5
	s.handle(marker.Message{PID: 101, Session: "live2", Event: marker.EventTurnBegin})
	if len(s.ch.msgc) != 1 {
		t.Error("handle did not pass on the live run's datagram")
	}
}
